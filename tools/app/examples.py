"""The page's example inputs, chosen for the model shown, and what the page says the model was trained on.

A model knows the words of its training corpus: a sentence of words it never read shows little of what its layers
do (the demo's model, trained on a generated corpus of 222 words, puts "bank" of a river nearer to "bank" of money
than to another river "bank" in general English sentences whose other words it has not seen). So when the
tokenizer has a word vocabulary (a model pretrained by `elmo-pretrain` saves the one it predicted), the example
set whose words it knows best is the default; without one, or when none fits better, the general one. Each
similarity example uses its word in two senses, two sentences of each: the same-sense pair is the reference that
the other pairs are read against.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from elmo_hf.tokenization import split_words

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Examples:
    """One set of example inputs for the three views."""

    written_for: str
    similarity: list[list[str]]  # [sentences (one per line), word, word split]; the first is the default
    corpus: str  # the neighbours and contextuality views' text, one sentence per line
    query: str
    query_word: str
    split: str = "punctuation"  # of the corpus and the query

    def texts(self) -> list[tuple[str, str]]:
        """(text, word split) of every example input."""
        return [(text, split) for text, _, split in self.similarity] + [(self.corpus, self.split),
                                                                        (self.query, self.split)]


GENERAL = Examples(
    "general English and Chinese",
    [
        ["He sat on the bank of the river.\nDucks swam near the muddy bank.\nShe deposited the cash at the bank.\n"
         "The bank raised its interest rates.", "bank", "punctuation"],
        ["They play football every Sunday.\nThe children play in the garden.\nWe watched a play at the theatre.\n"
         "The play had three acts.", "play", "punctuation"],
        ["他在银行工作。\n这家银行的利率很高。\n我们一起步行去公园。\n他每天步行上班。", "行", "punctuation"],
        ["他在银行工作。\n这家银行的利率很高。\n河岸边有很多树。", "银行", "jieba"],
    ],
    "\n".join([
        "He sat on the bank of the river .", "She deposited the cash at the bank .", "The bank raised its rates .",
        "Ducks swam near the muddy bank of the river .", "The bank approved the loan .",
        "We walked along the river bank .", "They play football every Sunday .", "We watched a play at the theatre .",
        "The children play in the garden .", "The play had three acts .", "I play the piano .",
        "The river flooded the bank after the rain .",
    ]),
    "The boat drifted towards the bank .", "bank",
)

# Sentences of the templates and word lists of train/sense_corpus.py: every word is in the demo model's vocabulary.
# Measured with the demo's model (make demo, seed 0), top layer: the same-sense pairs' cosine is above the
# cross-sense pairs' for bank (0.84 / 0.71), bat (0.53 / 0.26) and plant (0.87 / 0.61); "spring" is left out, its
# senses are not told apart there (0.24 / 0.35).
DEMO_ENGLISH = Examples(
    "the demo's generated English corpus (train/sense_corpus.py)",
    [
        ["anna sat on the bank of the river and watched a heron .\nwe walked along the bank of the canal today .\n"
         "ben went to the bank to deposit cash on monday .\nthe bank approved the loan for emma .", "bank",
         "punctuation"],
        ["a bat flew out of the cave at night .\nthe bat hunted moths after sunset .\n"
         "felix swung the bat and hit the ball .\nthe cricket player picked up a wooden bat .", "bat", "punctuation"],
        ["the steel plant hired new workers on friday .\nthe chemical plant closed after the accident .\n"
         "grace watered the plant in the garden .\nthe plant in the greenhouse grew new leaves .", "plant",
         "punctuation"],
    ],
    "\n".join([
        "henry sat on the bank of the lake and watched a duck .",
        "the grassy bank of the river was covered with reeds .",
        "the stream flooded its bank after the heavy rain .", "iris withdrew money from the bank yesterday .",
        "the clerk at the bank explained the mortgage .", "the bank charged a fee on the account .",
        "a bat flew out of the barn in the dark .", "jack bought a heavy bat for baseball .",
        "the cement plant produces steel parts for export .", "david repotted the plant in the pot .",
        "the blossoms appear every spring around april .", "the spring was compressed and then released .",
    ]),
    "we walked along the bank of the stream yesterday .", "bank",
)

# Sentences of the templates and word lists of train/sense_corpus_zh.py (the demo's --language zh), per ideograph.
DEMO_CHINESE = Examples(
    "the demo's generated Chinese corpus (train/sense_corpus_zh.py)",
    [
        ["小明今天去银行存了五百元。\n王芳在银行工作了三年。\n李雷每天步行去学校。\n我们沿着小路慢慢行走。", "行",
         "punctuation"],
        ["这条河很长。\n小红的头发很长。\n张伟是在北京长大的。\n小树长出了新叶子。", "长", "punctuation"],
    ],
    "\n".join([
        "小明从银行取出了一千块钱。", "这家银行的经理叫刘洋。", "银行给陈静办了一张新卡。",
        "赵磊上午步行去公园。", "小红一个人行走在山路上。", "王芳周末去杭州旅行。",
        "这部电影太长了。", "李雷昨天长高了。",
    ]),
    "张伟向银行借了两万元。", "行",
)

CANDIDATES = (GENERAL, DEMO_ENGLISH, DEMO_CHINESE)  # GENERAL first: it is kept when no other set fits better

# A model that splits raw text with jieba reads Chinese (a converted ELMoForManyLangs zh model has no word
# vocabulary to choose by): the general set with its Chinese examples first, and a Chinese corpus of jieba words.
GENERAL_CHINESE = Examples(
    "general Chinese (the model splits words with jieba)",
    [GENERAL.similarity[3], GENERAL.similarity[2], *GENERAL.similarity[:2]],
    DEMO_CHINESE.corpus,
    "张伟向银行借了两万元。", "银行", split="jieba",
)


def known_fraction(examples: Examples, vocabulary: set[str]) -> float:
    """The fraction of the examples' words (as the model reads them) that are in `vocabulary`."""
    words = [w for text, split in examples.texts() for line in text.splitlines() for w in split_words(line, split)]
    return sum(w in vocabulary for w in words) / max(1, len(words))


