"""A generated English corpus where ambiguous words occur in clearly different senses.

Everything here is produced by code (nothing written by others is shipped): sentence templates per sense of
"bank", "bat", "plant" and "spring", filled from small word lists, plus sentences without them. Tokens are
separated by spaces, punctuation included, like the text the published ELMo models were trained on.
"""

from __future__ import annotations

import random
from collections.abc import Callable

NAMES = ["anna", "ben", "carla", "david", "emma", "felix", "grace", "henry", "iris", "jack", "kate", "leo"]
TIMES = ["in the morning", "at noon", "in the evening", "on monday", "on friday", "last week", "yesterday", "today"]

# slot -> words; the slots are shared by templates of different senses only where the sense cannot leak
SLOTS = {
    "name": NAMES,
    "time": TIMES,
    "river": ["river", "stream", "lake", "canal"],
    "creature": ["heron", "duck", "frog", "otter", "fisherman"],
    "shore": ["muddy", "grassy", "steep", "quiet", "sandy"],
    "money": ["money", "cash", "savings", "salary", "cheque"],
    "finance": ["loan", "mortgage", "account", "credit card", "interest rate"],
    "manager": ["manager", "clerk", "teller", "director"],
    "cave": ["cave", "barn", "attic", "tunnel"],
    "night": ["at night", "at dusk", "after sunset", "in the dark"],
    "insect": ["moths", "insects", "mosquitoes", "beetles"],
    "sport": ["baseball", "cricket", "softball"],
    "ball": ["ball", "pitch", "fastball"],
    "wood": ["wooden", "heavy", "new", "old"],
    "factory": ["steel", "chemical", "power", "car", "cement"],
    "workers": ["workers", "engineers", "employees", "staff"],
    "garden": ["garden", "pot", "greenhouse", "window box"],
    "leaf": ["leaves", "flowers", "roots", "seeds"],
    "care": ["watered", "pruned", "repotted", "fed"],
    "season_word": ["april", "may", "march", "the new year"],
    "bloom": ["flowers", "blossoms", "tulips", "daffodils"],
    "metal": ["metal", "steel", "copper", "coiled"],
    "device": ["mattress", "watch", "clock", "pen", "trampoline"],
    "animal": ["dog", "cat", "horse", "child"],
    "food": ["bread", "soup", "apples", "rice", "cheese"],
    "place": ["market", "school", "station", "library", "kitchen"],
}

SENSES: dict[str, dict[str, list[str]]] = {
    "bank": {
        "river": [
            "{name} sat on the bank of the {river} and watched a {creature} .",
            "the {shore} bank of the {river} was covered with reeds .",
            "we walked along the bank of the {river} {time} .",
            "a {creature} was resting on the {shore} bank near the water .",
            "the {river} flooded its bank after the heavy rain .",
        ],
        "finance": [
            "{name} went to the bank to deposit {money} {time} .",
            "the bank approved the {finance} for {name} .",
            "the {manager} at the bank explained the {finance} .",
            "{name} withdrew {money} from the bank {time} .",
            "the bank charged a fee on the {finance} .",
        ],
    },
    "bat": {
        "animal": [
            "a bat flew out of the {cave} {night} .",
            "the bat hunted {insect} {night} .",
            "{name} saw a bat hanging in the {cave} .",
            "the little bat spread its wings and flew into the {cave} .",
        ],
        "sport": [
            "{name} swung the bat and hit the {ball} .",
            "the {sport} player picked up a {wood} bat .",
            "{name} bought a {wood} bat for {sport} .",
            "he gripped the bat and waited for the {ball} .",
        ],
    },
    "plant": {
        "factory": [
            "the {factory} plant hired new {workers} {time} .",
            "{workers} at the {factory} plant went on strike .",
            "the plant produces {factory} parts for export .",
            "the {factory} plant closed after the accident .",
        ],
        "flora": [
            "{name} {care} the plant in the {garden} .",
            "the plant in the {garden} grew new {leaf} .",
            "{name} put the plant near the window so its {leaf} get light .",
            "the small plant needs water and sun to grow {leaf} .",
        ],
    },
    "spring": {
        "season": [
            "in spring the {bloom} open in the park .",
            "{name} loves the warm days of spring .",
            "the {bloom} appear every spring around {season_word} .",
            "spring comes after winter and brings {bloom} .",
        ],
        "coil": [
            "the {metal} spring inside the {device} broke .",
            "{name} replaced the spring in the {device} .",
            "the spring was compressed and then released .",
            "a {metal} spring makes the {device} bounce .",
        ],
    },
}

FILLER = [
    "{name} ate {food} at the {place} {time} .",
    "the {animal} ran to the {place} {time} .",
    "{name} and {name} met at the {place} .",
    "{name} bought {food} at the {place} .",
    "the {animal} slept near the {place} {time} .",
]


def fill_template(template: str, slots: dict[str, list[str]], rng: random.Random) -> str:
    """`template` with every `{slot}` replaced by a random choice from `slots[slot]` (shared by both corpora)."""
    out = template
    while "{" in out:
        start = out.index("{")
        end = out.index("}", start)
        out = out[:start] + rng.choice(slots[out[start + 1 : end]]) + out[end + 1 :]
    return out


def _fill(template: str, rng: random.Random) -> str:
    return fill_template(template, SLOTS, rng)


def generate_corpus(num_sentences: int, seed: int = 0, filler_fraction: float = 0.3) -> list[str]:
    """Sentences, one per item: every sense equally often, with `filler_fraction` of other sentences."""
    rng = random.Random(seed)
    templates = [t for senses in SENSES.values() for sense in senses.values() for t in sense]
    sentences = []
    for _ in range(num_sentences):
        pool = FILLER if rng.random() < filler_fraction else templates
        sentences.append(_fill(rng.choice(pool), rng))
    return sentences


def generate_probes(per_sense: int, seed: int = 1) -> list[tuple[str, str, str]]:
    """Held-out `(word, sense, sentence)` triples: sentences with the ambiguous word in a known sense."""
    return probes_from(SENSES, _fill, per_sense, seed)


def probes_from(senses_by_word: dict, fill: Callable, per_sense: int, seed: int) -> list[tuple[str, str, str]]:
    """`per_sense` filled templates for every sense of every word of `senses_by_word` (word -> sense -> templates),
    as `(word, sense, sentence)` triples; shared by the English and the Chinese corpus."""
    rng = random.Random(seed)
    probes = []
    for word, senses in senses_by_word.items():
        for sense, templates in senses.items():
            for _ in range(per_sense):
                probes.append((word, sense, fill(rng.choice(templates), rng)))
    return probes
