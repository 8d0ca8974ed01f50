"""`elmo-pretrain`'s word split when none is given, and the warning for a vocabulary of unsegmented CJK text:
Chinese or Japanese written without spaces, split on spaces, would make whole sentences the words of the vocabulary.
"""

from __future__ import annotations

import itertools
import logging
import re

from elmo_hf.tokenization.word_splits_elmo import CJK_CHARACTER

from .data import read_sentences

logger = logging.getLogger("elmo-pretrain")

# A "word" of this many CJK characters in a row is text the split did not segment (Chinese words are 1-4 characters).
UNSEGMENTED_CJK = re.compile(f"(?:{CJK_CHARACTER.pattern}){{6,}}")


# The lines of the corpus read to choose the default word split: its start tells its script well enough.
WORD_SPLIT_SAMPLE_LINES = 1000
# CJK text written without spaces: at least this share of the non-space characters is CJK (a corpus of Chinese with
# Latin product names is about a quarter; English with a Chinese name now and then, far less), and the
# space-separated pieces that hold CJK characters hold more of them on average than a segmented word has (Chinese
# words are 1-4 characters, 1.5-2 on average; an unsegmented chat line of five characters is one piece of five).
CJK_SHARE = 0.2
SEGMENTED_CJK_PER_PIECE = 2.5


def chosen_word_split(args, train_files: list[str], is_main: bool) -> str:
    """--word_split, else `whitespace`, unless the corpus's first lines hold CJK text written without spaces
    (`CJK_SHARE`, `SEGMENTED_CJK_PER_PIECE`), where splitting on spaces would make whole sentences the words of the
    vocabulary: then `punctuation` (a token per ideograph or kana, the tokenizer's own default for CJK; Latin words
    are still cut at spaces), said in one line."""
    if args.word_split is not None:
        return args.word_split
    non_space = cjk = pieces = 0  # non-space characters, CJK characters, space-separated pieces holding some
    lines = (example["text"] for example in read_sentences(train_files, encoding=args.encoding))
    for text in itertools.islice(lines, WORD_SPLIT_SAMPLE_LINES):
        non_space += sum(not c.isspace() for c in text)
        for piece in text.split():
            found = len(CJK_CHARACTER.findall(piece))
            cjk += found
            pieces += bool(found)
    if not (cjk >= CJK_SHARE * non_space and cjk > SEGMENTED_CJK_PER_PIECE * pieces):
        return "whitespace"
    if is_main:
        logger.info("--word_split punctuation: %.0f%% of the characters of the corpus's first lines are CJK, written "
                    "without spaces (whitespace would make sentences the words); give --word_split jieba for Chinese "
                    "words, or whitespace for text already segmented", 100 * cjk / non_space)
    return "punctuation"


def warn_if_unsegmented(words: list[str], word_split: str | None) -> None:
    """One warning when many of the vocabulary's words are long runs of CJK characters: Chinese or Japanese text
    split on spaces (`whitespace`, the default of elmo-pretrain) keeps whole sentences as words."""
    unsegmented = [word for word in words if UNSEGMENTED_CJK.search(word)]
    if len(unsegmented) >= max(2, len(words) // 10):
        logger.warning(
            "%d of the %d words of the vocabulary are runs of six or more CJK characters (%s, ...): --word_split %s "
            "does not segment text written without spaces; give --word_split punctuation (a token per character) "
            "or jieba (Chinese words)", len(unsegmented), len(words), ", ".join(unsegmented[:2]), word_split)