def examples_for(tokenizer) -> tuple[Examples, float | None]:
    """The example set whose words the tokenizer's word vocabulary holds most of (GENERAL on a tie; without a
    vocabulary GENERAL, or GENERAL_CHINESE for a tokenizer that splits with jieba), and that fraction (None without
    a vocabulary)."""
    vocabulary = set(getattr(tokenizer, "word_vocab", None) or ())
    if not vocabulary:
        return (GENERAL_CHINESE if getattr(tokenizer, "word_split", None) == "jieba" else GENERAL), None
    scored = [(known_fraction(examples, vocabulary), examples) for examples in CANDIDATES]
    best = max(scored, key=lambda pair: pair[0])  # the first of the best: GENERAL on a tie
    return best[1], best[0]


def training_line(model_name: str, tokenizer) -> str | None:
    """What the page says the model was trained on (plain text), from what its folder records: the demo's settings
    (`demo_settings.json` beside the model folder), else `elmo-pretrain`'s `train_results.json`; and the size of
    its word vocabulary. None when nothing is known (a Hub model without a vocabulary)."""
    folder = Path(model_name)
    parts = []
    demo = _read_json(folder.parent / "demo_settings.json") if folder.is_dir() else None
    results = _read_json(folder / "train_results.json") if folder.is_dir() else None
    if demo is not None:
        corpus = ", ".join(Path(f).name for f in demo["train_file"]) if demo.get("train_file") else (
            f"its generated {'Chinese' if demo.get('language') == 'zh' else 'English'} corpus of "
            f"{demo.get('num_sentences') or 0:,} sentences")
        parts.append(f"trained by elmo-demo on {corpus}, {demo.get('max_steps', '?')} steps")
    elif results is not None and results.get("tokens_seen"):
        parts.append(f"pretrained on {int(results['tokens_seen']):,} tokens")
    vocabulary = getattr(tokenizer, "word_vocab", None)
    if vocabulary:
        parts.append(f"a word vocabulary of {len(vocabulary):,} words (what its language model learned to "
                     "predict): sentences in other words show less of what it learned")
    return "; ".join(parts) or None


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        logger.debug("%s holds no JSON object: not read", path)
        return None
    return data
