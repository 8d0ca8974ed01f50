"""Sentence vectors: one fixed, mean-pooled ELMo vector per sentence (TF Hub's `default` output), and the files
that make a saved ELMo folder load with `SentenceTransformer(folder, trust_remote_code=True)`.

    from elmo_hf.tools.embedding.sentence_vectors import sentence_vectors
    vectors = sentence_vectors(model, tokenizer, ["The bank raised its rates .", "We sat on the bank ."])  # (2, 2P)

The pooled vector of a sentence is the mean, over its words, of a fixed mix of the L + 1 layers of `hidden_states`:
`<S>`, `</S>` and padding are left out (as TF Hub's module, which pools bilm-tf's layers after removing the
sentence boundaries). The mix, `layers=`:

* `"average"` (default): the mean of the L + 1 layers. TF Hub's `default` is the mean over words of its `elmo`
  output, a weighted sum of the layers whose weights start equal (softmax of zeros, gamma 1): without a task to
  train the mix, equal weights are that output;
* `"top"`: the top biLSTM layer (`last_hidden_state`);
* an integer k: layer k of `hidden_states` (0 is the context-free character encoder);
* a list of L + 1 weights: `sum_k weights[k] * layer_k`, e.g. a trained `ElmoScalarMix`'s
  `(mix.gamma * mix.normalized_weights()).tolist()`.

A sentence without words gets a vector of zeros. The vectors do not depend on the batch (the model is stateless
and the pooling is per row): tested against sentence-by-sentence runs.

sentence-transformers (the optional extra): `save_for_sentence_transformers(folder)` once, then
`SentenceTransformer(folder, trust_remote_code=True).encode(sentences)` gives these vectors, also where only
torch, transformers and sentence-transformers are installed; in-library, `sentence_transformer(folder)` builds the
same model without writing files. Without those files, `SentenceTransformer(folder)` falls back to its default,
the mean of the top layer over every token, `<S>` and `</S>` included: not this vector.

TF Hub output names, here (`out = model(**batch, output_hidden_states=True)`, `ElmoModel`):

* `word_emb`: `out.hidden_states[0]` (the character encoder; here duplicated to 2P: its first half is TF Hub's);
* `lstm_outputs1`, `lstm_outputs2`: `out.hidden_states[1]`, `out.hidden_states[2]`;
* `elmo`: `ElmoScalarMix(L + 1)(out.hidden_states, mask)` (learned in a task head: `ElmoForSequenceClassification`);
* `default`: `mean_pool(out.hidden_states, batch["input_ids"], batch["attention_mask"])` or `sentence_vectors`.

The pooling math (`word_mask`, `mix_layers`, `mean_pool`) lives in `modeling_elmo/downstream_elmo.py`, which
travels with every saved model, so that the sentence-transformers module `modeling_elmo/elmo_sentence_pooling.py`,
copied into a saved folder, finds it there; it is imported here under the same names. This file does not travel.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from elmo_hf.modeling_elmo import remote_code_elmo
from elmo_hf.modeling_elmo.downstream_elmo import LayerChoice, mean_pool, mix_layers
from elmo_hf.modeling_elmo.downstream_elmo import sentence_word_mask as word_mask
from elmo_hf.modeling_elmo.remote_code_elmo import copy_code, module_with_siblings

logger = logging.getLogger(__name__)

__all__ = ["LayerChoice", "mean_pool", "mix_layers", "save_for_sentence_transformers", "sentence_transformer",
           "sentence_vectors", "word_mask"]

POOLING_MODULE_FOLDER = "1_ElmoSentencePooling"
# The pooling module's file, copied into a folder with the siblings it imports that the folder lacks (a folder saved by
# this version of the model holds them all already: `elmo_hf.modeling_elmo.remote_code_elmo`).
POOLING_MODULE = "elmo_sentence_pooling"


def sentence_vectors(model, tokenizer, sentences: Sequence[str] | Sequence[Sequence[str]],
                     layers: LayerChoice = "average", batch_size: int = 64) -> torch.Tensor:
    """(len(sentences), 2P) float32 on the CPU: the pooled vector of each sentence. `sentences` are strings (split
    by the tokenizer's rule) or lists of words; `model` is an `ElmoModel`."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of sentences, not one string")
    pre_split = len(sentences) > 0 and not isinstance(sentences[0], str)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    pooled = []
    try:
        for start in range(0, len(sentences), batch_size):
            chunk = list(sentences[start : start + batch_size])
            batch = tokenizer(chunk, is_split_into_words=pre_split, padding=True, return_tensors="pt")
            input_ids, attention_mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
            with torch.inference_mode():
                out = model(input_ids, attention_mask=attention_mask, output_hidden_states=True)
                pooled.append(mean_pool(out.hidden_states, input_ids, attention_mask, layers,
                                          model.config.sentence_boundary_rows).cpu())
    finally:
        model.train(was_training)
    width = 2 * model.config.projection_dim
    return torch.cat(pooled) if pooled else torch.zeros(0, width)


OLDEST_SENTENCE_TRANSFORMERS = "5.4.0"  # the `sentence-transformers` extra's floor in pyproject.toml


def save_for_sentence_transformers(folder: str | Path, layers: LayerChoice = "average") -> Path:
    """Write the files that make the ELMo model saved in `folder` a sentence-transformers model whose `encode`
    returns `sentence_vectors(..., layers=layers)`: `modules.json` (the model as a `Transformer` module giving all
    layers, then `ElmoSentencePooling`), `sentence_bert_config.json`, `config_sentence_transformers.json`, the
    pooling module's config in `1_ElmoSentencePooling/`, and its code (`elmo_sentence_pooling.py`, and the
    `downstream_elmo.py` it imports where the folder lacks it).
    Load with `SentenceTransformer(folder, trust_remote_code=True)` (sentence-transformers imports a module class
    that is not its own only with `trust_remote_code`; in-library, `sentence_transformer(folder)` needs neither
    the files nor the flag). Returns `folder`."""
    folder = Path(folder)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{folder} is not a saved model folder (no config.json)")
    config = json.loads(config_file.read_text())
    if config.get("model_type") != "elmo":
        raise ValueError(f"{folder} holds a {config.get('model_type')!r} model, not an ELMo model")
    mix_layers(torch.zeros(config.get("num_layers", 2) + 1, 1, 1, 1), layers)  # an invalid choice fails here
    width = 2 * config["projection_dim"]
    pooling, *siblings = module_with_siblings(POOLING_MODULE, [remote_code_elmo.HERE])
    copy_code([pooling, *(file for file in siblings if not (folder / file.name).exists())], folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_MODULE_FOLDER, "type": "elmo_sentence_pooling.ElmoSentencePooling"},
    ]
    transformer = {
        "transformer_task": "feature-extraction",
        "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
        "module_output_name": "token_embeddings",
        "config_kwargs": {"output_hidden_states": True},  # the pooling module reads every layer
    }
    _write_json(folder / "modules.json", modules)
    _write_json(folder / "sentence_bert_config.json", transformer)
    _write_json(folder / "config_sentence_transformers.json",
                {"model_type": "SentenceTransformer", "similarity_fn_name": "cosine", "prompts": {},
                 "default_prompt_name": None,
                 # the oldest sentence-transformers that loads the files (modules.json names sentence_transformers.base,
                 # new in 5.4): an older one warns that the folder needs this version before its ModuleNotFoundError
                 "__version__": {"sentence_transformers": OLDEST_SENTENCE_TRANSFORMERS}})
    (folder / POOLING_MODULE_FOLDER).mkdir(exist_ok=True)
    layers_value = layers if isinstance(layers, str | int) else [float(w) for w in layers]
    _write_json(folder / POOLING_MODULE_FOLDER / "config.json",
                {"layers": layers_value, "embedding_dimension": width,
                 "boundary_rows": config.get("sentence_boundary_rows")})
    logger.info("%s: sentence-transformers files written (pooling: mean over words of the %s layers)", folder,
                layers_value)
    return folder


def sentence_transformer(model_name_or_path: str | Path, layers: LayerChoice = "average", device: str | None = None):
    """A `SentenceTransformer` built in-library (this project imported, no files written, no `trust_remote_code`)
    from any saved ELMo folder or Hub id: `encode` returns `sentence_vectors(..., layers=layers)`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer

    from elmo_hf.modeling_elmo.elmo_sentence_pooling import ElmoSentencePooling

    transformer = Transformer(str(model_name_or_path), config_kwargs={"output_hidden_states": True})
    width = 2 * transformer.auto_model.config.projection_dim
    layers_value = layers if isinstance(layers, str | int) else [float(w) for w in layers]
    mix_layers(torch.zeros(transformer.auto_model.config.num_layers + 1, 1, 1, 1), layers_value)
    pooling = ElmoSentencePooling(width, layers_value, transformer.auto_model.config.sentence_boundary_rows)
    return SentenceTransformer(modules=[transformer, pooling], device=device)


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")
