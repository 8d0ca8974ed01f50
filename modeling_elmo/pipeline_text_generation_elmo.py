"""`pipeline("text-generation")` from the forward language model of an `ElmoForPreTraining` folder.

The biLM's forward half is a language model: its top layer at word t, through the shared softmax, gives the
probabilities of word t + 1 over the word vocabulary. transformers' own text-generation pipeline cannot drive it
(`generate()` appends one id per token, and ELMo reads a row of character ids per word), so this pipeline does the
loop itself: the prompt's words are read once, then each chosen word is fed back alone with the LSTM state carried
over (`use_cache=True`), which gives the forward half exactly what reading the whole text again would (tested). A
teaching tool, and the other half of `forward_perplexity` below: a small ELMo writes the words its corpus taught it.

    generator = pipeline("text-generation", model=folder, trust_remote_code=True)
    generator("the cat sat on the", max_new_tokens=5)          # greedy
    generator("the cat", do_sample=True, top_k=10, seed=0)     # sampled, reproducible

The words come back joined by spaces (ELMo's tokens are whole words; there is no detokenizer). This file travels
with the model (it imports only torch and transformers), and every config.json names it in `custom_pipelines`.
"""

from __future__ import annotations

import math

import torch
from transformers import Pipeline

# The vocabulary entries generation never chooses: the sentence start, and the unknown word (which would print as
# "<UNK>"). The sentence end stops generation.
NEVER_GENERATED = ("<S>", "<UNK>")
SENTENCE_END = "</S>"


class ElmoTextGenerationPipeline(Pipeline):
    """Continues a prompt word by word with the forward LM (greedy, or sampled with `do_sample=True`).

    Call arguments: `max_new_tokens` (20), `do_sample` (False), `temperature` (1.0), `top_k` (None: the whole
    vocabulary), `seed` (a sampling seed, for a reproducible draw), `return_full_text` (True: the prompt and the new
    words; False: the new words only). Returns `[{"generated_text": ...}]` per prompt, as transformers' pipeline does.
    """

    def _sanitize_parameters(self, max_new_tokens=None, do_sample=None, temperature=None, top_k=None, seed=None,
                             return_full_text=None, **unused):
        if unused:
            raise TypeError(f"ElmoTextGenerationPipeline takes no argument {sorted(unused)}")
        choices = {"max_new_tokens": max_new_tokens, "do_sample": do_sample, "temperature": temperature,
                   "top_k": top_k, "seed": seed}
        if max_new_tokens is not None and (not isinstance(max_new_tokens, int) or max_new_tokens < 0):
            raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        if temperature is not None and not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        post = {} if return_full_text is None else {"return_full_text": return_full_text}
        return {}, {key: value for key, value in choices.items() if value is not None}, post

    def preprocess(self, prompt, **kwargs):
        if not isinstance(prompt, str):
            raise TypeError(f"text-generation takes a prompt str (or a list of them), got {type(prompt).__name__}")
        _word_vocab(self.tokenizer)
        encoded = self.tokenizer(prompt, return_tensors="pt")
        # <S> and the prompt's words, without the </S> the tokenizer closes the sentence with: generation goes on
        # from the last word
        return {"input_ids": encoded["input_ids"][:, :-1], "prompt": prompt}

    def _forward(self, model_inputs, max_new_tokens=20, do_sample=False, temperature=1.0, top_k=None, seed=None,
                 **kwargs):
        generator = None
        if seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(seed)
        choose = _Chooser(do_sample, temperature, top_k, generator)
        words = generate_words(self.model, self.tokenizer, model_inputs["input_ids"], max_new_tokens, choose)
        return {"prompt": model_inputs["prompt"], "words": words}

    def postprocess(self, model_outputs, return_full_text=True, **kwargs):
        new = " ".join(model_outputs["words"])
        if not return_full_text:
            return [{"generated_text": new}]
        prompt = model_outputs["prompt"]
        return [{"generated_text": f"{prompt} {new}" if prompt and new else prompt or new}]


class _Chooser:
    """The next word's id from the forward LM's log-probabilities: the most likely one, or a draw."""

    def __init__(self, do_sample: bool, temperature: float, top_k: int | None, generator: torch.Generator | None):
        self.do_sample, self.temperature, self.top_k, self.generator = do_sample, temperature, top_k, generator

    def __call__(self, log_probs: torch.Tensor) -> int:
        if not self.do_sample:
            return int(log_probs.argmax())
        scores = log_probs.float() / self.temperature
        if self.top_k is not None and self.top_k < scores.numel():
            kth = scores.topk(self.top_k).values[-1]
            scores = scores.masked_fill(scores < kth, -math.inf)
        probabilities = torch.softmax(scores, dim=-1).cpu()
        return int(torch.multinomial(probabilities, 1, generator=self.generator))


def _word_vocab(tokenizer) -> list[str]:
    vocab = getattr(tokenizer, "word_vocab", None)
    if not vocab:
        raise ValueError("text generation needs the tokenizer's word vocabulary (vocab.txt, which elmo-pretrain "
                         "saves beside the model): this tokenizer has none")
    return vocab


def _softmax_of(model):
    softmax = getattr(model, "softmax", None)
    if softmax is None:
        raise ValueError(f"text generation needs the language model's softmax of ElmoForPreTraining, "
                         f"not a {type(model).__name__}")
    return softmax


@torch.no_grad()
def generate_words(model, tokenizer, input_ids: torch.Tensor, max_new_tokens: int, choose) -> list[str]:
    """Up to `max_new_tokens` words after `input_ids` (`[1, tokens, 50]`, starting with `<S>`), stopping at `</S>`.
    `choose` maps the next word's log-probabilities (V,) to its vocabulary id."""
    vocab, softmax = _word_vocab(tokenizer), _softmax_of(model)
    banned = torch.tensor([i for i, word in enumerate(vocab) if word in NEVER_GENERATED], dtype=torch.long)
    half = model.config.projection_dim  # the forward LM's half of the top layer
    words, state, step = [], None, input_ids.to(model.device)
    for _ in range(max_new_tokens):
        out = model.elmo(step, state=state, use_cache=True, return_dict=True)
        state = out.state
        log_probs = softmax.log_probs(out.last_hidden_state[0, -1:, :half])[0]
        log_probs[banned.to(log_probs.device)] = -math.inf
        word = vocab[choose(log_probs)]
        if word == SENTENCE_END:
            break
        words.append(word)
        # the chosen word alone: the state carries the words before it
        step = torch.tensor([[tokenizer.convert_tokens_to_char_ids(word)]], dtype=step.dtype, device=step.device)
    return words


@torch.no_grad()
def forward_perplexity(model, tokenizer, text: str) -> float:
    """The forward LM's perplexity on `text`: exp of the mean negative log-likelihood of each of its words and of
    its `</S>`, each given the words before it (the measure ELMo's paper reports, one direction)."""
    _word_vocab(tokenizer)
    _softmax_of(model)
    encoded = tokenizer(text, return_tensors="pt", return_vocab_ids=True)
    was_training = model.training
    model.eval()
    try:
        out = model(input_ids=encoded["input_ids"].to(model.device),
                    attention_mask=encoded["attention_mask"].to(model.device),
                    labels=encoded["vocab_ids"].to(model.device))
    finally:
        model.train(was_training)
    return math.exp(float(out.forward_loss))
