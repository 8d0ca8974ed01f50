"""The ELMo character tokenizers.

This package imports nothing from `modeling_elmo`: the dependency runs one way, `modeling_elmo` -> `tokenization`.
Importing it marks the tokenizers for remote code, so that `save_pretrained` copies `tokenization_elmo.py` (and
the modules it imports) next to the tokenizer files and writes `auto_map` into tokenizer_config.json
(`AutoTokenizer.from_pretrained(path, trust_remote_code=True)` then works without this project installed).
Registering them with `AutoTokenizer` for `ElmoConfig` (in-library use, no remote code) needs the config, so
`import elmo_hf.modeling_elmo` does it.

The files, one concept each: `tokenization_elmo.py` (`ElmoTokenizer`), `text_inputs_elmo.py` (what it accepts as
text), `word_splits_elmo.py` (the registry of word splits, `WORD_SPLITTERS`), `truncation_elmo.py` (which words a
sentence or a pair keeps), `row_cache_elmo.py` (the thread-locked cache of rows), `padding_elmo.py` (padding, shared
with the collators), `batch_encoding_elmo.py` (its output, `ElmoBatchEncoding`: alignment with words and
characters), `word_vocab_elmo.py` (word-vocabulary files) and `tokenization_elmo_manylangs.py`
(`ElmoManyLangsTokenizer`).
"""

from .batch_encoding_elmo import ElmoBatchEncoding
from .padding_elmo import LABEL_PAD_ID, pad_character_batch
from .tokenization_elmo import ElmoTokenizer, word_to_char_ids
from .tokenization_elmo_fast import ElmoFastBatchEncoding, ElmoTokenizerFast, save_with_fast_twin
from .tokenization_elmo_manylangs import ElmoManyLangsTokenizer
from .word_splits_elmo import (
    SPLITS_THAT_KEEP_WORDS,
    WORD_SPLITTERS,
    WordSplitDependencyError,
    WordSplitError,
    check_word_split,
    split_name,
    split_words,
)
from .word_vocab_elmo import build_vocab, load_vocab, write_vocab

ElmoTokenizer.register_for_auto_class("AutoTokenizer")
ElmoManyLangsTokenizer.register_for_auto_class("AutoTokenizer")
# Saved by ElmoTokenizerFast, a folder's auto_map names both classes, and AutoTokenizer with trust_remote_code=True
# takes the fast one (transformers 5 always, 4.x with use_fast=True); saved by ElmoTokenizer, it names that one only.
ElmoTokenizerFast.register_for_auto_class("AutoTokenizer")

__all__ = [
    "LABEL_PAD_ID",
    "SPLITS_THAT_KEEP_WORDS",
    "WORD_SPLITTERS",
    "ElmoBatchEncoding",
    "ElmoFastBatchEncoding",
    "ElmoManyLangsTokenizer",
    "ElmoTokenizer",
    "ElmoTokenizerFast",
    "WordSplitDependencyError",
    "WordSplitError",
    "build_vocab",
    "check_word_split",
    "load_vocab",
    "pad_character_batch",
    "split_name",
    "save_with_fast_twin",
    "split_words",
    "word_to_char_ids",
    "write_vocab",
]
