"""Pretraining data: text files -> sentences (through `datasets`) -> biLM batches.

Two batch layouts:

* **stream** (bilm-tf's): each of the B batch rows is a continuous stream of sentences, `<S> w1 .. wn </S>`
  one after another, cut into windows of `unroll_steps` tokens. The forward LM reads the stream; the
  backward LM reads the same sentences each reversed, `</S> wn .. w1 <S>`. The LSTM state is carried from
  one window to the next (truncated backpropagation through time), and the last token of a window predicts
  the first token of the next one.
* **sentence**: every sentence on its own row, padded, starting from a zero state; sentences longer than
  `unroll_steps` tokens (boundaries included) are truncated and counted.

Both are deterministic for a given seed and epoch, and can skip ahead cheaply (without encoding characters),
which is how a resumed run finds its place.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from elmo_hf.tools.core.errors import reading
from elmo_hf.tools.core.text_files import iter_lines

logger = logging.getLogger(__name__)

BOS, EOS = "<S>", "</S>"


@dataclass
class CorpusStats:
    """What reading a corpus skipped, for the log and the summary."""

    lines: int = 0
    empty: int = 0
    truncated: int = 0


@dataclass(frozen=True)
class BatchLayout:
    """How sentences become batches: bilm-tf's `stream` windows, or padded `sentence` rows."""

    mode: str  # "stream" or "sentence"
    batch_size: int  # rows per batch and process
    unroll_steps: int  # window length in tokens (stream), or the longest sentence kept (sentence)


def word_splitter(word_split: str) -> Callable[[str], list[str]]:
    """The function that splits a corpus line into words: `str.split` for "whitespace", else `split_words` with the
    rule (a name in `tokenization.WORD_SPLITTERS`: "punctuation", "jieba", ...), as the saved tokenizer will split."""
    if word_split == "whitespace":
        return lambda text: text.split()
    from elmo_hf.tokenization import split_words

    return functools.partial(split_words, rule=word_split)


def read_sentences(files: list[str], stats: CorpusStats | None = None, encoding: str = "utf-8") -> Iterator[dict]:
    """Lines of the files as `{"text": ...}`, decoded with `encoding`; blank lines are skipped and counted. A line
    that does not decode raises `UndecodableText` (one line naming the file, line and byte): `elmo-pretrain`
    checks every file with `check_decodes` before it writes anything, so this happens only to a file changed since;
    a file removed or made unreadable since is an `InputError` naming it."""
    stats = stats if stats is not None else CorpusStats()
    for path in files:
        with reading(path):
            for text in iter_lines(path, encoding):
                stats.lines += 1
                if not text.strip():
                    stats.empty += 1
                    continue
                yield {"text": text}


def sentence_dataset(files: list[str], *, rank: int = 0, world_size: int = 1, stats: CorpusStats | None = None,
                     encoding: str = "utf-8"):
    """A streaming `datasets.IterableDataset` of the corpus lines, this process's shard only."""
    import datasets
    from datasets.distributed import split_dataset_by_node

    dataset = datasets.IterableDataset.from_generator(
        read_sentences, gen_kwargs={"files": files, "stats": stats, "encoding": encoding})
    if world_size > 1:
        dataset = split_dataset_by_node(dataset, rank=rank, world_size=world_size)
    return dataset


def corpus_words(files: list[str], split, *, seed: int, epoch: int, shuffle_buffer: int, rank: int, world_size: int,
                 stats: CorpusStats | None = None, encoding: str = "utf-8") -> Iterator[list[str]]:
    """The words of every sentence of this process's shard, shuffled within a buffer for this epoch."""
    dataset = sentence_dataset(files, rank=rank, world_size=world_size, stats=stats, encoding=encoding)
    if shuffle_buffer > 1:
        dataset = dataset.shuffle(seed=seed, buffer_size=shuffle_buffer)
        dataset.set_epoch(epoch)
    for example in dataset:
        words = split(example["text"])
        if words:
            yield words
        elif stats is not None:
            stats.empty += 1


