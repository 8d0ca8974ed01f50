"""The ELMo character tokenizers.

This package imports nothing from `modeling_elmo`: the dependency runs one way, `modeling_elmo` -> `tokenization`.
Importing it marks the tokenizers for remote code, so that `save_pretrained` copies `tokenization_elmo.py` (and
the modules it imports) next to the tokenizer files and writes `auto_map` into tokenizer_config.json
(`AutoTokenizer.from_pretrained(path, trust_remote_code=True)` then works without this project installed).
Registering them with `AutoTokenizer` for `ElmoConfig` (in-library use, no remote code) needs the config, so
`import modeling_elmo` does it.
"""

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
