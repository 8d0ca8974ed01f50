"""The perplexity that benchmarks/quality_ptb.py compares with word_language_model's: the tokens it scores, and
windows with the state carried equal to one pass over the whole stream."""

from __future__ import annotations

import math
import sys

import pytest
import torch
from conftest import REPO, tiny_config
from tolerances import Bound, assert_close

sys.path.insert(0, str(REPO / "benchmarks"))
import quality_ptb  # noqa: E402

# The same sums of float32 log-probabilities, grouped into windows or not: rounding only.
WINDOWED = Bound("windows with the state carried against one pass", 1e-5, scaled=True,
                 rule="1e-5 of the perplexity: float32 sums of the same terms in another order")


@pytest.fixture
def model_and_tokenizer(tmp_path):
    from elmo_hf.modeling_elmo import ElmoForPreTraining
    from elmo_hf.tokenization import ElmoTokenizer

    words = "the cat dog sat ran on mat <unk> .".split()
    (tmp_path / "vocab.txt").write_text("\n".join(["<S>", "</S>", "<UNK>", *words]) + "\n")
    tokenizer = ElmoTokenizer(vocab_file=str(tmp_path / "vocab.txt"), word_split="whitespace")
    torch.manual_seed(0)
    model = ElmoForPreTraining(tiny_config(vocab_size=tokenizer.word_vocab_size)).eval()
    return model, tokenizer


def test_every_word_and_one_end_of_sentence_a_line_are_scored(tmp_path, model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    text = " the cat sat on the mat .\n\n the dog ran \n <unk> sat on the <unk> .\n the cat ran .\n"
    (tmp_path / "test.txt").write_text(text)
    tokens = quality_ptb.token_stream(tmp_path / "test.txt")
    lines = [line.split() for line in text.splitlines() if line.split()]
    assert tokens[:3] == ["<S>", "the", "cat"] and tokens.count("</S>") == len(lines) == 4

    monkeypatch.setattr(quality_ptb, "EVAL_COLUMNS", 1)
    monkeypatch.setattr(quality_ptb, "EVAL_WINDOW", 3)
    windowed, scored = quality_ptb.forward_perplexity(model, tokenizer, tokens)
    assert scored == sum(len(words) + 1 for words in lines)  # words and </S>; no <S> after a </S>

    # one pass over the whole stream, the log-probabilities summed here
    from elmo_hf.train.data import BatchEncoder

    encoder = BatchEncoder(tokenizer)
    with torch.no_grad():
        hidden = model.elmo(torch.tensor([encoder.char_ids(tokens[:-1])])).last_hidden_state[0]
        log_probs = model.softmax.log_probs(hidden[:, : model.config.projection_dim])  # the forward half
    targets = encoder.vocab_ids(tokens[1:])
    nll = [-float(log_probs[i, t]) for i, (t, word) in enumerate(zip(targets, tokens[1:])) if word != "<S>"]
    assert_close(torch.tensor(windowed), torch.tensor(math.exp(sum(nll) / len(nll))), WINDOWED,
                 what="forward perplexity")


def test_their_log_is_read_as_their_script_writes_it(tmp_path):
    log = tmp_path / "theirs.log"
    log.write_text(
        "Using device: cpu\n"
        "| epoch   1 |   200/ 1327 batches | lr 20.00 | ms/batch 100.00 | loss  6.92 | ppl  1015.92\n"
        "| epoch   1 |   400/ 1327 batches | lr 20.00 | ms/batch 50.00 | loss  6.12 | ppl   455.00\n"
        + "-" * 89 + "\n| end of epoch   1 | time: 120.00s | valid loss  5.30 | valid ppl   200.34\n" + "-" * 89 + "\n"
        "| end of epoch   2 | time: 60.00s | valid loss  5.10 | valid ppl   164.02\n"
        "Exiting from training early\n" + "=" * 89 + "\n| End of training | test loss  5.05 | test ppl   156.02\n")
    read = quality_ptb.read_theirs(log)
    assert [(p["minutes"], p["valid_perplexity"]) for p in read["epoch_curve"]] == [(2.0, 200.34), (3.0, 164.02)]
    assert read["test_perplexity"] == 156.02 and read["stopped_early"] and read["epochs_completed"] == 2
    assert read["tokens_per_second"] == 10_500  # 20 x 35 tokens in 100 ms and in 50 ms: the median


class WordLSTM(torch.nn.Module):
    """The interface of word_language_model's RNNModel: (T, B) word ids and a state in, (T * B, V) log-probabilities
    and the state out."""

    def __init__(self, words: int):
        super().__init__()
        self.embedding, self.rnn = torch.nn.Embedding(words, 8), torch.nn.LSTM(8, 8)
        self.decoder = torch.nn.Linear(8, words)

    def forward(self, ids, hidden):
        output, hidden = self.rnn(self.embedding(ids), hidden)
        return torch.log_softmax(self.decoder(output), dim=-1).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, batch: int):
        return torch.zeros(1, batch, 8), torch.zeros(1, batch, 8)


