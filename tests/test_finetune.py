"""Fine-tuning: file readers, entity-level scoring, collators, and the commands end to end (also with 2 processes)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest
import torch
from conftest import REPO, clean_env, run_cli, run_command, shared_file
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

# registers the Elmo classes with the Auto classes: the tests load without remote code
from elmo_hf import modeling_elmo  # noqa: F401
from elmo_hf.tools.core.errors import InputError
from elmo_hf.train.finetune_arguments import ModelArguments
from elmo_hf.train.finetune_run import load_model, run_task
from elmo_hf.train.tasks import sequence_classification
from elmo_hf.train.tasks.common_collators import (
    ElmoDataCollatorForSequenceClassification,
    ElmoDataCollatorForTokenClassification,
)
from elmo_hf.train.tasks.common_data import (
    entity_scores,
    get_entities,
    label_list,
    read_classification_file,
    read_tagging_file,
    tag_list,
)

# --------------------------------------------------------------------------------------------------
# Entity-level scoring (conlleval / seqeval rules)
# --------------------------------------------------------------------------------------------------


def test_entities_of_iob2_iob1_and_iobes():
    assert get_entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    # IOB1: I- opens a chunk; B- only splits two adjacent chunks of the same type
    assert get_entities(["I-PER", "I-PER", "B-PER", "I-LOC", "O", "I-ORG"]) == [
        ("PER", 0, 1), ("PER", 2, 2), ("LOC", 3, 3), ("ORG", 5, 5)
    ]
    assert get_entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 2)]
    assert get_entities(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 2)]  # type change
    assert get_entities(["S-PER", "B-LOC", "E-LOC", "O", "E-ORG"]) == [("PER", 0, 0), ("LOC", 1, 2), ("ORG", 4, 4)]
    assert get_entities(["O", "O"]) == [] and get_entities([]) == []


def test_strict_iob2_drops_chunks_without_b():
    tags = ["O", "I-PER", "I-PER", "B-LOC", "I-LOC", "I-PER", "B-ORG"]
    assert get_entities(tags) == [("PER", 1, 2), ("LOC", 3, 4), ("PER", 5, 5), ("ORG", 6, 6)]
    assert get_entities(tags, strict=True) == [("LOC", 3, 4), ("ORG", 6, 6)]


def test_entity_scores_match_seqeval():
    # seqeval's README example: precision = recall = f1 = 0.5
    references = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    predictions = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    scores = entity_scores(references, predictions)
    assert scores["precision"] == scores["recall"] == scores["f1"] == 0.5
    assert scores["PER_f1"] == 1.0 and scores["MISC_f1"] == 0.0
    assert scores["accuracy"] == pytest.approx(8 / 10)  # two tokens differ
    # 3 true entities, 2 predicted, 1 right: p = 1/2, r = 1/3, f1 = 0.4
    scores = entity_scores([["B-PER", "O", "B-LOC", "I-LOC", "B-ORG"]], [["B-PER", "O", "B-LOC", "O", "O"]])
    assert (scores["precision"], scores["recall"]) == (0.5, pytest.approx(1 / 3))
    assert scores["f1"] == pytest.approx(0.4)
    assert entity_scores([["O"]], [["O"]])["f1"] == 0.0  # nothing to find, nothing found
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([["O", "O"]], [["O"]])


# --------------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------------


def test_reads_sst2_tsv_with_crlf_and_header(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b'label\tsentence\r\n0\thide new secretions\r\n1\tit \'s a "charming" film\r\n')
    assert read_classification_file(path) == [
        {"text": "hide new secretions", "label": "0"},
        {"text": 'it \'s a "charming" film', "label": "1"},
    ]
    dev = tmp_path / "dev.tsv"
    dev.write_text("label\tcontent\n1\tgood .\n")
    assert read_classification_file(dev) == [{"text": "good .", "label": "1"}]


def test_reads_csv_and_json_lines(tmp_path):
    (tmp_path / "a.csv").write_text('text,label\n"good, really",pos\nbad,neg\n')
    assert read_classification_file(tmp_path / "a.csv")[0] == {"text": "good, really", "label": "pos"}
    (tmp_path / "a.jsonl").write_text('{"text": "fine", "label": 2}\n\n{"text": "meh", "label": 0}\n')
    assert [e["label"] for e in read_classification_file(tmp_path / "a.jsonl")] == ["2", "0"]
    (tmp_path / "b.jsonl").write_text('{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}\n')
    assert read_tagging_file(tmp_path / "b.jsonl") == [{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}]
    (tmp_path / "bad.jsonl").write_text('{"tokens": ["EU"], "tags": []}\n')
    with pytest.raises(ValueError, match="1 tokens but 0 tags"):
        read_tagging_file(tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match="label column 'y'"):
        read_classification_file(tmp_path / "a.csv", label_column="y")


def test_reads_conll_columns_and_skips_docstart(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"
        "Blackburn NNP I-NP I-PER\n\n\n-DOCSTART- -X- -X- O\n\nLONDON NNP B-NP B-LOC\n"
    )
    assert read_tagging_file(path) == [
        {"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]},
        {"tokens": ["Peter", "Blackburn"], "tags": ["B-PER", "I-PER"]},
        {"tokens": ["LONDON"], "tags": ["B-LOC"]},
    ]
    assert tag_list(["I-PER", "O", "B-PER", "B-LOC"]) == ["O", "B-LOC", "B-PER", "I-PER"]
    assert label_list(["10", "2", "1"]) == ["1", "2", "10"] and label_list(["pos", "neg"]) == ["neg", "pos"]


def test_a_tsv_of_sentences_is_not_read_as_conll_columns(tmp_path):
    """`1<TAB>good movie .` has as many whitespace-separated fields on every line, but a field with spaces."""
    path = tmp_path / "sents.tsv"
    path.write_text("1\tgood movie .\n0\tbad film .\n")
    with pytest.raises(ValueError, match=r"sents.tsv:1: the field 'good movie .' has spaces: not CoNLL columns"):
        read_tagging_file(path)
    path.write_text("EU\tNNP\tB-ORG\nrejects\tVBZ\tO\n\nPeter\tNNP\tB-PER \n")  # tab-separated columns
    assert read_tagging_file(path) == [{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]},
                                       {"tokens": ["Peter"], "tags": ["B-PER"]}]


@pytest.mark.parametrize("name, text",
                         [("empty.txt", ""), ("blank.txt", "\n  \n\n"), ("docstart.conll", "-DOCSTART- O\n\n"),
                                        ("empty.tsv", "label\ttext\n1\t\n"), ("empty.jsonl", '{"tokens": []}\n')])
def test_a_test_file_without_sentences_is_refused(tmp_path, name, text):
    from elmo_hf.train.tasks.common_data import read_texts_file, read_words_file

    path = tmp_path / name
    path.write_text(text)
    readers = [read_words_file] if name.endswith(("conll", "jsonl")) else [read_texts_file, read_words_file]
    for reader in readers[:1] if name.endswith("tsv") else readers:
        with pytest.raises(ValueError, match=f"{name}: no sentences"):
            reader(path)


def test_reads_the_shared_sst2_and_conll_files():
    sst2 = read_classification_file(shared_file("sst2/train.tsv"))
    assert len(sst2) == 67349 and {e["label"] for e in sst2} == {"0", "1"}
    assert sst2[0] == {"text": "hide new secretions from the parental units", "label": "0"}
    assert len(read_classification_file(shared_file("sst2/dev.tsv"))) == 872
    conll = read_tagging_file(shared_file("conll2003/train.txt"))
    assert len(conll) == 14041 and conll[0]["tokens"][:2] == ["EU", "rejects"]
    assert len(read_tagging_file(shared_file("conll2003/valid.txt"))) == 3250


# --------------------------------------------------------------------------------------------------
# Collators and model loading
# --------------------------------------------------------------------------------------------------


def test_collators_pad_characters_tokens_and_labels():
    row = [259, 98, 260] + [261] * 47
    features = [
        {"input_ids": [row, row, row], "attention_mask": [1, 1, 1], "labels": [-100, 3, -100]},
        {"input_ids": [row, row], "attention_mask": [1, 1], "labels": [-100, -100]},
    ]
    batch = ElmoDataCollatorForTokenClassification()(features)
    assert batch["input_ids"].shape == (2, 3, 50) and batch["input_ids"].dtype == torch.long
    assert batch["input_ids"][1, 2].eq(0).all() and batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[-100, 3, -100], [-100, -100, -100]]
    padded = ElmoDataCollatorForTokenClassification(pad_to_multiple_of=4)(features)
    assert padded["input_ids"].shape == (2, 4, 50) and padded["labels"].shape == (2, 4)

    sentences = [{"input_ids": torch.tensor([row]), "label": 1}, {"input_ids": [row, row], "label": 0}]
    batch = ElmoDataCollatorForSequenceClassification()(sentences)
    assert batch["labels"].tolist() == [1, 0] and batch["labels"].dtype == torch.long
    assert batch["attention_mask"].tolist() == [[1, 0], [1, 1]]
    regression = ElmoDataCollatorForSequenceClassification()([{"input_ids": [row], "labels": 0.5}])
    assert regression["labels"].dtype == torch.float32
    with pytest.raises(ValueError, match="example 1"):
        ElmoDataCollatorForTokenClassification()([{"input_ids": [row], "labels": [0]}, {"input_ids": [row[:10]]}])
    with pytest.raises(ValueError, match="example 0: 1 tokens but labels"):
        ElmoDataCollatorForTokenClassification()([{"input_ids": [row], "labels": [0, 1]}])


def test_load_model_applies_and_validates_overrides(tmp_path):
    head, _ = load_model(ModelArguments(model_name_or_path="tiny", scalar_mix="top", freeze_bilm=False),
                         "sequence-classification", {"id2label": {0: "a", 1: "b"}, "label2id": {"a": 0, "b": 1}})
    assert head.config.scalar_mix == "top" and head.num_labels == 2 and not head.config.freeze_bilm
    head.save_pretrained(tmp_path)
    reloaded, _ = load_model(ModelArguments(model_name_or_path=str(tmp_path), scalar_mix="learned",
                                            ignore_mismatched_sizes=True),  # 2 labels saved, 3 wanted
                             "token-classification", {"id2label": {0: "O", 1: "B-X", 2: "I-X"}})
    assert reloaded.config.scalar_mix == "learned" and reloaded.num_labels == 3
    assert reloaded.config.freeze_bilm is False  # kept from the saved config
    with pytest.raises(ValueError, match="scalar_mix_parameters"):
        load_model(ModelArguments(model_name_or_path=str(tmp_path), scalar_mix="fixed"),
                   "sequence-classification", {})


# --------------------------------------------------------------------------------------------------
# The commands, end to end
# --------------------------------------------------------------------------------------------------

FILLER = "the a of movie film story plot actor scene time really quite some very just it was".split()
ENTITIES = {"PER": ["John", "Mary Smith", "Peter"], "LOC": ["Paris", "New York"], "ORG": ["Acme Corp", "IBM"]}


def write_sst2_files(folder, train=240, dev=80):
    """SST-2 layout: header line, label TAB sentence; CRLF line ends in train, LF in dev (header "content")."""
    rng = random.Random(0)

    def line(label):
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 6))]
        words.insert(rng.randrange(len(words) + 1), "great" if label else "awful")
        return f"{label}\t{' '.join(words)}"

    rows = [line(rng.randint(0, 1)) for _ in range(train + dev)]
    (folder / "train.tsv").write_bytes(("\r\n".join(["label\tsentence", *rows[:train]]) + "\r\n").encode())
    (folder / "dev.tsv").write_text("\n".join(["label\tcontent", *rows[train:]]) + "\n")


def write_conll_files(folder, train=200, valid=60):
    """CoNLL-2003 layout: -DOCSTART-, `word POS chunk NER`, blank line between sentences, IOB2 tags."""
    rng = random.Random(1)

    def sentence():
        lines = []
        for _ in range(rng.randint(2, 6)):
            if rng.random() < 0.35:
                kind = rng.choice(sorted(ENTITIES))
                for k, word in enumerate(rng.choice(ENTITIES[kind]).split()):
                    lines.append(f"{word} NNP I-NP {'B' if k == 0 else 'I'}-{kind}")
            else:
                lines.append(f"{rng.choice(FILLER)} NN B-NP O")
        return "\n".join(lines)

    for name, count in (("train.txt", train), ("valid.txt", valid)):
        text = "-DOCSTART- -X- -X- O\n\n" + "\n\n".join(sentence() for _ in range(count)) + "\n"
        (folder / name).write_text(text)


COMMON = ["--model_name_or_path", "tiny", "--use_cpu", "--report_to", "none", "--save_strategy", "no",
          "--disable_tqdm", "true", "--per_device_train_batch_size", "16", "--learning_rate", "2e-2",
          "--word_embedding_dim", "16", "--word_embedding_buckets", "512", "--representation_dropout", "0.1"]


def classify(argv: list[str]) -> dict:
    """`elmo-finetune-classification ARGV`'s run in this process, without the frame: bad input raises `InputError`."""
    return run_task("sequence-classification", argv)


