"""A fine-tuned head continued on other labels, label by NAME: the output layer's row of each label the data keeps
moves to that label's new id, a new label gets a freshly initialised row, a label the data no longer has is dropped.
transformers' `ignore_mismatched_sizes` goes by position instead: with as many labels as before (one renamed) it kept
every row and renamed it by sorted order, a silent permutation of what the head had learned.

The label-indexed weights of the project's heads are the linear layer `classifier` ([labels, width] and [labels])
and, for a tagger with a CRF, its transition scores; the CRF's allowed transitions follow from the new names."""

from __future__ import annotations

import logging

import torch

from elmo_hf.modeling_elmo.crf_elmo import ElmoCRF, allowed_transitions

logger = logging.getLogger(__name__)


def relabel_head(model, label2id: dict[str, int], what: str = "labels") -> None:
    """Give `model` (a head of labels, loaded with its saved ones) the labels of `label2id`, by name, in place,
    and say in one line which labels were kept, initialised and dropped."""
    old = [model.config.id2label[i] for i in range(model.config.num_labels)]
    new = sorted(label2id, key=label2id.__getitem__)
    source = [old.index(label) if label in old else None for label in new]  # the old row of each new label
    classifier = model.classifier
    if not isinstance(classifier, torch.nn.Linear) or classifier.out_features != len(old):
        raise TypeError(f"{type(model).__name__}: no linear `classifier` of {len(old)} labels to relabel")
    fresh = torch.nn.Linear(classifier.in_features, len(new), bias=classifier.bias is not None)
    fresh.to(device=classifier.weight.device, dtype=classifier.weight.dtype)
    model._init_weights(fresh)
    with torch.no_grad():
        for row, old_row in enumerate(source):
            if old_row is not None:
                fresh.weight[row] = classifier.weight[old_row]
                if fresh.bias is not None:
                    fresh.bias[row] = classifier.bias[old_row]
    model.classifier = fresh
    crf = getattr(model, "crf", None)
    if crf is not None:
        model.crf = _relabelled_crf(crf, new, source, model.config.crf_constraints)
    model.config.id2label = dict(enumerate(new))
    model.config.label2id = {label: i for i, label in enumerate(new)}
    model.num_labels = model.config.num_labels
    kept = [label for label, old_row in zip(new, source) if old_row is not None]
    added = [label for label, old_row in zip(new, source) if old_row is None]
    dropped = [label for label in old if label not in label2id]
    log = logger.warning if dropped else logger.info
    log("continuing the saved head by %s name: kept %s%s%s", what.removesuffix("s"), kept,
        f", initialised {added} (new in the data)" if added else "",
        f", dropped {dropped} (not in the data)" if dropped else "")


def _relabelled_crf(crf: ElmoCRF, new: list[str], source: list[int | None], constraints: str) -> ElmoCRF:
    """A CRF over the `new` labels whose learned scores between kept labels are the old ones; a new label's
    scores start at zero, as a new CRF's do."""
    fresh = ElmoCRF(len(new), allowed_transitions(new, constraints))
    fresh.to(device=crf.transitions.device, dtype=crf.transitions.dtype)
    kept = [(row, old_row) for row, old_row in enumerate(source) if old_row is not None]
    with torch.no_grad():
        for row, old_row in kept:
            fresh.start_transitions[row] = crf.start_transitions[old_row]
            fresh.end_transitions[row] = crf.end_transitions[old_row]
            for column, old_column in kept:
                fresh.transitions[row, column] = crf.transitions[old_row, old_column]
    return fresh