def test_their_model_is_scored_on_the_same_tokens(tmp_path, monkeypatch):
    """Words and one <eos> a line, with <eos> read before the first word; windows with the state carried equal
    one pass over the whole stream."""
    (tmp_path / "test.txt").write_text(" a b c\n b c\n c a b a\n")
    tokens = quality_ptb.token_stream(tmp_path / "test.txt")
    word_ids = {word: i for i, word in enumerate(["<eos>", "a", "b", "c"])}
    torch.manual_seed(0)
    model = WordLSTM(len(word_ids)).eval()
    monkeypatch.setattr(quality_ptb, "EVAL_COLUMNS", 1)
    monkeypatch.setattr(quality_ptb, "EVAL_WINDOW", 2)
    windowed, scored = quality_ptb.their_perplexity(model, word_ids, tokens)
    assert scored == 9 + 3  # what forward_perplexity scores of the same text
    stream = torch.tensor([0, 1, 2, 3, 0, 2, 3, 0, 3, 1, 2, 1, 0])
    with torch.no_grad():
        log_probs, _ = model(stream[:-1, None], model.init_hidden(1))
    whole = math.exp(-float(log_probs.gather(1, stream[1:, None]).mean()))
    assert_close(torch.tensor(windowed), torch.tensor(whole), WINDOWED, what="their perplexity")


def test_per_sentence_scores_are_each_sentence_read_alone(tmp_path, model_and_tokenizer, monkeypatch):
    """Batched and padded, each sentence from a zero state: the sentences' streams scored one by one."""
    model, tokenizer = model_and_tokenizer
    (tmp_path / "test.txt").write_text(" the cat sat on the mat .\n the dog ran\n <unk> sat .\n")
    tokens = quality_ptb.token_stream(tmp_path / "test.txt")
    monkeypatch.setattr(quality_ptb, "EVAL_COLUMNS", 1)
    alone = [quality_ptb.forward_perplexity(model, tokenizer, ["<S>", *words, "</S>"])
             for words in quality_ptb.sentences_of(tokens)]
    expected = math.exp(sum(math.log(p) * n for p, n in alone) / sum(n for _, n in alone))
    batched = quality_ptb.forward_perplexity_per_sentence(model, tokenizer, tokens, batch_size=2)
    assert_close(torch.tensor(batched), torch.tensor(expected), WINDOWED, what="ours, per sentence")

    word_ids = {word: i for i, word in enumerate(["<eos>", "the", "cat", "sat", "on", "mat", ".", "dog", "ran",
                                                  "<unk>"])}
    torch.manual_seed(0)
    theirs = WordLSTM(len(word_ids)).eval()
    alone = [quality_ptb.their_perplexity(theirs, word_ids, ["<S>", *words, "</S>"])
             for words in quality_ptb.sentences_of(tokens)]
    expected = math.exp(sum(math.log(p) * n for p, n in alone) / sum(n for _, n in alone))
    batched = quality_ptb.their_perplexity_per_sentence(theirs, word_ids, tokens, batch_size=2)
    assert_close(torch.tensor(batched), torch.tensor(expected), WINDOWED, what="theirs, per sentence")