def run_finetune(args: list[str], cwd) -> subprocess.CompletedProcess:
    """A fine-tuning command (`args[0]`) through its frame in this process; several processes (`torchrun ...`) in
    their own."""
    if args[0].startswith("elmo-"):
        result = run_cli(args[0], args[1:], cwd=cwd)
    else:
        env = {**clean_env(), "OMP_NUM_THREADS": "1"}  # offline; tiny models gain nothing from more threads
        result = run_command(args, cwd=cwd, env=env, timeout=300)
    if result.returncode != 0:
        raise AssertionError(f"{args} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    return result


@pytest.mark.slow
def test_finetune_classification_command_end_to_end(tmp_path, tiny_model_dir):
    write_sst2_files(tmp_path)
    out = tmp_path / "out"
    common = [str(tiny_model_dir) if a == "tiny" else a for a in COMMON]
    result = run_finetune(
        ["elmo-finetune-classification", *common, "--train_file", str(tmp_path / "train.tsv"),
         "--validation_file", str(tmp_path / "dev.tsv"), "--output_dir", str(out), "--num_train_epochs", "6",
         "--classifier_pooling", "max", "--word_split", "whitespace", "--max_eval_samples", "60"],
        cwd=REPO,
    )
    assert f"to {out}" in result.stderr  # says where it wrote
    # quiet: a line for the new head instead of transformers' table; nothing a user cannot act on
    assert "initialised the sequence-classification head" in result.stderr
    for noise in ("WARNING", "LOAD REPORT", "PAD/BOS/EOS", "pin_memory", "rank 0", "Traceback"):
        assert noise not in result.stderr, (noise, result.stderr[-3000:])
    metrics = json.loads((out / "eval_results.json").read_text())
    assert metrics["eval_samples"] == 60 and metrics["eval_accuracy"] >= 0.7, metrics
    assert json.loads((out / "train_results.json").read_text())["world_size"] == 1
    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.id2label == {0: "0", 1: "1"} and model.config.classifier_pooling == "max"
    enc = tokenizer(["a great film", "an awful film"], padding=True, return_tensors="pt")
    assert model(**enc).logits.shape == (2, 2)


@pytest.mark.slow
def test_finetune_ner_command_end_to_end(tmp_path):
    write_conll_files(tmp_path)
    out = tmp_path / "out"
    run_finetune(
        ["elmo-finetune-ner", *COMMON, "--train_file", str(tmp_path / "train.txt"),
         "--validation_file", str(tmp_path / "valid.txt"), "--output_dir", str(out), "--num_train_epochs", "6",
         "--token_classifier_encoder", "none", "--min_train_steps", "0"],  # the 6 epochs alone: 78 steps
        cwd=REPO,
    )
    metrics = json.loads((out / "eval_results.json").read_text())
    assert {"eval_precision", "eval_recall", "eval_f1", "eval_PER_f1"} <= set(metrics)
    assert metrics["eval_f1"] >= 0.7, metrics
    model = AutoModelForTokenClassification.from_pretrained(out).eval()
    assert model.config.id2label[0] == "O" and "B-PER" in model.config.label2id
    tokenizer = AutoTokenizer.from_pretrained(out)
    enc = tokenizer([["John", "went", "to", "Paris"]], is_split_into_words=True, return_tensors="pt")
    assert model(**enc).logits.shape == (1, 6, len(model.config.id2label))


@pytest.mark.slow
def test_finetune_classification_with_two_processes(tmp_path):
    write_sst2_files(tmp_path, train=256, dev=32)
    out = tmp_path / "out"
    result = run_finetune(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "elmo_hf.cli", "finetune-classification", *COMMON, "--train_file", str(tmp_path / "train.tsv"),
         "--validation_file", str(tmp_path / "dev.tsv"), "--output_dir", str(out), "--num_train_epochs", "1"],
        cwd=REPO,
    )
    logs = result.stdout + result.stderr
    assert "Process rank 0 of world size 2" in logs and "Process rank 1 of world size 2" in logs
    assert json.loads((out / "train_results.json").read_text())["world_size"] == 2
    # 256 examples, 16 per process and step, 2 processes: 8 steps (one process alone would take 16)
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 8
    assert "eval_accuracy" in json.loads((out / "eval_results.json").read_text())


