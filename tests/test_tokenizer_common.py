"""transformers' own common tokenizer tests (`TokenizerTesterMixin`, tests/test_tokenization_common.py of the installed
version's source distribution: `transformers_sources.py`) on `ElmoTokenizer`.

Every tokenizer inside transformers passes them. ELMo's tokenizer is a character tokenizer: a token is a whole word,
its "id" a row of 50 character ids, and there is no vocabulary of tokens to add to or look up. A test that cannot
apply to that is skipped below with its reason beside it; every other one runs as transformers wrote it.
"""

from __future__ import annotations

import unittest

import pytest
from transformers_sources import fetch_reason, import_transformers_tests

from elmo_hf.tokenization import ElmoTokenizer

pytestmark = pytest.mark.slow

_reason = fetch_reason()
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)
(tokenization_common,) = import_transformers_tests("test_tokenization_common")

ROWS = "input_ids are rows of 50 character ids per word, not one id per token"
NO_VOCABULARY = "ElmoTokenizer has no vocabulary of tokens: any word is encoded from its bytes (add_tokens adds none)"


class ElmoTokenizerCommonTest(tokenization_common.TokenizerTesterMixin, unittest.TestCase):
    tokenizer_class = ElmoTokenizer
    test_seq2seq = False  # ElmoTokenizer encodes a model's inputs only (no text_target)
    test_tokenizer_from_extractor = False  # no tokenizer.json to extract a vocabulary from

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ElmoTokenizer().save_pretrained(cls.tmpdirname)

    def get_clean_sequence(self, tokenizer, with_prefix_space=False, max_length=20, min_length=5):
        # The mixin builds its text from single ids that decode to letters: ELMo's ids are characters, whose text
        # would be one letter a word. Words of our own instead, as many as the mixin asks for.
        words = ("the bank raised its rates and we sat on the river bank " * 4).split()[: max(max_length or 20,
                                                                                             min_length or 0)]
        text = (" " if with_prefix_space else "") + " ".join(words)
        return text, tokenizer.encode(text, add_special_tokens=False)


FIXED_SPECIAL_TOKENS = ("<S>, </S> and the padding <pad> are fixed by the ELMo format (the character ids the published "
                        "models were trained with): other special tokens are refused")
TOO_LONG = ("a text longer than model_max_length gets the project's own one-line warning (logger "
            "elmo_hf.tokenization.tokenization_elmo), not transformers' message under its logger; overflowing tokens "
            "come "
            "back as windows, rows with overflow_to_sample_mapping, as transformers' fast tokenizers give them "
            "(tests/test_windows.py), not as the overflowing_tokens lists of its slow tokenizers that the test reads")
# The mixin's tests that cannot apply to ELMo's tokenizer, and why: removed from the class (not collected), so that a
# skip in the suite means a missing optional thing, not a test that never applies.
NOT_APPLICABLE = {
    "test_batch_encode_plus_padding": "padding on the left is refused: the biLM reads </S> right after the last word",
    "test_bos_token_with_add_bos_token_false": FIXED_SPECIAL_TOKENS,
    "test_bos_token_with_add_bos_token_true": FIXED_SPECIAL_TOKENS,
    "test_pad_token_initialization": FIXED_SPECIAL_TOKENS,
    "test_encode_basic_padding": f"{ROWS}: padding is rows of zeros, where the test expects scalar pad ids",
    "test_encode_plus_with_padding_0": f"{ROWS}: padding is rows of zeros, where the test expects scalar pad ids",
    "test_encode_plus_with_padding_1": f"{ROWS}: padding is rows of zeros, where the test expects scalar pad ids",
    "test_padding_with_attention_mask": f"{ROWS}: pad() refuses the scalar ids the test pads",
    "test_internal_consistency": f"{ROWS}: convert_tokens_to_ids takes character names, a word's row is "
                                 "convert_tokens_to_char_ids",
    "test_get_vocab": NO_VOCABULARY,
    "test_save_and_load_tokenizer": NO_VOCABULARY,
    "test_tokenize_special_tokens": NO_VOCABULARY,
    "test_maximum_encoding_length_single_input": TOO_LONG,
    "test_maximum_encoding_length_pair_input": TOO_LONG,
    "test_tokenizer_store_full_signature":
        "word_vocab is the word vocabulary given as a list: it is saved as vocab.txt "
                                           "and reloaded as vocab_file, which the mixin exempts",
    # what the mixin itself skips for a tokenizer like ours
    "test_chat_template_save_loading": "no chat template: ELMo encodes sentences",
    "test_prepare_seq2seq_batch": "no text_target: ElmoTokenizer encodes a model's inputs only (test_seq2seq)",
    "test_integration": "no integration tokens of transformers' own for this tokenizer",
    "test_integration_from_extractor": "no tokenizer.json to extract a vocabulary from",
    "test_conversion_reversible": "transformers' own slow test (RUN_SLOW), of a tokenizer with a vocabulary",
}
for _name in NOT_APPLICABLE:
    setattr(ElmoTokenizerCommonTest, _name, None)
