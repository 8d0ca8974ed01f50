"""The tokenizer's row cache: every distinct word's row of ids, made once and shared by all calls and threads.

A batch is encoded as indices into the cache (`indices`), then turned into character ids in one step: a gather from
a tensor of all cached rows (`tensor`), or fresh nested lists (`nested_lists`). Indices 0, 1 and 2 are reserved:
padding, and the `<S>`/`</S>` the tokenizer adds (a literal `"<S>"` in the input gets its own index with the same
row). Once more than `size` words are cached the cache starts afresh, between calls, so memory stays bounded.

One call at a time touches the cache: callers hold `lock` around everything they do with it (`ElmoTokenizer`
holds it for a whole encoding), so a tokenizer is safe to share between threads.

A tokenizer keeps its cache in an `EncodingState`, which pickles as an empty one: what is cached is never part of a
pickle, a copy or a fingerprint of the tokenizer (datasets hashes a tokenizer's attributes to fingerprint
`Dataset.map`; a fingerprint that changed as the cache fills would never find the results of an earlier map).

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library,
numpy and torch.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np
import torch

from .character_ids import PADDING_ID

logger = logging.getLogger(__name__)

# Reserved indices: padding, and the <S>/</S> added by the tokenizer.
CACHED_PAD, CACHED_BOS, CACHED_EOS = 0, 1, 2
_RESERVED = 3


class RowCache:
    """Rows of ids by word, as tuples (for lists) and as a tensor of `dtype` (for gathers), extended lazily.

    Args:
        make_row: word -> its row of `width` ids (called once per distinct word, lock held).
        boundary_rows: the rows of the begin- and end-of-sentence tokens the tokenizer adds.
        width: ids per row.
        size: distinct words kept before the cache starts afresh.
        dtype: of the tensor of rows (int16 holds ELMo's character ids; dictionaries of ids need int32).
    """

    def __init__(self, make_row: Callable[[str], list[int]], boundary_rows: tuple[list[int], list[int]],
                 width: int, size: int, dtype: torch.dtype):
        self.lock = threading.Lock()
        self.make_row = make_row
        self.width = width
        self.size = size
        self.dtype = dtype
        self.index: dict[str, int] = {}  # word -> index into rows
        self.rows: list[tuple[int, ...]] = [(PADDING_ID,) * width, *(tuple(row) for row in boundary_rows)]
        self.table = torch.tensor(self.rows, dtype=dtype)  # the same rows as a tensor, extended lazily

    def __len__(self) -> int:
        """The number of words cached (the reserved rows not counted)."""
        return len(self.rows) - _RESERVED

    def clear_if_full(self) -> None:
        """Start afresh once more than `size` words are cached (never in the middle of a call)."""
        if len(self) > self.size:
            logger.debug("ElmoTokenizer: clearing the cache of %d words", len(self))
            self.index = {}
            del self.rows[_RESERVED:]
            self.table = self.table[:_RESERVED].clone()

    def indices(self, words: Sequence[str]) -> list[int]:
        """The cache indices of `words`, making the rows of new ones."""
        index, rows = self.index, self.rows
        out = []
        for word in words:
            i = index.get(word)
            if i is None:
                i = index[word] = len(rows)
                rows.append(tuple(self.make_row(word)))
            out.append(i)
        return out

    def tensor(self, sequences: list[list[int]], length: int) -> torch.Tensor:
        """Cache indices, each sequence padded to `length` tokens -> `[batch, length, width]` int64 ids."""
        padded = [s + [CACHED_PAD] * (length - len(s)) for s in sequences]
        # numpy reads the lists of indices fastest
        index = torch.from_numpy(np.array(padded, dtype=np.int64).reshape(len(padded), length))
        have = self.table.shape[0]
        if have < len(self.rows):
            self.table = torch.cat([self.table, torch.tensor(self.rows[have:], dtype=self.dtype)])
        if index.numel() == 0:
            return torch.zeros((*index.shape, self.width), dtype=torch.int64)
        return self.table[index].to(torch.int64)

    def nested_lists(self, sequences: list[list[int]], length: int | None) -> list[list[list[int]]]:
        """Cache indices -> fresh nested lists of ids, padded to `length` tokens when given."""
        rows, width = self.rows, self.width
        # One new list per token: hundreds of thousands of acyclic containers per call, which would trigger the
        # cyclic garbage collector over and over (7x slower seen on 10,000 PTB sentences). Pause it meanwhile.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            input_ids = []
            for seq_indices in sequences:
                seq = [list(rows[i]) for i in seq_indices]
                if length is not None and length > len(seq_indices):
                    seq.extend([PADDING_ID] * width for _ in range(length - len(seq_indices)))
                input_ids.append(seq)
        finally:
            if gc_was_enabled:
                gc.enable()
        return input_ids


class EncodingState:
    """What a tokenizer changes as it encodes: its row cache (`rows`) and the keys of the warnings it gives once
    (`warned`). Pickles, copies and hashes as an empty state (`rows` None), which its tokenizer makes afresh."""

    def __init__(self, rows: RowCache | None = None):
        self.rows = rows
        self.warned: set[str] = set()

    def __reduce__(self):
        return (EncodingState, ())


def reachable_by_name(module_name: str) -> None:
    """Make the module `module_name` an attribute of its package, where it is not one yet.

    transformers imports a remote-code tokenizer's module by hand (into `sys.modules`, not onto its package), so
    dill, which datasets hashes with to fingerprint `Dataset.map`, finds no `package.module` and pickles the tokenizer's
    class by value: its methods with the module's globals (a `threading.local` among them fails with "cannot pickle
    '_thread._local'"), and a fingerprint that depends on which other classes were loaded. Reachable by name, the
    class is pickled as a reference, as it is when the project is installed.
    """
    package_name, _, child = module_name.rpartition(".")
    package, module = sys.modules.get(package_name), sys.modules.get(module_name)
    if package is not None and module is not None and getattr(package, child, None) is not module:
        setattr(package, child, module)
