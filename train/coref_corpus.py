"""A generated English coreference set where only the context tells which earlier name a pronoun refers to, and two
baselines to beat on it.

Everything here is produced by code. A document introduces two people of different gender ("anna met ben at the
market .") and then refers to one or both by pronouns ("she smiled .", "he thanked her ."), which of them at random:
the gender of the names, learnt from the training documents, is the only way to tell. A fifth of the documents bring
in a group instead ("anna met the engineers ."), referred to by "they". Gold clusters are the referred people and
groups with their pronouns; a name never referred to again is not a mention (as in CoNLL-2012, no singletons).

The baselines (`singleton_baseline`, `nearest_baseline`) are scored with the task's metrics by the test that runs
`elmo-finetune coreference` on this set: every gold mention alone in its own cluster, and each pronoun linked to the
nearest earlier name, group or pronoun of the same number (a rule that knows the number of pronouns and groups, but
not the gender of names, which is what the model has to learn).
"""

from __future__ import annotations

import json
import random

FEMALE = ["anna", "carla", "emma", "grace", "iris", "kate", "lucy", "maria"]
MALE = ["ben", "david", "felix", "henry", "jack", "leo", "oscar", "peter"]
GROUPS = ["engineers", "students", "farmers", "nurses", "players"]
MEETINGS = ["met {b} at the market", "called {b}", "visited {b} on monday", "saw {b} at the station",
            "helped {b} with the boxes"]
ALONE = ["smiled", "laughed", "left early", "was tired", "went home", "sat down"]
TOWARDS = ["thanked {o}", "waved at {o}", "hugged {o}", "called {o} later", "paid {o}"]
SUBJECT = {"female": "she", "male": "he", "plural": "they"}
OBJECT = {"female": "her", "male": "him", "plural": "them"}
PLURAL_WORDS = {"they", "them"}
PRONOUNS = {"she", "he", "they", "her", "him", "them"}


class _Document:
    """Words, sentences and clusters being built: `mention` adds words and records the span under an entity."""

    def __init__(self):
        self.sentences: list[list[str]] = []
        self.words = 0
        self.mentions: dict[str, list[list[int]]] = {}

    def sentence(self, parts: list[tuple[str, str | None]]) -> None:
        """`parts`: (text, entity or None) in order; the text of a mention is its span."""
        words = []
        for text, entity in parts:
            tokens = text.split()
            if entity is not None:
                start = self.words + len(words)
                self.mentions.setdefault(entity, []).append([start, start + len(tokens) - 1])
            words += tokens
        self.sentences.append(words + ["."])
        self.words += len(words) + 1


def document(rng: random.Random, key: str) -> dict:
    """One document in e2e-coref's JSON form (`doc_key`, `sentences`, `clusters`)."""
    doc = _Document()
    first = rng.choice(["female", "male"])
    if rng.random() < 0.2:  # a person and a group: number tells them apart
        second, names = "plural", {first: rng.choice(FEMALE if first == "female" else MALE),
                                   "plural": "the " + rng.choice(GROUPS)}
    else:
        second = "male" if first == "female" else "female"
        names = {"female": rng.choice(FEMALE), "male": rng.choice(MALE)}
    if rng.random() < 0.5:
        first, second = second, first
    before, after = rng.choice(MEETINGS).split("{b}")
    doc.sentence([(names[first], first), (before.strip(), None), (names[second], second), (after.strip(), None)])
    subject = rng.choice([first, second])
    if rng.random() < 0.5:
        doc.sentence([(SUBJECT[subject], subject), (rng.choice(ALONE), None)])
    else:
        other = second if subject == first else first
        verb, rest = rng.choice(TOWARDS).split("{o}")
        doc.sentence([(SUBJECT[subject], subject), (verb.strip(), None), (OBJECT[other], other),
                      (rest.strip(), None)])
    clusters = [spans for spans in doc.mentions.values() if len(spans) > 1]
    clusters.sort(key=lambda spans: spans[0])
    return {"doc_key": key, "sentences": [[w for w in s if w] for s in doc.sentences], "clusters": clusters}


def corpus(count: int, seed: int = 0) -> list[dict]:
    """`count` documents, the same for the same seed."""
    rng = random.Random(seed)
    return [document(rng, f"generated_{seed}_{i}") for i in range(count)]


def write_jsonl(path, documents: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(doc) + "\n" for doc in documents)


# ---------------------------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------------------------
def singleton_baseline(doc: dict) -> list[list[tuple[int, int]]]:
    """Every gold mention alone in a cluster of its own."""
    return [[tuple(mention)] for cluster in doc["clusters"] for mention in cluster]


def candidate_mentions(words: list[str]) -> list[tuple[int, int, str]]:
    """The mentions a simple rule finds: pronouns, "the GROUP" and names, with their number."""
    found = []
    for i, word in enumerate(words):
        if word in PRONOUNS:
            found.append((i, i, "plural" if word in PLURAL_WORDS else "singular"))
        elif word in FEMALE or word in MALE:
            found.append((i, i, "singular"))
        elif word in GROUPS and i and words[i - 1] == "the":
            found.append((i - 1, i, "plural"))
    return found


def nearest_baseline(doc: dict) -> list[list[tuple[int, int]]]:
    """Each pronoun linked to the nearest earlier mention of the same number; clusters follow the links."""
    words = [word for sentence in doc["sentences"] for word in sentence]
    mentions = candidate_mentions(words)
    cluster_of: dict[tuple[int, int], int] = {}
    clusters: list[list[tuple[int, int]]] = []
    for k, (start, end, number) in enumerate(mentions):
        if words[start] not in PRONOUNS:
            continue
        earlier = [m for m in mentions[:k] if m[2] == number]
        if not earlier:
            continue
        antecedent = earlier[-1][:2]
        if antecedent not in cluster_of:
            cluster_of[antecedent] = len(clusters)
            clusters.append([antecedent])
        cluster_of[(start, end)] = cluster_of[antecedent]
        clusters[cluster_of[antecedent]].append((start, end))
    return clusters
