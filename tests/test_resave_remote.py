"""A model loaded as remote code (without the project) and saved again: its folder opens with every Auto class its
config.json names. transformers fetches only the files of the classes loaded, so the heads' file of a folder loaded
as `AutoModel` must be found elsewhere or left out of the `auto_map`, with a warning naming what was left out."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import _NO_PROJECT, REPO, clean_env, run_isolated, tiny_model

HEADS = ["AutoModelForSequenceClassification", "AutoModelForTokenClassification"]


@pytest.mark.slow
def test_a_model_loaded_as_remote_code_saves_a_folder_that_opens_with_its_auto_map(tmp_path):
    tiny_model().save_pretrained(tmp_path / "base")
    shutil.copytree(tmp_path / "base", tmp_path / "headless")
    code = f"""
import json, logging, os
os.environ["HF_MODULES_CACHE"] = {str(tmp_path / "modules")!r}
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification

class Warnings(logging.Handler):
    records = []
    def emit(self, record):
        self.records.append(record.getMessage())
logging.getLogger().addHandler(Warnings(logging.WARNING))

def resave(source, target):
    model = AutoModel.from_pretrained(source, trust_remote_code=True)
    if source == "headless":  # the heads' file is nowhere: not in the module cache, not in the source folder
        os.remove("headless/modeling_elmo_heads.py")
    Warnings.records.clear()
    model.save_pretrained(target)
    left_out = [m for m in Warnings.records if "auto_map" in m]
    return json.load(open(target + "/config.json"))["auto_map"], left_out

# only AutoModel's files were loaded: the heads' file comes from the folder the model was loaded from
auto_map, left_out = resave("base", "resaved")
assert left_out == [], left_out
for auto in (AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification):
    assert auto.__name__ in auto_map, auto_map
    assert type(auto.from_pretrained("resaved", trust_remote_code=True)).__module__.startswith("transformers_modules")

auto_map, left_out = resave("headless", "resaved_headless")
print(json.dumps({{"auto_map": auto_map, "left_out": left_out}}))
for auto in (AutoConfig, AutoModel):
    auto.from_pretrained("resaved_headless", trust_remote_code=True)
"""
    result = run_isolated(code, cwd=tmp_path)
    headless = json.loads(result.stdout.strip().splitlines()[-1])
    assert not set(HEADS) & set(headless["auto_map"]) and "AutoModel" in headless["auto_map"]
    assert len(headless["left_out"]) == 1 and all(auto in headless["left_out"][0] for auto in HEADS)
    assert "modeling_elmo_heads.py" in headless["left_out"][0]
    assert not (tmp_path / "resaved_headless" / "modeling_elmo_heads.py").exists()


# --------------------------------------------------------------------------------------------------
# The second hop (issue 54): a task model loaded as remote code, fine-tuned and saved, opens with its pipeline
# --------------------------------------------------------------------------------------------------

_spec = importlib.util.spec_from_file_location("compat_environments", REPO / "tests" / "compat" / "environments.py")
environments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(environments)

# The stacks the loop runs on: this interpreter, and the compatibility environments (skipped, in one line, where not
# built): the oldest transformers 4, and a 5.x beside the pinned one.
STACKS = ["pinned", "transformers-4.46", "transformers-5.16"]
TAGS = {0: "O", 1: "B-PER", 2: "I-PER"}

FINE_TUNE = """
import json, sys, torch
from transformers import (AutoModelForQuestionAnswering, AutoModelForTokenClassification, AutoTokenizer, Trainer,
                          TrainingArguments)

class Rows(torch.utils.data.Dataset):
    def __init__(self, batch):
        self.batch = batch
    def __len__(self):
        return len(self.batch["input_ids"])
    def __getitem__(self, i):
        return {key: value[i] for key, value in self.batch.items()}

def rows(task, tokenizer):
    if task == "token-classification":  # a tag for every word; <S>, </S> and padding -100
        batch = dict(tokenizer(["John lives in Paris", "Mary sings"], padding=True, return_tensors="pt"))
        batch["labels"] = torch.full_like(batch["attention_mask"], -100)
        for i, length in enumerate(batch["attention_mask"].sum(1).tolist()):
            batch["labels"][i, 1 : length - 1] = torch.arange(length - 2) % 3
        return batch
    batch = dict(tokenizer(["Who lives here?", "Who sings?"], ["John lives here", "Mary sings"], padding=True,
                           return_tensors="pt"))
    last = batch["attention_mask"].sum(1) - 2  # the context's last word
    return {**batch, "start_positions": last, "end_positions": last}

out = {}
for source, target, task in __JOBS__:
    auto = AutoModelForTokenClassification if task == "token-classification" else AutoModelForQuestionAnswering
    model = auto.from_pretrained(source, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=True)
    args = TrainingArguments(output_dir=target + "-trainer", use_cpu=True, report_to="none", max_steps=1,
                             save_strategy="no", logging_strategy="no", disable_tqdm=True, learning_rate=0.1,
                             per_device_train_batch_size=2)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = Trainer(model=model, args=args, train_dataset=Rows(rows(task, tokenizer)), processing_class=tokenizer)
    trainer.train()
    trainer.save_model(target)  # save_pretrained, and the tokenizer's
    model.eval()
    with torch.no_grad():
        output = model(**tokenizer(["Mary lives in Paris"], ["Mary lives in Paris"], return_tensors="pt")
                       if task == "question-answering" else tokenizer(["Mary lives in Paris"], return_tensors="pt"))
    out[task] = {"module": type(model).__module__, "changed": any(not torch.equal(a, b) for a, b in
                                                                   zip(before, model.parameters())),
                 "logits": (output.logits if task == "token-classification" else output.start_logits).tolist()}
