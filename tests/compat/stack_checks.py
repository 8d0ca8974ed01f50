"""The compatibility subset, run by one interpreter of a stack (tests/test_compat.py starts it in each environment of
tests/compat/): ELMo folders saved by the pinned stack, used as a user of that stack would.

    python tests/compat/stack_checks.py FOLDERS OUT [--repo REPO]

FOLDERS holds `base` (an ElmoModel), `classifier` (a sequence classifier) and `tagger` (a token classifier), each
with its tokenizer. First the project cannot be imported: every code file that loading by a Hub id reads passes
transformers' own scan of its imports (`check_imports`), and the folders load as remote code
(`trust_remote_code=True`). Then, with --repo, the same checks run with the project's packages imported from REPO, as
where it is installed, and the folders load without `trust_remote_code` (the token-classification pipeline, whose
class travels with the model, is asked for with it either way, as docs/finetuning.md says). One interpreter for both:
its start-up (torch, transformers) is most of the time. Every check runs; their results (vectors, logits, pipeline
outputs, windows) go to OUT/remote.pt and OUT/installed.pt for the calling test to compare across stacks, and a check
that fails ends the process with its traceback. The tagger is also loaded by a Hub id from a Hub-cache snapshot,
offline, with its remote code (`_by_hub_id`): the path a model shared on the Hub takes, which transformers 4.46-4.50
once refused for a user without the project. Standard library, torch and transformers only (datasets, for the
Trainer step, where installed).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from checkout import NoProject, import_project_from

SENTENCES = ["The bank of England rose .", "We sat on the river bank today", "ELMo reads characters", "Hi"]
PAIRS = (["A man sleeps .", "Two dogs run in the park ."], ["A person rests .", "Animals play ."])
QUESTIONS = ["Where was Ada born ?", "Who was born in Oslo ?"]
CONTEXTS = ["Ada was born in Lisbon in 1990 . Boris was born in Oslo in 1985 . They met in Paris .",
            "Oslo is the capital of Norway . Boris was born there in 1985 ."]


TRUST = {}  # from_pretrained's trust_remote_code: True for remote code, left out where the project is installed


def _load(folders: Path):
    import transformers
    from transformers import (
        AutoModel,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    tokenizer = AutoTokenizer.from_pretrained(folders / "base", **TRUST)
    models = {
        "base": AutoModel.from_pretrained(folders / "base", **TRUST).eval(),
        "classifier": AutoModelForSequenceClassification.from_pretrained(folders / "classifier", **TRUST).eval(),
        "tagger": AutoModelForTokenClassification.from_pretrained(folders / "tagger", **TRUST).eval(),
    }
    return transformers, tokenizer, models


def _forward(tokenizer, models) -> dict:
    import torch

    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    pairs = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = models["base"](**batch, output_hidden_states=True)
        return {
            "input_ids": batch["input_ids"],
            "hidden_states": torch.stack(out.hidden_states),
            "classifier_logits": models["classifier"](**batch).logits,
            "pair_logits": models["classifier"](**pairs).logits,
            "tagger_logits": models["tagger"](**batch).logits,
            "tuple_output": models["base"](**batch, return_dict=False)[0],
        }


def _multiple_choice(transformers, tokenizer, folders: Path) -> dict:
    """A multiple-choice head on the base folder (`AutoModelForMultipleChoice`): rows of N endings, N logits each."""
    import torch

    model = transformers.AutoModelForMultipleChoice.from_pretrained(folders / "base", **TRUST).eval()
    contexts, endings = ["A man sits down .", "A man sits down ."], ["He eats .", "He flies ."]
    encoded = tokenizer(contexts, endings, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**{key: value.unsqueeze(0) for key, value in encoded.items()}).logits
    return {"multiple_choice_shape": list(logits.shape)}


def _pipelines(transformers, folders: Path) -> dict:
    pipeline = transformers.pipeline
    features = pipeline("feature-extraction", model=str(folders / "base"), **TRUST)
    classify = pipeline("text-classification", model=str(folders / "classifier"), **TRUST)
    tag = pipeline("token-classification", model=str(folders / "tagger"), trust_remote_code=True)
    entities = [tag(text, aggregation_strategy="simple", ignore_labels=[]) for text in SENTENCES]
    for text, found in zip(SENTENCES, entities):
        for entity in found:
            assert text[entity["start"]:entity["end"]] == entity["word"], (text, entity)
    return {
        "feature_extraction": [features(text) for text in SENTENCES],
        "text_classification": classify(SENTENCES),
        "text_pair_classification": classify({"text": PAIRS[0][0], "text_pair": PAIRS[1][0]}),
        "token_classification": entities,
    }


def _windows(tokenizer) -> dict:
    """transformers' SQuAD preprocessing: windows of the passages with their offsets and sequence ids."""
    windows = tokenizer(QUESTIONS, CONTEXTS, truncation="only_second", max_length=16, stride=2,
                        return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    rows = range(len(windows["input_ids"]))
    return {"overflow_to_sample_mapping": windows["overflow_to_sample_mapping"],
            "offset_mapping": windows["offset_mapping"], "sequence_ids": [windows.sequence_ids(i) for i in rows],
            "word_ids": [windows.word_ids(i) for i in rows]}


def _train_save_reload(transformers, tokenizer, folders: Path) -> dict:
    """Two Trainer steps of a new classification head on the base folder, then save and reload: the same logits."""
    import torch

    model = transformers.AutoModelForSequenceClassification.from_pretrained(folders / "base", num_labels=2, **TRUST)
    rows = [{**tokenizer(text), "label": i % 2} for i, text in enumerate(SENTENCES * 2)]
    with tempfile.TemporaryDirectory() as scratch:
        args = transformers.TrainingArguments(scratch, max_steps=2, per_device_train_batch_size=4, use_cpu=True,
                                              report_to="none", learning_rate=0.1, save_strategy="no")
        trainer = transformers.Trainer(model=model, args=args, train_dataset=rows,
                                       data_collator=transformers.DataCollatorWithPadding(tokenizer))
        loss = trainer.train().training_loss
        model.save_pretrained(Path(scratch) / "saved")
        tokenizer.save_pretrained(Path(scratch) / "saved")
        reloaded = transformers.AutoModelForSequenceClassification.from_pretrained(Path(scratch) / "saved",
                                                                                 **TRUST).eval()
        retokenized = transformers.AutoTokenizer.from_pretrained(Path(scratch) / "saved", **TRUST)
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
        with torch.no_grad():
            before, after = model.eval()(**batch).logits, reloaded(**retokenized(SENTENCES, padding=True,
                                                                                return_tensors="pt")).logits
    assert torch.isfinite(torch.tensor(loss)), loss
    assert torch.equal(before, after), (before, after)
    return {"training_loss": loss}


def _import_scan(folders: Path) -> int:
    """transformers' own scan of a remote file's imports (`check_imports`) over every code file that loading the
    folders by a Hub id reads: the modules their config.json and tokenizer_config.json name (`auto_map`, the
    pipelines' `impl`) and the files those import, with the project hidden. Loading by a Hub id runs it on each of
    them, and up to 4.50 with a text pattern that also matches a line of a docstring: a file that seems to import a
    package the user lacks (the project's own, `elmo_hf`) raises its ImportError here, as it would for that user.
    Returns the files scanned."""
    import json

    from transformers.dynamic_module_utils import check_imports, get_relative_import_files

    scanned, seen = set(), set()
    for folder in sorted(path for path in folders.iterdir() if (path / "config.json").is_file()):
        config, tokenizer = (json.loads((folder / name).read_text(encoding="utf-8"))
                             for name in ("config.json", "tokenizer_config.json"))
        references = [*config.get("auto_map", {}).values(),
                      *(entry["impl"] for entry in config.get("custom_pipelines", {}).values()),
                      *(name for names in tokenizer.get("auto_map", {}).values() for name in names if name)]
        for module in {reference.rsplit(".", 1)[0] for reference in references}:
            source = str(folder / f"{module}.py")
            for path in (source, *get_relative_import_files(source)):
                # the scan reads a file's text alone: the same text (a module each folder carries, or one that several
                # modules import) answers the same, and 4.x's pattern takes about 7 ms of CPU a file
                text = Path(path).read_bytes()
                if text not in seen:
                    seen.add(text)
                    check_imports(path)
                scanned.add(Path(path).name)
    return len(scanned)


HUB_ID = "elmo-user/tagger"  # the tagger folder as a shared model, in a Hub cache (`_hub_snapshot`)


def _hub_snapshot(folders: Path) -> Path:
    """A Hub cache holding the tagger folder as the snapshot of `HUB_ID` (what a download of it leaves: the files
    under snapshots/<commit>, refs/main naming the commit); returned for HF_HUB_CACHE. Loading by the id then reads
    every file as a user's offline load does, the remote code's imports fetched one by one and scanned."""
    import hashlib

    cache = Path(tempfile.mkdtemp(prefix="hub-cache-"))
    repo = cache / f"models--{HUB_ID.replace('/', '--')}"
    commit = hashlib.sha1(HUB_ID.encode()).hexdigest()
    shutil.copytree(folders / "tagger", repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return cache


def _by_hub_id(transformers, expected_logits) -> dict:
    """The tagger loaded by its Hub id from the cache, offline, without the project: AutoTokenizer (its fast class,
    as the example scripts ask), the Auto model class and the token-classification pipeline (transformers 4.46-4.50
    refused all three on a docstring line that looked like an import of the project). Its logits are the folder's."""
    import torch

    tokenizer = transformers.AutoTokenizer.from_pretrained(HUB_ID, trust_remote_code=True)
    # saved as the project's commands save a folder, with its fast twin: transformers' example scripts (run_ner.py,
    # run_qa.py) refuse a tokenizer that is not a PreTrainedTokenizerFast
    assert isinstance(tokenizer, transformers.PreTrainedTokenizerFast), type(tokenizer)
    model = transformers.AutoModelForTokenClassification.from_pretrained(HUB_ID, trust_remote_code=True).eval()
    with torch.no_grad():
        logits = model(**tokenizer(SENTENCES, padding=True, return_tensors="pt")).logits
    assert torch.equal(logits, expected_logits), "the tagger by its Hub id gives other logits than its folder"
    tag = transformers.pipeline("token-classification", model=HUB_ID, trust_remote_code=True)
    return {"hub_id_token_classification": [tag(text, ignore_labels=[]) for text in SENTENCES]}


def _checks(folders: Path) -> dict:
    import torch

    torch.manual_seed(0)
    transformers, tokenizer, models = _load(folders)
    modules = {type(model).__module__.split(".")[0] for model in models.values()}
    assert modules == {"transformers_modules" if TRUST else "elmo_hf"}, modules  # remote code, or installed
    results = {"transformers": transformers.__version__}
    results.update(_forward(tokenizer, models))
    results.update(_multiple_choice(transformers, tokenizer, folders))
    results.update(_pipelines(transformers, folders))
    results.update(_windows(tokenizer))
    results.update(_train_save_reload(transformers, tokenizer, folders))
    results.update(_by_hub_id(transformers, results["tagger_logits"]))  # a model shared on the Hub
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--repo", type=Path, help="the project's checkout: after the checks as remote code, the same "
                                                  "checks with the project imported from here (installed)")
    args = parser.parse_args()
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    # read when huggingface_hub is imported: the Hub cache with the tagger's snapshot (the older variables, which
    # transformers 4.x prefers, removed), and no network
    for older in ("TRANSFORMERS_CACHE", "PYTORCH_TRANSFORMERS_CACHE", "PYTORCH_PRETRAINED_BERT_CACHE"):
        os.environ.pop(older, None)
    cache = _hub_snapshot(args.folders)
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    os.environ.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    hidden = NoProject()  # first as a user without the project
    sys.meta_path.insert(0, hidden)
    path = list(sys.path)
    sys.path[:] = [p for p in path if p not in ("", ".") and Path(p).resolve() != Path(__file__).parents[2]]
    TRUST["trust_remote_code"] = True
    assert _import_scan(args.folders) > 10  # the heads', the tokenizer's and the pipelines' files, and theirs
    torch.save(_checks(args.folders), args.out / "remote.pt")
    if args.repo is not None:  # then as where it is installed
        sys.meta_path.remove(hidden)
        sys.path[:] = path
        import_project_from(args.repo)
        TRUST.clear()
        from elmo_hf import modeling_elmo  # noqa: F401  (registers the Elmo classes, as an installed project's user imports it)

        torch.save(_checks(args.folders), args.out / "installed.pt")


if __name__ == "__main__":
    main()