# --------------------------------------------------------------------------------------------------
# Bad input: one line naming the file or value, exit status 2, nothing written
# --------------------------------------------------------------------------------------------------


BAD_INPUTS = [
    ("elmo-finetune-classification", "missing_model", "--model_name_or_path"),
    ("elmo-finetune-classification", "missing_file", "no such file"),
    ("elmo-finetune-classification", "empty_file", "no examples"),
    ("elmo-finetune-classification", "binary_file", "a binary file, not text"),
    ("elmo-finetune-classification", "malformed_file", "looks like data, not a header"),
    ("elmo-finetune-ner", "sentences_not_conll", "not CoNLL columns"),
    ("elmo-finetune-ner", "malformed_json", "not a JSON object"),
]


def bad_input_arguments(tmp_path, problem: str) -> tuple[list[str], str]:
    """The command line of a run with `problem`, and the value its error line must name."""
    write_sst2_files(tmp_path, train=20, dev=4)
    train_file = tmp_path / "train.tsv"
    model = "tiny"
    if problem == "missing_model":
        model = str(tmp_path / "no-such-model")
    elif problem == "missing_file":
        train_file = tmp_path / "absent.tsv"
    elif problem == "empty_file":
        train_file.write_text("")
    elif problem == "binary_file":
        train_file.write_bytes(bytes(range(256)) * 8)
    elif problem == "malformed_file":
        train_file.write_text("just some text without columns\nand another line\n")
    elif problem == "malformed_json":
        train_file = tmp_path / "train.jsonl"
        train_file.write_text('{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": [\n')
    # else: sentences_not_conll, the SST-2 style TSV given to the tagger
    args = [a if a != "tiny" else model for a in COMMON]
    named = model if problem == "missing_model" else str(train_file)
    return [*args, "--train_file", str(train_file), "--output_dir", str(tmp_path / "out")], named


