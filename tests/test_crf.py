"""The tagger's CRF (`modeling_elmo/crf_elmo.py`, `ElmoForTokenClassification` with `use_crf`): the forward
algorithm, Viterbi and the max-marginal logits against brute-force enumeration of every tag sequence, the
transition rules of BIO and BIOES, and the head's loss and decoding (batch against single sentences)."""

from __future__ import annotations

import itertools

import pytest
import torch
from conftest import random_char_ids, tiny_model
from tolerances import FLOAT64, REORDERED, assert_close

from elmo_hf.modeling_elmo.crf_elmo import FORBIDDEN, ElmoCRF, allowed_transitions, scheme_of
from elmo_hf.modeling_elmo.modeling_elmo_heads import ElmoForTokenClassification

pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
BIOES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def random_crf(labels: list[str], constraints: str, seed: int) -> ElmoCRF:
    generator = torch.Generator().manual_seed(seed)
    crf = ElmoCRF(len(labels), allowed_transitions(labels, constraints)).double()
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64))
    return crf


def every_sequence(crf: ElmoCRF, emissions: torch.Tensor, positions: list[int]) -> dict[tuple[int, ...], float]:
    """The score of every tag sequence over `positions` of one row, written out term by term."""
    with torch.no_grad():
        start, transitions, end = crf.scores(torch.float64, emissions.device)
    scores = {}
    for tags in itertools.product(range(crf.num_labels), repeat=len(positions)):
        total = start[tags[0]] + end[tags[-1]] + sum(emissions[p, k] for p, k in zip(positions, tags))
        scores[tags] = float(total + sum(transitions[a, b] for a, b in zip(tags, tags[1:])))
    return scores


def masks_of_several_lengths(steps: int = 6) -> torch.Tensor:
    """Rows of 1 to 5 masked positions, some with gaps (<S> first, padding after, as the head's word masks are)."""
    rows = [[1], [1, 2], [0, 1, 2], [1, 2, 3, 4], [0, 2, 5], [1, 2, 3, 4, 5]]
    mask = torch.zeros(len(rows), steps, dtype=torch.bool)
    for row, positions in enumerate(rows):
        mask[row, positions] = True
    return mask


