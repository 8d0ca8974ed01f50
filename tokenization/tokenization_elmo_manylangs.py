"""Tokenizer of the ELMoForManyLangs models (HIT-SCIR): characters and words through their dictionaries.

This file travels to the Hub as remote code next to `tokenization_elmo.py` and the files that imports: it imports
only the standard library, torch, transformers and its siblings.

Their batcher (`elmoformanylangs.frontend.create_one_batch`, with `read_list` before it) turns each word into

* a row of `max_characters_per_token` character ids: `[BOW, c1, ..., ck, EOW, PAD, ...]` where each character `c` is
  looked up in `char.dic` (unknown -> `<oov>`), the word being cut first to `max_characters_per_token - 2`
  characters (Unicode code points, not bytes). Their batcher takes BOW from the `<eow>` entry and EOW from the
  `<bow>` entry (the two names are swapped in `create_one_batch`); the models were trained that way, so this
  tokenizer does the same;
* its id in `word.dic` (unknown -> `<oov>`), looked up after the same cut.

Sentences are wrapped in the words `<bos>` and `<eos>`, whose character rows are `[BOW, <bos>, EOW, PAD, ...]` and
`[BOW, <eos>, EOW, PAD, ...]` (a literal `<bos>`/`<eos>` in the input gets the same rows, as in theirs; `<S>` is an
ordinary word). Every id here is theirs + 1, so that 0 stays padding: a padding token is a row of zeros. A token's
row in `input_ids` is its character ids (when the model has a character CNN) followed by its word id (when it has a
word embedding): `ElmoConfig.token_row_width` ids.

The dictionaries are saved as `char_dictionary.json` / `word_dictionary.json` (`{entry: their id}`), exactly as
the package reads `char.dic` / `word.dic`; `elmo_hf.tools.conversion.convert_elmoformanylangs` writes them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import torch

from .tokenization_elmo import ElmoTokenizer
from .word_vocab_elmo import VOCAB_FILES_NAMES

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .batch_encoding_elmo import ElmoBatchEncoding  # noqa: F401
from .character_ids import PADDING_ID  # noqa: F401
from .padding_elmo import LABEL_PAD_ID  # noqa: F401
from .row_cache_elmo import RowCache  # noqa: F401
from .text_inputs_elmo import check_word  # noqa: F401
from .truncation_elmo import kept_spans  # noqa: F401
from .word_splits_elmo import WORD_SPLITTERS  # noqa: F401

MANYLANGS_VOCAB_FILES_NAMES = {
    **VOCAB_FILES_NAMES,
    "char_dictionary_file": "char_dictionary.json",
    "word_dictionary_file": "word_dictionary.json",
}
# Entries their batcher requires (create_one_batch asserts them).
CHAR_SPECIALS = ("<bow>", "<eow>", "<oov>", "<pad>", "<bos>", "<eos>")
WORD_SPECIALS = ("<oov>", "<pad>")
SENTENCE_BEGIN, SENTENCE_END = "<bos>", "<eos>"
ID_SHIFT = 1  # their id + 1: 0 is padding


def _load_dictionary(path: str | os.PathLike) -> dict[str, int]:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object {{entry: id}}")
    return data


def _check_dictionary(name: str, dictionary: Mapping[str, int], specials: tuple[str, ...]) -> dict[str, int]:
    dictionary = dict(dictionary)
    missing = [s for s in specials if s not in dictionary]
    if missing:
        raise ValueError(f"the {name} dictionary lacks the entries {missing} that ELMoForManyLangs needs")
    bad = [k for k, v in dictionary.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if bad:
        raise ValueError(f"the {name} dictionary has entries whose id is not a non-negative integer: {bad[:5]}")
    return dictionary


class ElmoManyLangsTokenizer(ElmoTokenizer):
    r"""Tokenizer of a converted ELMoForManyLangs model: words -> rows of dictionary ids (see the module docstring).

    Args:
        char_dictionary_file / char_dictionary: the character dictionary (`{character: their id}`), or None when the
            model has no character CNN (`char_dim` 0).
        word_dictionary_file / word_dictionary: the word dictionary (`{word: their id}`), or None when the model has
            no word embedding (`word_dim` 0).
        max_characters_per_token (`int`): their `max_characters_per_token` (50 in the published models).
        word_split: as `ElmoTokenizer` (the published models read words as segmented in the Universal Dependencies
            treebanks: pass pre-split words, or a segmenter, for languages written without spaces).

    Everything else (padding, truncation, tensors, `word_ids()`) is `ElmoTokenizer`'s; the sentence markers it adds
    are `<bos>` and `<eos>`.
    """

    vocab_files_names = MANYLANGS_VOCAB_FILES_NAMES
    _ROW_DTYPE = torch.int32  # dictionaries can exceed int16

    def __init__(
        self,
        char_dictionary_file: str | None = None,
        word_dictionary_file: str | None = None,
        char_dictionary: Mapping[str, int] | None = None,
        word_dictionary: Mapping[str, int] | None = None,
        **kwargs,
    ):
        if char_dictionary_file is not None:
            char_dictionary = _load_dictionary(char_dictionary_file)
        if word_dictionary_file is not None:
            word_dictionary = _load_dictionary(word_dictionary_file)
        if char_dictionary is None and word_dictionary is None:
            raise ValueError("ElmoManyLangsTokenizer needs a character dictionary, a word dictionary or both")
        self.char_dictionary = None if char_dictionary is None else _check_dictionary("character", char_dictionary,
                                                                                      CHAR_SPECIALS)
        self.word_dictionary = None if word_dictionary is None else _check_dictionary("word", word_dictionary,
                                                                                      WORD_SPECIALS)
        self._id_to_char = None if self.char_dictionary is None else {i: c for c, i in self.char_dictionary.items()}
        self._id_to_word = None if self.word_dictionary is None else {i: w for w, i in self.word_dictionary.items()}
        super().__init__(**kwargs)

    # ----- rows ----------------------------------------------------------------------------------------------------
    @property
    def row_width(self) -> int:
        chars = self.max_characters_per_token if self.char_dictionary is not None else 0
        return chars + (1 if self.word_dictionary is not None else 0)

    def _row(self, word: str, marker: bool) -> list[int]:
        """Their batcher's ids for `word` (+1); `marker`: a sentence marker, whose characters are one entry."""
        row = []
        if self.char_dictionary is not None:
            chars = self.char_dictionary
            width = self.max_characters_per_token
            # their names are swapped: BOW is the `<eow>` entry and EOW the `<bow>` entry (module docstring)
            begin, end, pad, oov = chars["<eow>"], chars["<bow>"], chars["<pad>"], chars["<oov>"]
            ids = [chars[word]] if marker else [chars.get(c, oov) for c in word]
            row = [begin, *ids, end] + [pad] * (width - 2 - len(ids))
        if self.word_dictionary is not None:
            row.append(self.word_dictionary.get(word, self.word_dictionary["<oov>"]))
        return [i + ID_SHIFT for i in row]

    def _token_row(self, word: str) -> list[int]:
        cut = self.max_characters_per_token - 2
        word = word[:cut]  # read_list cuts words longer than max_characters_per_token - 2 characters
        return self._row(word, marker=word in (SENTENCE_BEGIN, SENTENCE_END))

    def _boundary_rows(self) -> tuple[list[int], list[int]]:
        return self._row(SENTENCE_BEGIN, marker=True), self._row(SENTENCE_END, marker=True)

    @property
    def sentence_boundary_rows(self) -> list[list[int]]:
        """The rows of `<bos>` and `<eos>` (`ElmoConfig.sentence_boundary_rows`, for the task heads)."""
        return [list(row) for row in self._boundary_rows()]

    def _warn_if_cut_cjk(self, word: str) -> None:
        """No warning: words are cut by characters here, as their batcher cuts them (the models were trained so)."""

    def _is_boundary_row(self, row: list[int]) -> bool:
        return list(row) in self._boundary_rows()

    def _row_to_token(self, row: list[int]) -> str | None:
        """The word of a row: from its word id when it is known, else from its characters."""
        row = list(row)
        if not any(row):
            return None
        if self._id_to_word is not None:
            word = self._id_to_word.get(row[-1] - ID_SHIFT)
            if word is not None and (word != "<oov>" or self._id_to_char is None):
                return word
        chars = self.char_dictionary
        skip = {chars["<eow>"], chars["<bow>"], chars["<pad>"]}
        ids = [i - ID_SHIFT for i in row[: self.max_characters_per_token]]
        return "".join(self._id_to_char.get(i, "") for i in ids if i not in skip)

    # ----- saving ---------------------------------------------------------------------------------------------------
    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        files = list(super().save_vocabulary(save_directory, filename_prefix))
        prefix = filename_prefix + "-" if filename_prefix else ""
        for key, dictionary in (
            ("char_dictionary_file", self.char_dictionary),
            ("word_dictionary_file", self.word_dictionary),
        ):
            if dictionary is None:
                continue
            path = os.path.join(save_directory, prefix + self.vocab_files_names[key])
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(dictionary, handle, ensure_ascii=False, indent=0)
            files.append(path)
        return tuple(files)