@pytest.mark.parametrize("command, problem, message", BAD_INPUTS)
def test_finetuning_commands_refuse_bad_input_in_one_line(tmp_path, command, problem, message):
    """Status 2, one ERROR line naming the file or value, nothing written (the scripts' own processes:
    tests/test_commands.py)."""
    argv, named = bad_input_arguments(tmp_path, problem)
    result = run_cli(command, argv)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and message in errors[0] and named in errors[0], errors
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_fine_tuned_model_loads_without_warnings(tmp_path):
    """Where the tokenizer's <S>/</S>/padding ids (character ids) are copied into the config, as `Trainer` does when
    it is given the tokenizer, loading the saved model in a fresh interpreter says nothing about them."""
    from transformers.trainer_utils import align_special_tokens

    from elmo_hf.tokenization import ElmoTokenizer

    model, _ = load_model(ModelArguments(model_name_or_path="tiny"), "sequence-classification",
                          {"id2label": {0: "a", 1: "b"}, "label2id": {"a": 0, "b": 1}})
    tokenizer = ElmoTokenizer()
    align_special_tokens(model, tokenizer)  # what Trainer does before training
    assert model.config.bos_token_id == tokenizer.bos_token_id
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    code = (
        "from elmo_hf import modeling_elmo, tokenization\n"
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
        f"model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path / 'model')!r})\n"
        f"AutoTokenizer.from_pretrained({str(tmp_path / 'model')!r})\n"
        "print(model.config.bos_token_id, model.config.eos_token_id)\n"
    )
    env = {**clean_env(), "PYTHONPATH": str(REPO), "TRANSFORMERS_VERBOSITY": "warning"}
    result = run_command([sys.executable, "-c", code], cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [str(tokenizer.bos_token_id), str(tokenizer.eos_token_id)]
    assert "token_id" not in result.stderr and "vocabulary" not in result.stderr, result.stderr


# --------------------------------------------------------------------------------------------------
# Every kind of model fine-tunes: ELMoForManyLangs folders (characters and words, characters only, words only)
# --------------------------------------------------------------------------------------------------

MANYLANGS_VARIANTS = {"char+word": {}, "char only": {"word_dim": 0}, "word only": {"char_dim": 0}}


@pytest.fixture(scope="module")
def manylangs_models(tmp_path_factory):
    """{variant: converted folder} of tiny ELMoForManyLangs models written by the package itself."""
    pytest.importorskip("elmoformanylangs", reason='the ManyLangs fixture needs pip install "elmo-hf[manylangs-test]"')
    import manylangs_fixture

    from elmo_hf.tools.conversion.convert_elmoformanylangs import convert

    root = tmp_path_factory.mktemp("manylangs-finetune")
    return {name: convert(manylangs_fixture.write_model(root / f"theirs-{seed}", seed=seed, **dims),
                          root / f"ours-{seed}")
            for seed, (name, dims) in enumerate(MANYLANGS_VARIANTS.items())}


def write_manylangs_task_files(folder) -> None:
    """Words of the fixture's dictionaries: label 1 when 太阳 is in the sentence, 0 with 银行; 北京 and 天安门 are
    locations."""
    rng = random.Random(2)
    filler = ["我", "爱", "上", "升", "花", "the", "cat", "on", "mat"]
    lines, conll = ["label\ttext"], []
    for number in range(48):
        words = [rng.choice(filler) for _ in range(rng.randint(2, 5))]
        label = number % 2
        words.insert(rng.randrange(len(words) + 1), "太阳" if label else "银行")
        lines.append(f"{label}\t{' '.join(words)}")
        place = rng.choice(["北京", "天安门"])
        tagged = [(w, "O") for w in words] + [(place, "B-LOC")]
        conll.append("\n".join(f"{w} {t}" for w, t in tagged))
    (folder / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "test.txt").write_text("我 爱 太阳\n\n银行 上 花\n", encoding="utf-8")
    (folder / "train.conll").write_text("\n\n".join(conll) + "\n", encoding="utf-8")
    (folder / "test.conll").write_text("我 O\n爱 O\n北京 B-LOC\n\n银行 O\n天安门 B-LOC\n", encoding="utf-8")


def logged_losses(folder) -> list[float]:
    state = json.loads((folder / "trainer_state.json").read_text())
    return [entry["loss"] for entry in state["log_history"] if "loss" in entry]


FAST = ["--use_cpu", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--logging_steps", "4",
        "--max_steps", "24", "--learning_rate", "5e-2", "--per_device_train_batch_size", "8",
        "--representation_dropout", "0"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(MANYLANGS_VARIANTS))
def test_manylangs_models_fine_tune_and_predict(manylangs_models, variant, tmp_path):
    """Both commands on a converted ELMoForManyLangs folder (rows of characters and a word id): the loss goes down,
    the labels are the files' own, and the predictions of --test_file are the argmax of the model's own forward."""
    from elmo_hf.tools.loading import load_elmo

    write_manylangs_task_files(tmp_path)
    model_dir = str(manylangs_models[variant])
    out = tmp_path / "classifier"
    run_task("sequence-classification", ["--model_name_or_path", model_dir, "--train_file", str(tmp_path / "train.tsv"),
                                  "--test_file", str(tmp_path / "test.txt"), "--output_dir", str(out), *FAST])
    losses = logged_losses(out)
    assert losses[-1] < losses[0], losses
    model, tokenizer = load_elmo(out, "sequence-classification")
    assert model.config.id2label == {0: "0", 1: "1"} and model.config.classifier_pooling == "lstm"
    sentences = [["我", "爱", "太阳"], ["银行", "上", "花"]]
    with torch.no_grad():
        expected = [model.config.id2label[int(model(**tokenizer([s], is_split_into_words=True,
                                                                 return_tensors="pt")).logits.argmax())]
                    for s in sentences]
    assert (out / "predictions.txt").read_text().split("\n") == [expected[0], "", expected[1], ""]

    out = tmp_path / "tagger"
    run_task("token-classification", ["--model_name_or_path", model_dir, "--train_file", str(tmp_path / "train.conll"),
                       "--test_file", str(tmp_path / "test.conll"), "--output_dir", str(out), *FAST])
    losses = logged_losses(out)
    assert losses[-1] < losses[0], losses
    tagger, tokenizer = load_elmo(out, "token-classification")
    assert set(tagger.config.label2id) == {"O", "B-LOC"}
    expected = []
    for words in (["我", "爱", "北京"], ["银行", "天安门"]):
        with torch.no_grad():
            logits = tagger(**tokenizer([words], is_split_into_words=True, return_tensors="pt")).logits[0, 1:-1]
        expected.append([tagger.config.id2label[int(i)] for i in logits.argmax(-1)])
    lines = (out / "predictions.txt").read_text().splitlines()
    assert lines == [f"{w} {g} {p}" for w, g, p in zip(["我", "爱", "北京"], ["O", "O", "B-LOC"], expected[0])] + [""] \
        + [f"{w} {g} {p}" for w, g, p in zip(["银行", "天安门"], ["O", "B-LOC"], expected[1])]


# --------------------------------------------------------------------------------------------------
# Prediction from an already fine-tuned folder, --encoding, the default word split, interrupts, --help
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fine_tuned_classifier(tmp_path_factory):
    """A classifier fine-tuned in-process for a few steps on the SST-2 style files (whitespace split)."""

    folder = tmp_path_factory.mktemp("fine-tuned")
    write_sst2_files(folder, train=64, dev=16)
    run_task("sequence-classification", [*COMMON, "--train_file", str(folder / "train.tsv"), "--output_dir",
                                  str(folder / "model"), "--max_steps", "8", "--word_split", "whitespace"])
    return folder / "model"


@pytest.mark.slow
def test_a_default_run_shows_transformers_bar_and_a_loss_line(tmp_path):
    """Fine-tuning was silent for minutes: the commands set transformers' logging to errors, which also hid Trainer's
    bar, and its loss line came every 500 steps (issue 68, case 9)."""
    write_sst2_files(tmp_path, train=24, dev=8)
    said = run_cli("elmo-finetune-classification", [
        "--model_name_or_path", "tiny", "--use_cpu", "--report_to", "none", "--save_strategy", "no",
        "--per_device_train_batch_size", "2", "--max_steps", "12", "--train_file", tmp_path / "train.tsv",
        "--output_dir", tmp_path / "out"])
    assert said.returncode == 0, said.stderr[-3000:]
    assert re.search(r"12/12 \[", said.stderr), said.stderr[-3000:]  # tqdm's bar, at its end
    assert re.search(r"\{'loss': '?\d", said.stdout), said.stdout[-3000:]  # the loss at step 10


def test_the_loss_line_comes_at_least_every_thirty_seconds_whatever_logging_steps():
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from elmo_hf.train.loss_lines_callback import LOSS_LINE_SECONDS, LossLinesCallback

    args = TrainingArguments(output_dir="unused", logging_steps=500, use_cpu=True, report_to="none")
    callback, state, control = LossLinesCallback(), TrainerState(), TrainerControl()
    callback.on_train_begin(args, state, control)
    callback.on_step_end(args, state, control)
    assert not control.should_log
    callback._last -= LOSS_LINE_SECONDS
    callback.on_step_end(args, state, control)
    assert control.should_log
    control.should_log = False
    callback.on_log(args, state, control, logs={"loss": 1.0})
    callback.on_step_end(args, state, control)
    assert not control.should_log
    quiet = TrainingArguments(output_dir="unused", logging_strategy="no", use_cpu=True, report_to="none")
    callback._last -= LOSS_LINE_SECONDS
    callback.on_step_end(quiet, state, control)
    assert not control.should_log  # --logging_strategy no: no line


def test_predict_only_from_a_fine_tuned_folder_equals_the_models_argmax(fine_tuned_classifier, tmp_path):
    from elmo_hf.tools.loading import load_elmo

    sentences = ["a great film", "", "an awful movie , really", "the plot was great"]
    (tmp_path / "new.txt").write_text("\n".join(sentences) + "\n")
    (tmp_path / "new.jsonl").write_text("".join(json.dumps({"text": s}) + "\n" for s in sentences if s))
    run_task("sequence-classification", ["--model", str(fine_tuned_classifier), "--do_predict", "--test_file",
                                  str(tmp_path / "new.txt"), "--output_dir", str(tmp_path / "out")])
    run_task("sequence-classification", ["--model", str(fine_tuned_classifier), "--do_predict", "--test_file",
                                  str(tmp_path / "new.jsonl"), "--predictions_file", str(tmp_path / "json.txt")])
    model, tokenizer = load_elmo(fine_tuned_classifier, "sequence-classification")
    expected = []
    for sentence in sentences:
        if sentence:  # the tokenizer's saved split: the whitespace it was fine-tuned with
            with torch.no_grad():
                logits = model(**tokenizer([sentence], padding=True, return_tensors="pt")).logits
            expected.append(model.config.id2label[int(logits.argmax())])
    written = (tmp_path / "out" / "predictions.txt").read_text().split("\n")
    assert written == [expected[0], "", expected[1], expected[2], ""]
    assert (tmp_path / "json.txt").read_text().split() == expected
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["predictions.txt"]  # nothing else written


def test_predict_only_refuses_a_folder_without_a_head(tiny_model_dir, tmp_path):

    (tmp_path / "new.txt").write_text("a sentence\n")
    with pytest.raises(InputError, match="holds no fine-tuned ElmoForSequenceClassification"):
        run_task("sequence-classification", ["--model_name_or_path", str(tiny_model_dir), "--do_predict", "--test_file",
                                      str(tmp_path / "new.txt"), "--output_dir", str(tmp_path / "out")])
    with pytest.raises(InputError, match="--do_predict needs --test_file"):
        run_task("sequence-classification", ["--model_name_or_path", str(tiny_model_dir), "--do_predict",
                                      "--output_dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_encoding_option_reads_gbk_and_refuses_undecodable_bytes(fine_tuned_classifier, tmp_path):

    (tmp_path / "gbk.txt").write_bytes("银行 great\n太阳 awful\n".encode("gbk"))
    with pytest.raises(InputError, match=r"gbk.txt: line 1, byte 1 of the line \(0xd2\) is not valid utf-8"):
        run_task("sequence-classification",
                 ["--model", str(fine_tuned_classifier), "--test_file", str(tmp_path / "gbk.txt"),
                                      "--output_dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    run_task("sequence-classification",
             ["--model", str(fine_tuned_classifier), "--test_file", str(tmp_path / "gbk.txt"),
                                  "--output_dir", str(tmp_path / "out"), "--encoding", "gbk"])
    assert len((tmp_path / "out" / "predictions.txt").read_text().split()) == 2
    with pytest.raises(InputError, match="--encoding: unknown encoding 'no-such'"):
        run_task("token-classification",
                 ["--model", str(fine_tuned_classifier), "--train_file", str(tmp_path / "gbk.txt"),
                           "--output_dir", str(tmp_path / "out2"), "--encoding", "no-such"])


def test_default_word_split_is_the_tokenizers_and_every_registered_split_is_accepted(tmp_path, monkeypatch):
    from elmo_hf.tokenization import WORD_SPLITTERS, ElmoTokenizer

    for registry in ("_functions", "_requirements"):  # the split registered below is the test's own
        monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
    from elmo_hf.train.tasks.common_data import split_text

    assert split_text("rates, too", ElmoTokenizer(word_split="whitespace"), None) == ["rates,", "too"]
    assert split_text("rates, too", ElmoTokenizer(word_split="punctuation"), None) == ["rates", ",", "too"]
    assert split_text("rates, too", ElmoTokenizer(word_split="punctuation"), "whitespace") == ["rates,", "too"]
    assert {"whitespace", "punctuation"} <= set(WORD_SPLITTERS)
    write_sst2_files(tmp_path, train=8, dev=2)
    with pytest.raises(InputError, match="--word_split"):
        classify([*COMMON, "--train_file", str(tmp_path / "train.tsv"), "--output_dir", str(tmp_path / "out"),
              "--word_split", "no-such-split"])
    assert not (tmp_path / "out").exists()
    # a function of the user's, named module:function, is imported and registered as the other commands do
    from elmo_hf.train.finetune_run import check_split_option

    assert "shlex:split" not in WORD_SPLITTERS
    check_split_option("shlex:split")
    assert "shlex:split" in WORD_SPLITTERS
    with pytest.raises(InputError, match="no_such_module"):
        check_split_option("no_such_module:split")


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", [True, False])
def test_an_interrupt_ends_in_one_line_and_keeps_only_whole_checkpoints(tmp_path, monkeypatch, capsys, checkpoint):
    """SIGINT at step 5: with checkpoints every 2 steps, 130 and the line naming the last one to resume from (quoted
    for a shell); without, 130 and no output folder at all."""
    import os
    import shlex
    import signal

    from elmo_hf.train.finetune_run import GuardedTrainer

    step = {"count": 0}
    original = GuardedTrainer.training_step

    def training_step(self, *args, **kwargs):
        step["count"] += 1
        if step["count"] == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GuardedTrainer, "training_step", training_step)
    write_sst2_files(tmp_path, train=64, dev=4)
    out = tmp_path / "fine tuned"  # a space in its name: the line's option pastes into a shell as it is
    saving = ["--save_strategy", "steps", "--save_steps", "2"] if checkpoint else []
    argv = [*COMMON, "--train_file", str(tmp_path / "train.tsv"), "--output_dir", str(out), "--max_steps", "50",
            *saving]
    result = run_cli("elmo-finetune-classification", argv)
    assert result.returncode == 130
    errors = [line.split(": ", 1)[1] for line in result.stderr.splitlines() if "interrupted" in line]
    assert "interrupted" in result.stderr.strip().splitlines()[-1]  # the command's last line
    assert len(errors) == 1 and errors[0].startswith("interrupted by SIGINT at step"), errors
    if checkpoint:
        kept = sorted(p.name for p in out.iterdir())
        assert kept == ["checkpoint-2", "checkpoint-4"], kept
        assert shlex.split(errors[0].split("--resume_from_checkpoint ", 1)[1]) == [str(out / "checkpoint-4")]
        assert (out / "checkpoint-4" / "model.safetensors").exists()
        assert (out / "checkpoint-4" / "tokenizer_config.json").exists()
    else:
        assert "nothing was written" in errors[0] and not out.exists()


def loading_info(**keys) -> dict:
    """`from_pretrained(..., output_loading_info=True)`'s second value, with `keys` set."""
    return {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set(), "error_msgs": [], **keys}


def test_the_new_head_line_is_judged_from_the_loading_info():
    """What was initialised, and whether that is all the point of fine-tuning: None lets transformers' table through."""
    from elmo_hf.train.finetune_run import _new_head_weights

    new = loading_info(missing_keys={"classifier.weight", "classifier.bias"})
    assert _new_head_weights(new, True, "elmo.") == (["classifier.bias", "classifier.weight"], [])
    # a classifier folder given to the tagger: its classifier re-initialised, its pooler unused, an encoder added
    other = loading_info(missing_keys={"encoder.weight_ih_l0"}, unexpected_keys={"pooler_lstm.bias_ih_l0"},
                         mismatched_keys={("classifier.weight", (2, 32), (3, 32))})
    assert _new_head_weights(other, True, "elmo.") == (["classifier.weight", "encoder.weight_ih_l0"],
                                                       ["pooler_lstm.bias_ih_l0"])
    assert _new_head_weights(other, False, "elmo.") is None  # a saved head of this task that does not fit
    assert _new_head_weights(loading_info(missing_keys={"elmo.char_embedding.weight"}), True, "elmo.") is None
    assert _new_head_weights(loading_info(), False, "elmo.") == ([], [])  # nothing new: no line
    assert _new_head_weights(None, True, "elmo.") == ([], [])  # a preset: nothing was loaded


def test_the_load_report_is_held_and_let_through_when_it_says_more():
    import logging

    from elmo_hf.train.finetune_run import _load_report_held

    reporter = logging.getLogger("transformers.modeling_utils")
    heard = []
    handler = logging.Handler()
    handler.emit = heard.append
    reporter.addHandler(handler)
    try:
        with _load_report_held(verbose=False) as held:
            reporter.warning("ElmoForTokenClassification LOAD REPORT from: folder\nKey | Status")
            reporter.warning("another warning")
        assert [record.getMessage() for record in heard] == ["another warning"]
        held.release()
        assert "LOAD REPORT" in heard[-1].getMessage() and len(heard) == 2
    finally:
        reporter.removeHandler(handler)


def test_validation_labels_the_model_does_not_have_are_one_line_and_nothing_is_written(tmp_path):

    (tmp_path / "train.tsv").write_text("label\ttext\n0\tthe bank\n1\tthe river\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("label\ttext\n2\ta third label\n", encoding="utf-8")
    classify([*COMMON, "--train_file", str(tmp_path / "train.tsv"), "--output_dir", str(tmp_path / "head"),
          "--max_steps", "1", "--classifier_pooling", "mean"])
    out = tmp_path / "out"
    args = [a for a in COMMON if a != "tiny"]
    args[args.index("--model_name_or_path") + 1:args.index("--model_name_or_path") + 1] = [str(tmp_path / "head")]
    with pytest.raises(InputError, match=r"--validation_file .*dev.tsv: line 2 has the label '2', which is not "
                                         r"among the model's") as caught:
        classify([*args, "--validation_file", str(tmp_path / "dev.tsv"), "--output_dir", str(out)])
    assert "\n" not in str(caught.value) and not out.exists()


def test_tagger_trains_whole_epochs_until_min_train_steps_and_max_steps_overrides_it(tmp_path, tiny_model_dir):
    """8 sentences in batches of 4 are 2 steps an epoch: 1 epoch is fewer than --min_train_steps 5, so 3 epochs
    (6 steps) are trained, said in one line; with --max_steps, or epochs enough, the rule changes nothing."""
    from types import SimpleNamespace

    from elmo_hf.train.finetune_run import raise_epochs_to_min_steps

    write_conll_files(tmp_path, train=8, valid=0)
    result = run_cli("elmo-finetune-ner", [
        "--model_name_or_path", tiny_model_dir, "--train_file", tmp_path / "train.txt", "--use_cpu", "--report_to",
        "none", "--save_strategy", "no", "--disable_tqdm", "true", "--per_device_train_batch_size", "4",
        "--num_train_epochs", "1", "--min_train_steps", "5", "--output_dir", tmp_path / "rule"])
    assert result.returncode == 0, result.stderr
    state = json.loads((tmp_path / "rule" / "trainer_state.json").read_text())
    assert (state["global_step"], state["num_train_epochs"]) == (6, 3), state
    said = [line.split(": ", 1)[1] for line in result.stderr.splitlines() if "--min_train_steps" in line]
    assert said == ["1 epochs of 2 steps would train 2 steps, fewer than --min_train_steps 5: training 3 epochs "
                    "(6 steps)"], said

    trainer = SimpleNamespace(get_train_dataloader=lambda: range(7))  # 7 batches an epoch
    for max_steps, epochs, min_steps, expected in ((3, 1.0, 100, 1.0), (-1, 2.0, 14, 2.0), (-1, 2.0, 15, 3.0),
                                                   (-1, 2.0, 0, 2.0)):
        args = SimpleNamespace(max_steps=max_steps, num_train_epochs=epochs, gradient_accumulation_steps=1)
        raise_epochs_to_min_steps(trainer, args, min_steps)
        assert args.num_train_epochs == expected, (max_steps, epochs, min_steps)
    args = SimpleNamespace(max_steps=-1, num_train_epochs=2.0, gradient_accumulation_steps=2)  # 4 updates an epoch
    raise_epochs_to_min_steps(trainer, args, 9)
    assert args.num_train_epochs == 3.0


# --------------------------------------------------------------------------------------------------
# Continuing a fine-tuned folder: its labels, --resume_from_checkpoint, int8 folders, the saved split, predict-only
# --------------------------------------------------------------------------------------------------

ONE_STEP = ["--use_cpu", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--max_steps", "1"]


def saved_labels(folder) -> dict:
    return json.loads((folder / "config.json").read_text())["id2label"]


def test_continuing_a_fine_tuned_head_keeps_its_labels_or_moves_them_by_name(fine_tuned_classifier, tmp_path):
    """Labels among the saved ones: the head goes on with its label ids. Other labels: the head goes on by label
    name (a renamed label is a new row, the vanished one dropped and said), without --ignore_mismatched_sizes,
    which a run without --train_file refuses: transformers re-initialised nothing for a head of as many labels and
    kept the rows renamed by position (issue 68, case 2)."""

    model = ["--model", str(fine_tuned_classifier), *ONE_STEP]
    (tmp_path / "one.tsv").write_text("label\ttext\n1\ta great film\n")
    said = run_cli("elmo-finetune-classification", [*model, "--train_file", tmp_path / "one.tsv", "--output_dir",
                                                     tmp_path / "kept"])
    assert said.returncode == 0, said.stderr
    assert saved_labels(tmp_path / "kept") == {"0": "0", "1": "1"}
    assert ("metrics *****" not in said.stdout
            and " INFO elmo_hf.train.finetune_run: train metrics: epoch " in said.stderr)
    (tmp_path / "renamed.tsv").write_text("label\ttext\n0\tawful\nzero\tgreat\n2\tso so\n")
    said = run_cli("elmo-finetune-classification", [*model, "--train_file", tmp_path / "renamed.tsv", "--output_dir",
                                                     tmp_path / "renamed"])
    assert said.returncode == 0, said.stderr
    assert saved_labels(tmp_path / "renamed") == {"0": "0", "1": "2", "2": "zero"}
    assert ("continuing the saved head by label name: kept ['0'], initialised ['2', 'zero'] (new in the data), "
            "dropped ['1'] (not in the data)") in said.stderr
    said = run_cli("elmo-finetune-classification", ["--model", str(fine_tuned_classifier), "--do_predict",
                                                     "--test_file", tmp_path / "one.tsv", "--output_dir",
                                                     tmp_path / "predicted", "--ignore_mismatched_sizes", "true"])
    assert said.returncode == 2 and "--ignore_mismatched_sizes true (it re-initialises" in said.stderr
    assert not (tmp_path / "predicted").exists()


@pytest.mark.parametrize("use_crf", [False, True])
def test_a_head_moved_to_other_labels_scores_each_kept_label_as_before(use_crf):
    """relabel_head: every label the data keeps scores each word as before (its row of the output layer and, with a
    CRF, its transition scores to and from the other kept labels), whatever its new id; a new label's row is
    freshly initialised; the CRF's BIO rules follow the new names."""
    from elmo_hf.tools.loading import load_elmo
    from elmo_hf.train.relabel_head import relabel_head

    labels = ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]
    model, tokenizer = load_elmo("tiny", "token-classification", seed=0, config_overrides={
        "id2label": dict(enumerate(labels)), "label2id": {label: i for i, label in enumerate(labels)},
        "use_crf": use_crf})
    torch.manual_seed(1)
    with torch.no_grad():
        model.classifier.bias.normal_()
        if use_crf:
            for weights in (model.crf.transitions, model.crf.start_transitions, model.crf.end_transitions):
                weights.normal_()
    batch = tokenizer([["the", "river", "bank"], ["Paris", "in", "May"]], is_split_into_words=True,
                      padding=True, return_tensors="pt")
    model.eval()
    with torch.no_grad():
        before = model.emission_scores(**batch)[0]
    crf = model.crf
    new = ["O", "B-ORG", "I-ORG", "B-PER", "I-PER", "B-LOC"]  # I-LOC dropped, ORG new, every id moved
    relabel_head(model, {label: i for i, label in enumerate(new)})
    with torch.no_grad():
        after = model.emission_scores(**batch)[0]
    assert [model.config.id2label[i] for i in range(6)] == new and model.classifier.out_features == 6
    for label in set(labels) & set(new):
        assert torch.equal(after[..., new.index(label)], before[..., labels.index(label)]), label
    assert not torch.equal(after[..., new.index("B-ORG")], after[..., new.index("I-ORG")])
    if use_crf:
        kept = sorted(set(labels) & set(new))
        for a in kept:
            assert model.crf.start_transitions[new.index(a)] == crf.start_transitions[labels.index(a)]
            for b in kept:
                assert model.crf.transitions[new.index(a), new.index(b)] == crf.transitions[labels.index(a),
                                                                                           labels.index(b)]
        assert model.crf.allowed[1][new.index("O")][new.index("I-ORG")] is False  # O -> I-ORG: not BIO
        assert model.crf.transitions[new.index("B-ORG")].abs().sum() == 0


def test_a_wrong_resume_from_checkpoint_is_one_line_before_anything_is_written(fine_tuned_classifier, tmp_path):
    import shutil

    from elmo_hf.tools.loading import load_elmo
    from elmo_hf.train.finetune_run import check_resume

    (tmp_path / "one.tsv").write_text("label\ttext\n1\ta great film\n")
    out = tmp_path / "out"
    with pytest.raises(InputError, match="--resume_from_checkpoint .*absent: no such folder"):
        classify(["--model", str(fine_tuned_classifier), *ONE_STEP, "--train_file", str(tmp_path / "one.tsv"),
              "--output_dir", str(out), "--resume_from_checkpoint", str(tmp_path / "absent")])
    assert not out.exists()
    model, _ = load_elmo(fine_tuned_classifier, "sequence-classification")
    task = "sequence-classification"
    check_resume(str(fine_tuned_classifier), model, task)  # the run's own folder: state and weights
    with pytest.raises(InputError, match="not a checkpoint .*trainer_state.json"):
        check_resume(str(tmp_path), model, task)
    other = tmp_path / "other-labels"
    other.mkdir()
    for name in ("model.safetensors", "trainer_state.json"):
        shutil.copy(fine_tuned_classifier / name, other / name)
    config = json.loads((fine_tuned_classifier / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "label2id": {"neg": 0, "pos": 1}}))
    with pytest.raises(InputError, match=r"a checkpoint of a run with the labels \['neg', 'pos'\], not this run's"):
        check_resume(str(other), model, task)
    (other / "config.json").unlink()
    mean, _ = load_elmo("tiny", task, config_overrides={"num_labels": 2, "classifier_pooling": "mean"})
    mean.save_pretrained(other)  # same labels, another pooling: other shapes
    with pytest.raises(InputError, match="its weights do not fit this run's model") as caught:
        check_resume(str(other), model, task)
    assert "\n" not in str(caught.value)


def test_the_saved_tokenizer_keeps_the_word_split_it_was_trained_with(fine_tuned_classifier):
    """... and is saved with its fast twin, which transformers' example scripts ask the folder for."""
    from elmo_hf.tokenization import ElmoTokenizer

    saved = json.loads((fine_tuned_classifier / "tokenizer_config.json").read_text())
    assert saved["word_split"] == "whitespace"
    assert saved["auto_map"]["AutoTokenizer"] == ["tokenization_elmo.ElmoTokenizer",
                                                  "tokenization_elmo_fast.ElmoTokenizerFast"]
    assert AutoTokenizer.from_pretrained(fine_tuned_classifier).word_split == "whitespace"
    assert ElmoTokenizer.from_pretrained(fine_tuned_classifier).word_split == "whitespace"


def test_a_folder_saved_for_int8_inference_fine_tunes_its_bilm_in_float32(fine_tuned_classifier, tmp_path):
    import shutil


    folder = tmp_path / "int8"
    shutil.copytree(fine_tuned_classifier, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "lstm_implementation": "int8"}))  # quantize_int8()
    (tmp_path / "one.tsv").write_text("label\ttext\n1\ta great film\n0\tan awful film\n")
    result = run_cli("elmo-finetune-classification",
                     ["--model", folder, *ONE_STEP, "--train_file", tmp_path / "one.tsv",
                                                       "--freeze_bilm", "false", "--output_dir", tmp_path / "out"])
    assert "saved for int8 inference: training in float32" in result.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["lstm_implementation"] == "auto"


def test_predict_only_refuses_options_that_change_the_trained_head(fine_tuned_classifier, tmp_path):

    (tmp_path / "new.txt").write_text("a great film\n")
    out = tmp_path / "out"
    for option, message in ((["--classifier_pooling", "mean"], r"--classifier_pooling mean \(trained: lstm\)"),
                            (["--head_hidden_size", "8"], r"--head_hidden_size 8 \(trained: None\)")):
        with pytest.raises(InputError, match=message + ": without --train_file the fine-tuned head") as caught:
            classify(["--model", str(fine_tuned_classifier), "--test_file", str(tmp_path / "new.txt"),
                  "--output_dir", str(out), *option])
        assert "\n" not in str(caught.value) and not out.exists()


def test_training_words_the_bilm_never_saw_are_said_in_one_warning(caplog):
    """A head on a biLM pretrained on other words: most training words outside its vocabulary, one warning naming
    the way out; none where most are known, or the head already has a word embedding."""
    from types import SimpleNamespace

    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.train.finetune_run import warn_if_unseen

    tokenizer = ElmoTokenizer(word_vocab=["<S>", "</S>", "<UNK>", "the", "bank", "river"])
    data_args = SimpleNamespace(word_split=None)
    config = SimpleNamespace(word_embedding_dim=0)
    unseen = [{"text": "a truly wonderful film", "label": "1"}, {"text": "the bank", "label": "0"}]
    warn_if_unseen(unseen, sequence_classification.PARTS, tokenizer, data_args, config)
    assert "67% of the training words are not in the biLM's pretraining vocabulary" in caplog.text
    assert "--word_embedding_dim 32" in caplog.text
    caplog.clear()
    warn_if_unseen([{"text": "the river bank", "label": "0"}], sequence_classification.PARTS, tokenizer, data_args,
                   config)
    warn_if_unseen(unseen, sequence_classification.PARTS, tokenizer, data_args, SimpleNamespace(word_embedding_dim=32))
    assert not caplog.text


def test_a_second_run_into_a_folder_replaces_the_first_and_leaves_no_stale_result(tmp_path, tiny_model_dir):
    """--overwrite_output_dir empties the folder first: the second run's results are its own (no eval_results.json of
    the first run beside its training metrics), and no lock is left behind."""
    write_sst2_files(tmp_path, train=8, dev=4)
    out = tmp_path / "out"
    args = ["--model_name_or_path", tiny_model_dir, *ONE_STEP, "--train_file", tmp_path / "train.tsv",
            "--output_dir", out]
    first = run_cli("elmo-finetune-classification", [*args, "--validation_file", tmp_path / "dev.tsv"])
    assert first.returncode == 0, first.stderr[-3000:]
    assert (out / "eval_results.json").exists()
    refused = run_cli("elmo-finetune-classification", args)
    assert refused.returncode == 2 and "--overwrite_output_dir" in refused.stderr.splitlines()[-1]
    second = run_cli("elmo-finetune-classification", [*args, "--overwrite_output_dir"])
    assert second.returncode == 0, second.stderr[-3000:]
    assert not (out / "eval_results.json").exists()
    assert not any(key.startswith("eval_") for key in json.loads((out / "all_results.json").read_text()))
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []  # no lock left


def test_overwrite_never_removes_the_model_or_files_the_run_reads(tmp_path, tiny_model_dir):
    """Evaluating a fine-tuned model in its own folder is refused, and the refusal names --overwrite_output_dir; with
    it the folder would be emptied before the model in it is loaded: refused in one line, the model kept."""
    write_sst2_files(tmp_path, train=8, dev=4)
    out = tmp_path / "out"
    trained = run_cli("elmo-finetune-classification", ["--model_name_or_path", tiny_model_dir, *ONE_STEP,
                                                       "--train_file", tmp_path / "train.tsv", "--output_dir", out])
    assert trained.returncode == 0, trained.stderr[-3000:]
    before = sorted(path.name for path in out.iterdir())
    in_place = ["--model_name_or_path", out, "--validation_file", tmp_path / "dev.tsv", "--output_dir", out,
                "--use_cpu", "--overwrite_output_dir"]
    refused = run_cli("elmo-finetune-classification", in_place)
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1].endswith(f"--overwrite_output_dir would remove {out}, which this run "
                                                    f"reads, from --output_dir {out}: give another --output_dir")
    assert sorted(path.name for path in out.iterdir()) == before