print(json.dumps(out))
"""

ANSWER = """
import json, torch
from transformers import AutoModelForQuestionAnswering, AutoModelForTokenClassification, AutoTokenizer, pipeline

out = {}
for folder, task in __JOBS__:
    answer = pipeline(task, model=folder, trust_remote_code=True)
    auto = AutoModelForTokenClassification if task == "token-classification" else AutoModelForQuestionAnswering
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    with torch.no_grad():
        output = model(**tokenizer(["Mary lives in Paris"], ["Mary lives in Paris"], return_tensors="pt")
                       if task == "question-answering" else tokenizer(["Mary lives in Paris"], return_tensors="pt"))
    result = (answer("Mary lives in Paris", ignore_labels=[]) if task == "token-classification"
              else answer(question="Who lives in Paris?", context="Mary lives in Paris"))
    out[task] = {"pipeline": type(answer).__module__ + "." + type(answer).__name__,
                 "result": json.loads(json.dumps(result, default=float)),
                 "logits": (output.logits if task == "token-classification" else output.start_logits).tolist()}
print(json.dumps(out))
"""


def run_stack_isolated(python: str, code: str, cwd: Path, modules: Path) -> dict:
    """Run `code` with `python` where the project is hidden and remote code goes to the module cache `modules`;
    `code` prints one JSON line last, which is returned."""
    env = {**clean_env(), "HF_MODULES_CACHE": str(modules)}
    result = subprocess.run([python, "-c", _NO_PROJECT + code], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{python} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def named_files(folder: Path) -> set[str]:
    """The code files `folder`'s config.json names: its `auto_map` and its pipelines' `impl`."""
    config = json.loads((folder / "config.json").read_text())
    references = [*config["auto_map"].values(), *(entry["impl"] for entry in config["custom_pipelines"].values())]
    return {reference.rsplit(".", 1)[0] + ".py" for reference in references}


@pytest.mark.slow
@pytest.mark.parametrize("stack", [
    pytest.param(stack, marks=[] if stack == "pinned" else [pytest.mark.compat]) for stack in STACKS])
def test_a_task_model_fine_tuned_as_remote_code_and_saved_answers_its_pipeline(tmp_path, stack):
    from elmo_hf.modeling_elmo import ElmoForQuestionAnswering, ElmoForTokenClassification
    from elmo_hf.tokenization import ElmoTokenizer

    python = sys.executable if stack == "pinned" else environments.python_of(stack)
    if python is None:
        pytest.skip(f"the environment {stack} is not built: make test builds it (pip, from the registry)")
    torch.manual_seed(0)
    heads = {"token-classification": tiny_model(ElmoForTokenClassification, id2label=TAGS,
                                                label2id={tag: i for i, tag in TAGS.items()}),
             "question-answering": tiny_model(ElmoForQuestionAnswering)}
    for task, model in heads.items():
        model.save_pretrained(tmp_path / "shared" / task)
        ElmoTokenizer().save_pretrained(tmp_path / "shared" / task)
    jobs = [(f"shared/{task}", f"fine-tuned/{task}", task) for task in heads]
    tuned = run_stack_isolated(str(python), FINE_TUNE.replace("__JOBS__", repr(jobs)), tmp_path, tmp_path / "modules")
    shutil.rmtree(tmp_path / "shared")  # the next user has the fine-tuned folders only, and no module cache
    for task in heads:
        folder = tmp_path / "fine-tuned" / task
        assert tuned[task]["module"].startswith("transformers_modules.") and tuned[task]["changed"], tuned[task]
        assert named_files(folder) <= {path.name for path in folder.glob("*.py")}, task
        assert (folder / "elmo_sentence_pooling.py").is_file()  # carried on, as a folder saved by the project has it
    jobs = [(f"fine-tuned/{task}", task) for task in heads]
    answered = run_stack_isolated(str(python), ANSWER.replace("__JOBS__", repr(jobs)), tmp_path, tmp_path / "fresh")
    tagger, reader = answered["token-classification"], answered["question-answering"]
    assert tagger["pipeline"].startswith("transformers_modules.") and tagger["pipeline"].endswith(
        "ElmoTokenClassificationPipeline")
    assert [entity["word"] for entity in tagger["result"]] == ["Mary", "lives", "in", "Paris"]  # every word, "O" too
    assert {entity["entity"] for entity in tagger["result"]} <= set(TAGS.values())
    assert reader["pipeline"].endswith("ElmoQuestionAnsweringPipeline")
    assert reader["result"]["answer"] in "Mary lives in Paris" and reader["result"]["answer"]
    for task in heads:  # the folder holds the fine-tuned weights, to the bit
        assert answered[task]["logits"] == tuned[task]["logits"], task


def test_a_folder_named_with_a_dot_is_saved_with_a_warning_naming_the_fix(tmp_path, caplog):
    """transformers 4.x cannot load remote code from a folder whose name has a dot (`elmo-v1.0`: No module named
    'transformers_modules.elmo-v1', seen on 4.46): the save says so, and names a name that works."""
    model = tiny_model()
    with caplog.at_level(logging.WARNING):
        model.save_pretrained(tmp_path / "elmo-v1")
        assert [r for r in caplog.records if "dot" in r.getMessage()] == []
        model.save_pretrained(tmp_path / "elmo-v1.0")
    warnings = [r.getMessage() for r in caplog.records if "dot" in r.getMessage()]
    assert len(warnings) == 1 and "elmo-v1.0" in warnings[0] and "'elmo-v1_0'" in warnings[0], warnings
    assert "transformers 4.x" in warnings[0] and (tmp_path / "elmo-v1.0" / "config.json").is_file()
