"""Named entities through transformers' pipeline: a CRF tagger fine-tuned by the real `elmo-finetune-ner --crf` on a
generated templated task, then `pipeline("token-classification", model=folder, trust_remote_code=True)` in fresh
interpreters, with the project installed and where it cannot be imported: every aggregation strategy, entity offsets
into English, Chinese and emoji text, the pipeline's scores against the model's own softmax."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from conftest import REPO, clean_env, run_command, run_isolated
from test_finetune import COMMON, run_finetune

pytestmark = pytest.mark.slow

PEOPLE = ["John Smith", "Mary Jones", "Peter", "Anna Lee"]
ORGANISATIONS = ["Google", "Acme Corp", "IBM"]
PLACES = ["Paris", "New York", "Berlin"]
TEMPLATES = ["{PER} works for {ORG} in {LOC} .", "{PER} visited {LOC} .", "{ORG} hired {PER} .",
             "yesterday {PER} left {ORG} for {LOC} .", "😀 {PER} visited {LOC} 👍 .", "{ORG} 👍 hired {PER} 😀"]
# Chinese, cut one ideograph a token as the tokenizer's default split does: 张伟 is B-PER I-PER
PEOPLE_ZH, PLACES_ZH, ORGANISATIONS_ZH = ["张伟", "李娜"], ["北京", "上海"], ["华为"]
TEMPLATES_ZH = ["{PER}在{LOC}的{ORG}工作。", "{PER}去了{LOC}。"]
F1_FLOOR = 0.9  # the validation sentences are new combinations of the training words: a tagger learns them


def tagged(template: str, fill: dict[str, str], chinese: bool) -> dict:
    tokens, tags = [], []
    for piece in template.replace("{", " {").replace("}", "} ").split():
        if piece.startswith("{"):
            kind = piece[1:-1]
            words = list(fill[kind]) if chinese else fill[kind].split()
            tokens += words
            tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(words) - 1)
        else:
            words = list(piece) if chinese else [piece]
            tokens += words
            tags += ["O"] * len(words)
    return {"tokens": tokens, "tags": tags}


def write_templated_ner(path: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    lines = []
    for number in range(count):
        chinese = number % 4 == 3
        people, places, organisations = (PEOPLE_ZH, PLACES_ZH, ORGANISATIONS_ZH) if chinese else \
            (PEOPLE, PLACES, ORGANISATIONS)
        fill = {"PER": rng.choice(people), "LOC": rng.choice(places), "ORG": rng.choice(organisations)}
        lines.append(json.dumps(tagged(rng.choice(TEMPLATES_ZH if chinese else TEMPLATES), fill, chinese),
                                ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def crf_tagger(tmp_path_factory) -> Path:
    """A tiny CRF tagger fine-tuned by the console command elmo-finetune-ner on the templated task."""
    folder = tmp_path_factory.mktemp("pipeline-ner")
    write_templated_ner(folder / "train.jsonl", 160, seed=0)
    write_templated_ner(folder / "valid.jsonl", 40, seed=1)
    run_finetune(["elmo-finetune-ner", *COMMON, "--train_file", str(folder / "train.jsonl"), "--validation_file",
                  str(folder / "valid.jsonl"), "--output_dir", str(folder / "model"), "--num_train_epochs", "8",
                  "--token_classifier_encoder", "none", "--min_train_steps", "0", "--crf", "true"], cwd=folder)
    return folder / "model"


def test_the_crf_tagger_learns_the_templated_task(crf_tagger):
    config = json.loads((crf_tagger / "config.json").read_text())
    assert config["use_crf"] is True and config["custom_pipelines"]["token-classification"]["impl"].startswith(
        "pipeline_token_classification_elmo.")
    metrics = json.loads((crf_tagger / "eval_results.json").read_text())
    assert metrics["eval_f1"] >= F1_FLOOR, metrics


TEXTS = {
    "english": "John Smith works for Google in Paris .",
    "chinese": "张伟在北京的华为工作。",
    "emoji": "😀 Mary Jones visited New York 👍 .",
}
STRATEGIES = ["none", "simple", "first", "average", "max"]

# Runs in the subprocess: every strategy on every text, and the model's own softmax on the tokenizer's encoding.
PIPELINE_CODE = """
import json, sys
import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline
folder, texts, strategies = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tagger = pipeline("token-classification", model=folder, trust_remote_code=True)
model = AutoModelForTokenClassification.from_pretrained(folder, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
def plain(entities):
    return [{k: (float(v) if k == "score" else v) for k, v in e.items()} for e in entities]
out = {"class": type(tagger).__name__, "results": {}, "softmax": {}, "offsets": {}}
for name, text in texts.items():
    out["results"][name] = {s: plain(tagger(text, aggregation_strategy=s)) for s in strategies}
    out["results"][name]["none_all"] = plain(tagger(text, ignore_labels=[]))
    encoded = tokenizer(text, return_tensors="pt", return_offsets_mapping=True)
    with torch.no_grad():
        probs = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits.softmax(-1)[0]
    out["softmax"][name] = {"max": probs.max(-1).values.tolist(), "labels": [model.config.id2label[int(i)]
                                                                            for i in probs.argmax(-1)]}
    out["offsets"][name] = encoded["offset_mapping"][0].tolist()
out["split"] = plain(tagger(texts["english"].split(), is_split_into_words=True, aggregation_strategy="simple")[0])
out["batched"] = [plain(r) for r in tagger(list(texts.values()), batch_size=2, aggregation_strategy="simple")]
out["ner"] = plain(pipeline("ner", model=folder, trust_remote_code=True)(texts["english"],
                                                                         aggregation_strategy="simple"))
try:
    tagger(texts["english"], stride=4, aggregation_strategy="simple")
except ValueError as error:
    out["stride"] = str(error)
print("RESULT " + json.dumps(out, ensure_ascii=False))
"""


def pipeline_results(folder: Path, installed: bool, cwd: Path) -> dict:
    argv = [str(folder), json.dumps(TEXTS), json.dumps(STRATEGIES)]
    if installed:
        result = run_command([sys.executable, "-c", PIPELINE_CODE, *argv], cwd=cwd,
                             env={**clean_env(), "PYTHONPATH": str(REPO)}, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
    else:
        code = f"import sys\nsys.argv[1:] = {argv!r}\n" + PIPELINE_CODE
        result = run_isolated(code, cwd)
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


EXPECTED = {  # the entities of the templated task, as (type, text) in order
    "english": [("PER", "John Smith"), ("ORG", "Google"), ("LOC", "Paris")],
    "chinese": [("PER", "张伟"), ("LOC", "北京"), ("ORG", "华为")],
    "emoji": [("PER", "Mary Jones"), ("LOC", "New York")],
}


@pytest.fixture(scope="module")
def both_ways(crf_tagger, tmp_path_factory) -> tuple[dict, dict]:
    cwd = tmp_path_factory.mktemp("pipeline-run")
    return pipeline_results(crf_tagger, True, cwd), pipeline_results(crf_tagger, False, cwd)


def test_the_same_call_with_the_project_installed_or_not(both_ways):
    installed, isolated = both_ways
    assert installed["class"] == isolated["class"] == "ElmoTokenClassificationPipeline"
    assert installed["results"] == isolated["results"] and installed["split"] == isolated["split"]


@pytest.mark.parametrize("name", list(TEXTS))
def test_every_strategy_gives_the_entities_at_their_offsets_in_the_text(both_ways, name):
    text = TEXTS[name]
    for way in both_ways:
        results = way["results"][name]
        for strategy in STRATEGIES:
            for entity in results[strategy]:
                assert text[entity["start"]:entity["end"]] == entity["word"], (strategy, entity)
        # a whole word is never a subword: the word strategies group exactly as "simple" does
        for strategy in ("first", "average", "max"):
            assert results[strategy] == results["simple"], strategy
        grouped = [(e["entity_group"], e["word"]) for e in results["simple"]]
        assert grouped == EXPECTED[name], grouped
        # "none": one result per word, at the tokenizer's offsets; its words are the text's, in order
        offsets = way["offsets"][name]
        for entity in results["none_all"]:
            assert [entity["start"], entity["end"]] == offsets[entity["index"]]
        assert [e["index"] for e in results["none_all"]] == list(range(1, len(offsets) - 1))


@pytest.mark.parametrize("name", list(TEXTS))
def test_the_pipelines_scores_are_the_models_own_softmax(both_ways, name):
    from tolerances import STATISTIC, assert_close

    for way in both_ways:
        softmax = way["softmax"][name]
        for entity in way["results"][name]["none_all"]:
            assert entity["entity"] == softmax["labels"][entity["index"]]
            assert_close(entity["score"], softmax["max"][entity["index"]], STATISTIC, f"{name} {entity}")


def test_pre_split_words_batches_and_stride(both_ways):
    installed, _ = both_ways
    text = TEXTS["english"]
    joined = " ".join(text.split())  # the words joined by the delimiter: the text the offsets point into
    assert [(e["entity_group"], e["word"], joined[e["start"]:e["end"]]) for e in installed["split"]] == \
        [(kind, word, word) for kind, word in EXPECTED["english"]]
    assert installed["batched"] == [installed["results"][name]["simple"] for name in TEXTS]  # batch of 2 = alone
    assert installed["ner"] == installed["results"]["english"]["simple"]  # "ner", transformers' alias, too
    assert "reads a text of any length in one pass" in installed["stride"]


def test_predicting_with_the_crf_switched_off_is_refused_in_one_line(crf_tagger, tmp_path):
    from elmo_hf.tools.core.errors import InputError
    from elmo_hf.train.finetune_run import run_task

    (tmp_path / "new.txt").write_text("John Smith works for Google in Paris .\n")
    with pytest.raises(InputError, match=r"--use_crf False \(trained: True\): without --train_file") as caught:
        run_task("token-classification",
                 ["--model", str(crf_tagger), "--test_file", str(tmp_path / "new.txt"), "--crf", "false",
                           "--output_dir", str(tmp_path / "out")])
    assert "\n" not in str(caught.value) and not (tmp_path / "out").exists()
    run_task("token-classification", ["--model", str(crf_tagger), "--test_file", str(tmp_path / "new.txt"),
                       "--output_dir", str(tmp_path / "out")])
    assert (tmp_path / "out" / "predictions.txt").read_text().split()[1::2] == \
        ["B-PER", "I-PER", "O", "O", "B-ORG", "O", "B-LOC", "O"]  # the Viterbi tags (beside their words)


def test_training_a_saved_crf_head_further_checks_its_tags_without_the_flag(crf_tagger, tmp_path):
    """The saved head's CRF holds its tags to BIO whether or not --crf is given again: a sentence it forbids is
    refused in one line before anything is written (its loss would be in the thousands and never learned)."""
    from elmo_hf.tools.core.errors import InputError
    from elmo_hf.train.finetune_run import run_task

    (tmp_path / "more.txt").write_text("John B-PER\nSmith I-PER\n\nParis I-LOC\nis O\n")
    with pytest.raises(InputError, match=r"^the saved head's CRF: sentence 2 of --train_file \S+more.txt starts "
                                         r"with I-LOC, which BIO tags forbid") as caught:
        run_task("token-classification",
                 ["--model_name_or_path", str(crf_tagger), "--train_file", str(tmp_path / "more.txt"),
                           "--output_dir", str(tmp_path / "out"), "--max_steps", "1", "--use_cpu", "--report_to",
                           "none"])
    assert "\n" not in str(caught.value) and not (tmp_path / "out").exists()
