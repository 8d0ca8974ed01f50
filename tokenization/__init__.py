"""The ELMo character tokenizer.

Importing this package registers `ElmoTokenizer` with `AutoTokenizer` for `ElmoConfig` (in-library use) and marks
it for remote code, so that `save_pretrained` copies `tokenization_elmo.py` next to the tokenizer files and writes
`auto_map` into tokenizer_config.json (`AutoTokenizer.from_pretrained(path, trust_remote_code=True)` then works
without this package installed).
"""

from transformers import AutoTokenizer

from modeling_elmo.configuration_elmo import ElmoConfig

from .tokenization_elmo import (
    ElmoBatchEncoding,
    ElmoTokenizer,
    build_vocab,
    load_vocab,
    split_words,
    word_to_char_ids,
    write_vocab,
)
from .tokenization_elmo_manylangs import ElmoManyLangsTokenizer

# Both classes must be found by name (tokenizer_config.json names one); the last registration is the default.
AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoManyLangsTokenizer, exist_ok=True)
AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)
ElmoTokenizer.register_for_auto_class("AutoTokenizer")
ElmoManyLangsTokenizer.register_for_auto_class("AutoTokenizer")

__all__ = [
    "ElmoBatchEncoding",
    "ElmoManyLangsTokenizer",
    "ElmoTokenizer",
    "build_vocab",
    "load_vocab",
    "split_words",
    "word_to_char_ids",
    "write_vocab",
]
