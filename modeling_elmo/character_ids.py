"""Character ids of ELMo: the one definition, used by the model, the tokenizer and the converters.

`tokenization/character_ids.py` is a byte-for-byte copy of this file (`tests/test_layout.py` holds them equal), so
that each package imports it relatively (`from .character_ids import ...`) and carries a real file of it when it
travels to the Hub as remote code (transformers copies a module's relative imports next to it from the module's own
folder). A copy, not a link: a checkout without links (Windows) has both. See `docs/architecture.md` ("Character ids").

Every token is a row of `MAX_CHARACTERS_PER_TOKEN` ids: `[BOW, byte + 1, ..., EOW, CHAR_PAD, ...]`. The ids
include the +1 shift of the original inference code, so that id 0 is free for padding (a padding token is a row
of zeros: a position is real iff any of its ids is > 0).
"""

MAX_CHARACTERS_PER_TOKEN = 50
PADDING_ID = 0  # the padding token is a row of zeros; a position is real iff any of its ids is > 0
BYTE_OFFSET = 1  # byte b -> id b + 1
BOS_CHAR_ID = 257  # begin-of-sentence character (256 + 1)
EOS_CHAR_ID = 258  # end-of-sentence character (257 + 1)
BOW_ID = 259  # begin of word (258 + 1)
EOW_ID = 260  # end of word (259 + 1)
CHAR_PAD_ID = 261  # padding character inside a word row (260 + 1)
NUM_CHARACTER_IDS = 262  # = ElmoConfig.char_vocab_size


def real_token_mask(input_ids):
    """(..., T, MAX_CHARACTERS_PER_TOKEN) character ids -> (..., T) bool: True where the token is real (any id > 0).
    The one place this rule is written; works on torch tensors and numpy arrays alike (no import needed)."""
    return (input_ids > PADDING_ID).any(-1)
