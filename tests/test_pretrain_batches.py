"""`elmo-pretrain`'s batches (train/data.py): the stream windows' character ids, gathered from `BatchEncoder`'s table of
each distinct token's row, are exactly what building the tensor from the tokenizer's nested lists gives, as the
table grows and after it starts again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.train.data import BOS, EOS, BatchEncoder, StreamBatcher, stream_batches

WORDS = [f"w{i}" for i in range(3000)] + ["é", "bank", "a" * 80]  # accents, a word longer than its row


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["<S>", "</S>", "<UNK>", *WORDS[:50]]) + "\n", encoding="utf-8")
    return ElmoTokenizer(vocab_file=str(vocab))


def reference_rows(tokenizer, rows: list[list[str]]) -> torch.Tensor:
    """The definition: each token's ids from the tokenizer, the boundaries' from its sentence rows."""
    markers = dict(zip((BOS, EOS), getattr(tokenizer, "sentence_boundary_rows", None) or ()))
    return torch.tensor([[markers.get(t) or tokenizer.convert_tokens_to_char_ids(t) for t in row] for row in rows])


def sentences(count: int, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[WORDS[i] for i in rng.integers(0, len(WORDS), int(rng.integers(1, 30)))] for _ in range(count)]


def test_stream_windows_are_the_tokenizers_ids(tokenizer):
    """Over 3,000 distinct words: the table doubles past its first 1,024 rows, every window still exact."""
    batcher = StreamBatcher(iter(sentences(400)), batch_size=8, unroll_steps=20)
    encoder = BatchEncoder(tokenizer)
    check = StreamBatcher(iter(sentences(400)), batch_size=8, unroll_steps=20)
    windows = 0
    for batch in stream_batches(batcher, encoder):
        fwd, bwd, _, _ = check.next_windows()
        assert torch.equal(batch["input_ids"], reference_rows(tokenizer, fwd))
        assert torch.equal(batch["backward_input_ids"], reference_rows(tokenizer, bwd))
        assert batch["input_ids"].dtype == torch.long and batch["input_ids"].shape == (8, 20, encoder.row_width)
        windows += 1
    assert windows > 20 and len(encoder._position) > 1024  # the table grew


def test_the_table_starts_again_when_full_and_char_ids_stay_lists(tokenizer, monkeypatch):
    monkeypatch.setattr(BatchEncoder, "MAX_TOKENS", 40)
    encoder = BatchEncoder(tokenizer)
    for rows in ([WORDS[:30]], [WORDS[30:60]], [WORDS[:5] + [BOS, EOS] + WORDS[100:113]]):
        assert torch.equal(encoder.char_id_tensor(rows), reference_rows(tokenizer, rows))
        assert len(encoder._position) <= 40
    assert encoder.char_ids(["bank", BOS]) == reference_rows(tokenizer, [["bank", BOS]])[0].tolist()
    assert encoder.char_ids([]) == []


def test_sentence_batches_are_the_tokenizers_ids_padded_with_zeros(tokenizer):
    from elmo_hf.train.data import padded_batch

    rows = [[BOS, *words, EOS] for words in sentences(6, seed=1)]
    batch = padded_batch(rows, BatchEncoder(tokenizer))
    for i, row in enumerate(rows):
        assert torch.equal(batch["input_ids"][i, : len(row)], reference_rows(tokenizer, [row])[0])
        assert not batch["input_ids"][i, len(row) :].any() and batch["attention_mask"][i].sum() == len(row)


def test_evaluation_leaves_out_the_boundaries_that_cost_nothing(tokenizer):
    """The validation perplexity scores every word and sentence end, as language models are compared, but not `<S>`
    after `</S>` (forward LM) nor `</S>` after `<S>` (backward LM): in the stream each always follows the other.
    Every other target stays, and those two only ever follow their partner, so nothing that carries information is
    dropped."""
    from elmo_hf.train.pretrain_eval import without_free_boundaries

    encoder = BatchEncoder(tokenizer)
    bos, eos = encoder.vocab_ids([BOS, EOS])
    batcher = StreamBatcher(iter(sentences(60, seed=2)), batch_size=4, unroll_steps=25)
    for batch in stream_batches(batcher, encoder):
        scored = without_free_boundaries(batch, encoder)
        for key, inputs, free, partner in (("forward_labels", "input_ids", bos, EOS),
                                           ("backward_labels", "backward_input_ids", eos, BOS)):
            dropped = batch[key] != scored[key]
            assert torch.equal(dropped, batch[key] == free) and dropped.any()
            assert (scored[key][dropped] == -100).all() and torch.equal(scored[key][~dropped], batch[key][~dropped])
            partner_row = reference_rows(tokenizer, [[partner]])[0, 0]
            assert (batch[inputs][dropped] == partner_row).all()  # each one read right after its partner
        assert torch.equal(scored["input_ids"], batch["input_ids"])