class BatchEncoder:
    """Turns word lists into model tensors with the tokenizer's rows of ids and word-vocabulary ids.

    `<S>` and `</S>` get the tokenizer's sentence-marker rows: the same rows for the AllenNLP layout, `<bos>` and
    `<eos>` for an ELMoForManyLangs tokenizer (`sentence_boundary_rows`)."""

    MAX_TOKENS = 200_000  # distinct tokens whose rows are kept (then the table starts again)

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        boundaries = getattr(tokenizer, "sentence_boundary_rows", None)
        self._markers = dict(zip((BOS, EOS), boundaries)) if boundaries else {}
        self._forget()
        self.row_width = len(self.char_ids([BOS])[0])

    def _forget(self) -> None:
        # Each distinct token's row of character ids, once, in a table that doubles when full: a batch is then one
        # gather, where building its tensor from nested lists cost about as much as a demo-size model's step's
        # softmax (30 ms for 32 x 20 tokens, benchmarks/results_pretrain.md).
        self._position: dict[str, int] = {}
        self._table: torch.Tensor | None = None

    def _positions(self, tokens: list[str]) -> list[int]:
        new = [token for token in dict.fromkeys(tokens) if token not in self._position]
        if new:
            if len(self._position) + len(new) > self.MAX_TOKENS:
                self._forget()
                new = list(dict.fromkeys(tokens))
            rows = torch.tensor([self._markers.get(token) or self.tokenizer.convert_tokens_to_char_ids(token)
                                 for token in new], dtype=torch.long)
            start = len(self._position)
            if self._table is None:
                self._table = torch.empty(max(1024, 2 * len(new)), rows.shape[1], dtype=torch.long)
            elif start + len(new) > self._table.shape[0]:
                grown = torch.empty(2 * (start + len(new)), self._table.shape[1], dtype=torch.long)
                grown[:start] = self._table[:start]
                self._table = grown
            self._table[start : start + len(new)] = rows
            self._position.update((token, start + i) for i, token in enumerate(new))
        return [self._position[token] for token in tokens]

    def char_ids(self, tokens: list[str]) -> list[list[int]]:
        positions = self._positions(tokens)  # first: it fills the table
        return self._table[positions].tolist() if tokens else []

    def char_id_tensor(self, rows: list[list[str]]) -> torch.Tensor:
        """(len(rows), len(rows[0]), row width) int64 for rows of equal length: `torch.tensor` of their `char_ids`."""
        flat = self._positions([token for row in rows for token in row])
        return self._table[torch.tensor(flat, dtype=torch.long)].view(len(rows), -1, self._table.shape[1])

    def vocab_ids(self, tokens: list[str]) -> list[int]:
        return self.tokenizer.convert_tokens_to_vocab_ids(tokens)


class StreamBatcher:
    """bilm-tf's layout: B rows, each a stream of sentences, cut into windows of `unroll_steps` tokens."""

    def __init__(self, sentences: Iterator[list[str]], batch_size: int, unroll_steps: int):
        self.sentences = sentences
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        # per row: forward tokens not yet used, and the backward tokens (each sentence reversed)
        self.forward = [[] for _ in range(batch_size)]
        self.backward = [[] for _ in range(batch_size)]

    def _fill(self, row: int, need: int) -> bool:
        while len(self.forward[row]) < need:
            words = next(self.sentences, None)
            if words is None:
                return False
            sentence = [BOS, *words, EOS]
            self.forward[row].extend(sentence)
            self.backward[row].extend(reversed(sentence))
        return True

    def next_windows(self) -> tuple[list[list[str]], list[list[str]], list[list[str]], list[list[str]]] | None:
        """Tokens of the next window for every row, and each position's target (the next token of its
        stream), or None when the corpus ends (the last, partial batch is dropped, as in bilm-tf)."""
        steps = self.unroll_steps
        fwd, bwd, fwd_next, bwd_next = [], [], [], []
        for row in range(self.batch_size):
            if not self._fill(row, steps + 1):
                return None
            fwd.append(self.forward[row][:steps])
            fwd_next.append(self.forward[row][1 : steps + 1])
            bwd.append(self.backward[row][:steps])
            bwd_next.append(self.backward[row][1 : steps + 1])
        for row in range(self.batch_size):
            del self.forward[row][:steps]
            del self.backward[row][:steps]
        return fwd, bwd, fwd_next, bwd_next