@pytest.mark.parametrize("labels, constraints", [(BIO[:3], "none"), (BIO, "auto"), (BIOES[:5], "bioes")])
def test_forward_viterbi_and_max_marginals_equal_brute_force(labels, constraints):
    crf = random_crf(labels, constraints, seed=len(labels)).requires_grad_(False)
    mask = masks_of_several_lengths()
    emissions = torch.randn(*mask.shape, len(labels), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    log_z, paths = crf.log_partition(emissions, mask), crf.decode(emissions, mask)
    marginals = crf.max_marginals(emissions, mask)
    for row in range(mask.shape[0]):
        positions = mask[row].nonzero().flatten().tolist()
        scores = every_sequence(crf, emissions[row], positions)
        assert_close(log_z[row], torch.logsumexp(torch.tensor(list(scores.values()), dtype=torch.float64), 0), FLOAT64,
                     f"log Z row {row}")
        best = max(scores, key=scores.get)
        assert paths[row] == list(best), row
        assert marginals[row, positions].argmax(-1).tolist() == list(best)  # the logits' argmax is Viterbi
        expected = [[max(s for tags, s in scores.items() if tags[i] == k) for k in range(len(labels))]
                    for i in range(len(positions))]
        assert_close(marginals[row, positions], torch.tensor(expected, dtype=torch.float64), FLOAT64,
                     f"max-marginals row {row}")
        gold = torch.zeros(mask.shape, dtype=torch.long)
        gold[row, positions] = torch.tensor(best)
        assert_close(crf.sequence_score(emissions, gold, mask)[row], torch.tensor(scores[best], dtype=torch.float64),
                     FLOAT64)
    outside = ~mask
    assert torch.equal(marginals[outside], emissions[outside])  # <S>, </S>, padding: the emissions as they are


def test_batch_equals_single_rows_and_the_loss_is_the_mean_negative_log_likelihood():
    crf = random_crf(BIO, "auto", seed=3).requires_grad_(False)
    mask = masks_of_several_lengths()
    emissions = torch.randn(*mask.shape, len(BIO), generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    tags = torch.randint(len(BIO), mask.shape, generator=torch.Generator().manual_seed(5))
    together = crf.log_partition(emissions, mask) - crf.sequence_score(emissions, tags, mask)
    for row in range(mask.shape[0]):
        length = int(mask[row].nonzero().max()) + 1  # the row alone, cut after its last position
        alone = crf.log_partition(emissions[row : row + 1, :length], mask[row : row + 1, :length]) \
            - crf.sequence_score(emissions[row : row + 1, :length], tags[row : row + 1, :length],
                                 mask[row : row + 1, :length])
        assert_close(alone[0], together[row], FLOAT64, f"row {row}")
        assert crf.decode(emissions[row : row + 1, :length], mask[row : row + 1, :length]) == \
            [crf.decode(emissions, mask)[row]]
    assert_close(crf.negative_log_likelihood(emissions, tags, mask), together.mean(), FLOAT64)
    assert (together > 0).all()  # -log p of one sequence among many


def is_legal(tags: list[str], scheme: str) -> bool:
    """The test's own reading of the schemes: an entity opens with B- (or S- alone) and I-/E- continue it."""
    previous = "O"
    for tag in [*tags, "O"]:
        prefix, kind = (tag.split("-", 1) + [None])[:2] if tag != "O" else ("O", None)
        before, kind_before = (previous.split("-", 1) + [None])[:2] if previous != "O" else ("O", None)
        open_before = before in ("B", "I") if scheme == "bio" else before in ("B", "I")
        continues = prefix in ("I",) if scheme == "bio" else prefix in ("I", "E")
        if continues and not (open_before and kind_before == kind):
            return False
        if scheme == "bioes" and open_before and not continues:
            return False
        previous = tag
    return True


@pytest.mark.parametrize("labels, scheme", [(BIO, "bio"), (BIOES, "bioes")])
def test_constrained_decoding_never_takes_a_forbidden_transition(labels, scheme):
    """Emissions that favour illegal sequences (an I- first, E- after O, ...) at every word: still legal paths."""
    assert scheme_of(labels) == scheme
    crf = ElmoCRF(len(labels), allowed_transitions(labels))
    generator = torch.Generator().manual_seed(6)
    mask = masks_of_several_lengths()
    decoded = 0
    for _ in range(20):
        emissions = 20 * torch.randn(*mask.shape, len(labels), generator=generator)
        for row, path in enumerate(crf.decode(emissions, mask)):
            names = [labels[k] for k in path]
            assert is_legal(names, scheme), names
            assert crf.max_marginals(emissions, mask)[row, mask[row]].argmax(-1).tolist() == path
            decoded += 1
    unconstrained = ElmoCRF(len(labels))
    illegal = [not is_legal([labels[k] for k in path], scheme)
               for path in unconstrained.decode(20 * torch.randn(64, 6, len(labels), generator=generator),
                                                torch.ones(64, 6, dtype=torch.bool))]
    assert any(illegal)  # the emissions alone would break the rules: the constraints did the work
    assert decoded == 120


def test_schemes_and_transition_rules_from_label_names():
    assert scheme_of(BIO) == "bio" and scheme_of(BIOES) == "bioes" and scheme_of(["LABEL_0", "LABEL_1"]) == "none"
    assert scheme_of(["O", "B-PER", "NOUN"]) == "none" and scheme_of(BIO, "none") == "none"
    # tags read as the entity scorer reads them: either case, "_" after the prefix, BILOU's L and U
    lower = [label.lower() for label in BIO]
    assert scheme_of(lower) == "bio" and allowed_transitions(lower) == allowed_transitions(BIO)
    assert scheme_of(["O", "U_PER", "B_LOC", "L_LOC"]) == "bioes"
    start, follow, end = allowed_transitions(BIO)
    assert start == [True, True, False, True, False] and end == [True] * 5
    names = {(a, b): follow[i][j] for i, a in enumerate(BIO) for j, b in enumerate(BIO)}
    assert names["B-PER", "I-PER"] and names["I-PER", "I-PER"] and names["I-PER", "B-LOC"]
    assert not names["O", "I-PER"] and not names["B-LOC", "I-PER"] and not names["I-LOC", "I-PER"]
    start, follow, end = allowed_transitions(BIOES)
    assert [label for label, ok in zip(BIOES, start) if ok] == ["O", "B-PER", "S-PER", "B-LOC", "S-LOC"]
    assert [label for label, ok in zip(BIOES, end) if ok] == ["O", "E-PER", "S-PER", "E-LOC", "S-LOC"]
    after_b = [label for label, ok in zip(BIOES, follow[BIOES.index("B-PER")]) if ok]
    assert after_b == ["I-PER", "E-PER"]
    after_e = [label for label, ok in zip(BIOES, follow[BIOES.index("E-PER")]) if ok]
    assert after_e == ["O", "B-PER", "S-PER", "B-LOC", "S-LOC"]
    crf = ElmoCRF(len(BIO), allowed_transitions(BIO))
    assert crf.scores(torch.float32, torch.device("cpu"))[1][0, 2] == FORBIDDEN  # O -> I-PER


def crf_tagger(**overrides) -> ElmoForTokenClassification:
    labels = {i: label for i, label in enumerate(BIO)}
    torch.manual_seed(0)
    model = tiny_model(ElmoForTokenClassification, use_crf=True, id2label=labels,
                       label2id={label: i for i, label in labels.items()}, **overrides)
    with torch.no_grad():
        model.crf.transitions.normal_()
    return model


def test_the_heads_logits_argmax_is_the_viterbi_path_and_batches_equal_single_sentences():
    model = crf_tagger(token_classifier_encoder="lstm")
    lengths = [7, 4, 2, 5]
    ids = random_char_ids(lengths, seed=2)
    ids[:, 0, :3] = torch.tensor([259, 257, 260])  # <S> first
    for row, n in enumerate(lengths):
        ids[row, n - 1, :3] = torch.tensor([259, 258, 260])  # </S> last
        ids[row, n - 1, 3:] = 261
    ids[:, 0, 3:] = 261
    mask = (ids != 0).any(-1).long()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    paths = model.decode(ids, mask)
    assert [len(p) for p in paths] == [n - 2 for n in lengths]
    for row, n in enumerate(lengths):
        assert logits[row, 1 : n - 1].argmax(-1).tolist() == paths[row]
        with torch.no_grad():
            alone = model(input_ids=ids[row : row + 1, :n]).logits
        assert_close(alone[0], logits[row, :n], REORDERED, f"row {row}")
        assert model.decode(ids[row : row + 1, :n]) == [paths[row]]


def test_the_heads_loss_is_the_crf_negative_log_likelihood_and_labels_must_cover_every_word():
    model = crf_tagger()
    from elmo_hf.tokenization import ElmoTokenizer

    encoded = ElmoTokenizer()(["John Smith went to Paris", "Mary left"], padding=True, return_tensors="pt")
    labels = torch.tensor([[-100, 1, 2, 0, 0, 3, -100], [-100, 1, 0, -100, -100, -100, -100]])
    with torch.no_grad():
        loss = model(**encoded, labels=labels).loss
        emissions, words, _ = model.emission_scores(encoded["input_ids"], encoded["attention_mask"])
        expected = model.crf.negative_log_likelihood(emissions, labels.clamp(min=0), words)
    assert_close(loss, expected + model.mix_l2_penalty() * model.training, REORDERED)
    assert words.sum(1).tolist() == [5, 2]
    model.train()
    loss = model(**encoded, labels=labels).loss
    loss.backward()
    assert model.crf.transitions.grad.abs().sum() > 0  # the transitions learn
    labels[0, 3] = -100
    with pytest.raises(ValueError, match="with use_crf every word needs a label.*row 0 has -100 at word position 3"):
        model(**encoded, labels=labels)
