"""transformers' SQuAD and GLUE recipes, as docs/ecosystem.md shows them, run as remote code: the page's blocks (which
tests/test_readme.py runs with the project installed) run here in a fresh interpreter that cannot import the
project, on a tiny model saved where the page looks for the demo's, then checks on what they left behind.

The recipes' windows must carry the answers: every training window whose answer it holds points at exactly the
answer's words (start and end positions found from `offset_mapping` and `sequence_ids`, as the recipe finds them),
every answerable question has such a window, the predicted answers are spans of their passages (or "" where the
recipe allows no answer), and `Trainer` trains and evaluates both heads.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import REPO, run_isolated, tiny_model
from test_readme import code_blocks

pytestmark = pytest.mark.slow

CHECKS = r"""
import math
assert type(model).__module__.startswith("transformers_modules"), type(model)  # remote code, the project hidden
every = squad["train"][:]
encoded, features = windows(every), train_features(every)
held = set()
for i, (start, end) in enumerate(zip(features["start_positions"], features["end_positions"])):
    answer = every["answers"][encoded["overflow_to_sample_mapping"][i]]
    if start == 0:
        continue
    held.add(encoded["overflow_to_sample_mapping"][i])
    assert encoded.tokens(i)[start: end + 1] == tokenizer.tokenize(answer["text"][0]), (i, answer)
answerable = {k for k, answer in enumerate(every["answers"]) if answer["text"]}
assert held == answerable and len(encoded["input_ids"]) > len(every["id"])  # windows, each answer whole in one
for version, with_no_answer in (("v1", False), ("v2", True)):
    features = squad[version].map(eval_features, batched=True, remove_columns=squad[version].column_names)
    start_logits, end_logits = trainer_qa.predict(features.remove_columns(["example_id", "offset_mapping"])).predictions
    predicted = best_answers(squad[version], features, start_logits, end_logits, with_no_answer)
    for example in squad[version]:
        answer = predicted[example["id"]]
        assert answer in example["context"] and (answer or with_no_answer), (version, answer)
metrics = trainer.evaluate()
assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and math.isfinite(metrics["eval_loss"])
assert trainer.state.global_step == 12
print("RECIPES CHECKED", json.dumps({"squad_windows": len(encoded["input_ids"]), "snli": metrics["eval_accuracy"]}))
"""


def test_squad_and_glue_recipes_run_unchanged_as_remote_code(tmp_path):
    from elmo_hf.tokenization import ElmoTokenizer

    torch.manual_seed(0)
    folder = tmp_path / "outputs" / "demo" / "model"
    tiny_model().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    blocks = [block["code"] for block in code_blocks(REPO / "docs" / "ecosystem.md")
              if block["language"] == "python" and not block["not_run"]]
    assert len(blocks) == 3  # the data, the SQuAD recipe, the GLUE recipe
    # the SQuAD trainer is named `trainer` in the page, then the GLUE one: keep the first for the checks
    code = "\n".join([blocks[0], blocks[1], "trainer_qa = trainer", blocks[2], CHECKS])
    result = run_isolated(code, cwd=tmp_path, timeout=600)
    summary = json.loads(result.stdout.split("RECIPES CHECKED", 1)[1])
    assert summary["squad_windows"] > 64