def stream_batches(batcher: StreamBatcher, encoder: BatchEncoder, skip: int = 0) -> Iterator[dict]:
    """Tensors for each window: `input_ids`, `backward_input_ids` (B, T, 50), `forward_labels`,
    `backward_labels` (B, T). The first `skip` windows are consumed without encoding."""
    index = 0
    while True:
        windows = batcher.next_windows()
        if windows is None:
            return
        index += 1
        if index <= skip:
            continue
        fwd, bwd, fwd_next, bwd_next = windows
        yield {
            "input_ids": encoder.char_id_tensor(fwd),
            "backward_input_ids": encoder.char_id_tensor(bwd),
            "forward_labels": torch.tensor([encoder.vocab_ids(row) for row in fwd_next]),
            "backward_labels": torch.tensor([encoder.vocab_ids(row) for row in bwd_next]),
        }


def padded_batch(rows: list[list[str]], encoder: BatchEncoder) -> dict:
    """Token rows (`<S>` and `</S>` included) as one right-padded batch: `input_ids` (B, T, 50), `attention_mask`,
    `labels` (B, T) holding each token's vocabulary id (-100 at padding)."""
    width = max(len(row) for row in rows)
    char_ids = torch.zeros(len(rows), width, encoder.row_width, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, tokens in enumerate(rows):
        char_ids[i, : len(tokens)] = encoder.char_id_tensor([tokens])[0]
        labels[i, : len(tokens)] = torch.tensor(encoder.vocab_ids(tokens))
    return {"input_ids": char_ids, "attention_mask": (labels != -100).long(), "labels": labels}


def sentence_batches(
    sentences: Iterator[list[str]], encoder: BatchEncoder, batch_size: int, max_tokens: int,
    stats: CorpusStats | None = None, skip: int = 0,
) -> Iterator[dict]:
    """Padded batches of whole sentences: `input_ids` (B, T, 50), `attention_mask`, `labels` (B, T)
    holding each token's vocabulary id (-100 at padding); the model shifts them per direction."""
    index = 0
    while True:
        rows = []
        for words in sentences:
            tokens = [BOS, *words, EOS]
            if len(tokens) > max_tokens:
                if stats is not None:
                    stats.truncated += 1
                tokens = [*tokens[: max_tokens - 1], EOS]
            rows.append(tokens)
            if len(rows) == batch_size:
                break
        if not rows:
            return
        index += 1
        if index <= skip:
            continue
        yield padded_batch(rows, encoder)
        if len(rows) < batch_size:
            return


def epoch_batches(files: list[str], encoder: BatchEncoder, layout: BatchLayout, split, *, seed: int, epoch: int,
                  shuffle_buffer: int, rank: int, world_size: int, stats: CorpusStats | None = None,
                  skip: int = 0, encoding: str = "utf-8") -> Iterator[dict]:
    """This process's batches of one epoch, the first `skip` of them passed over without encoding."""
    words = corpus_words(files, split, seed=seed, epoch=epoch, shuffle_buffer=shuffle_buffer, rank=rank,
                         world_size=world_size, stats=stats, encoding=encoding)
    if layout.mode == "stream":
        return stream_batches(StreamBatcher(words, layout.batch_size, layout.unroll_steps), encoder, skip=skip)
    return sentence_batches(words, encoder, layout.batch_size, layout.unroll_steps, stats=stats, skip=skip)


def count_batches(files: list[str], layout: BatchLayout, split, *, rank: int, world_size: int,
                  limit: int | None = None, encoding: str = "utf-8") -> int:
    """Batches in one epoch of this shard, in file order, without encoding characters (at most `limit`)."""
    words = corpus_words(files, split, seed=0, epoch=0, shuffle_buffer=1, rank=rank, world_size=world_size,
                         encoding=encoding)
    if layout.mode == "stream":
        batcher = StreamBatcher(words, layout.batch_size, layout.unroll_steps)
        count = 0
        while (limit is None or count < limit) and batcher.next_windows() is not None:
            count += 1
        return count
    sentences = sum(1 for _ in itertools.islice(words, None if limit is None else limit * layout.batch_size))
    return math.ceil(sentences / layout.batch_size)
