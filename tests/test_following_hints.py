"""A refusal that names an option, followed, must give the right run (issue 55): every such refusal is a row here
that gives the bad file, the command and what the one line says, then reruns the command with the option the line
names and checks what the rerun read (its rows, its columns, its text as the file's bytes mean).

`test_every_refusal_naming_an_option_is_a_row_or_exempt` reads the package's source for the raise statements (and
the hint builders, `*_hint` and `*_message` functions) whose message names an option, and fails for one that is
neither covered by a row nor exempt with its reason, and for a row or exemption of a refusal no longer there: the
table stays whole as refusals are added.

The commands run in this process through their console scripts' frame (`conftest.run_cli`), on the tiny preset for
one step, or elmo-embed on a few lines: what is tested is what they read.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, run_cli

pytestmark = pytest.mark.slow

ONE_STEP = ("--model_name_or_path", "tiny", "--use_cpu", "--report_to", "none", "--save_strategy", "no",
            "--disable_tqdm", "true", "--max_steps", "1", "--per_device_train_batch_size", "2", "--seed", "0")
EMBED = ("{dir}/corpus.txt", "{dir}/out.h5", "--model", "tiny", "--quiet", "--threads", "1")
CLASSIFY = "elmo-finetune-classification"


@dataclass(frozen=True)
class Row:
    """A refusal and its rerun: `files` (name: bytes) written into an empty folder, `command` run with `args`
    ({dir}: the folder), refused with exit status 2 and a last line holding `says`; then run again with `follow`
    added, which must exit 0 and pass `check(folder)`. `covers`: the refusals of the inventory it tests."""

    covers: tuple[str, ...]
    command: str
    files: dict[str, bytes]
    args: tuple[str, ...]
    says: str
    follow: tuple[str, ...]
    check: Callable[[Path], None]
    before: Callable[[Path], None] | None = field(default=None)  # sets the folder up beyond `files`
    drop: tuple[str, ...] = ()  # options of `args` (with their value) that the line says to give in place of
    needs: str | None = None  # an optional package the rerun needs (skipped without it)


def results(folder: Path, name: str = "out") -> dict:
    return json.loads((folder / name / "all_results.json").read_text())


def trained_on(samples: int, pairs: bool | None = None) -> Callable[[Path], None]:
    """The fine-tuning rerun read `samples` training examples, as pairs of sentences or single ones."""
    def check(folder: Path) -> None:
        assert results(folder)["train_samples"] == samples
        if pairs is not None:
            config = json.loads((folder / "out" / "config.json").read_text())
            assert (config.get("pair_combination") is not None) == pairs
    return check


def embedded(*lines: list[str]) -> Callable[[Path], None]:
    """elmo-embed's rerun wrote these lines' words, in order (a line left out is not there)."""
    def check(folder: Path) -> None:
        import h5py

        with h5py.File(folder / "out.h5", "r") as handle:
            keys = sorted((key for key in handle if key.isdigit()), key=int)
            assert [list(handle[key].attrs["tokens"]) for key in keys] == [list(words) for words in lines]
    return check


def _predicted(folder: Path, lines: int) -> None:
    """The classifier's rerun labelled `lines` examples (predictions.txt: a header line, then one a line)."""
    written = (folder / "out" / "predictions.txt").read_text(encoding="utf-8").splitlines()
    assert len([line for line in written if line.strip()]) in (lines, lines + 1), written


def _split_saved(folder: Path, split: str, samples: int) -> None:
    """The tagger's rerun trained on `samples` sentences and saved the word split it names for the text it reads."""
    trained_on(samples)(folder)
    assert json.loads((folder / "out" / "tokenizer_config.json").read_text())["word_split"] == split


def _pair_head(folder: Path) -> None:
    """A pair classifier trained for a step on train.tsv, saved in pairs/."""
    done = run_cli(CLASSIFY, [*ONE_STEP, "--train_file", folder / "train.tsv", "--output_dir", folder / "pairs"])
    assert done.returncode == 0, done.stderr[-3000:]


def _classifier_head(folder: Path) -> None:
    """A classifier trained for a step on train.tsv, saved in head/."""
    done = run_cli(CLASSIFY, [*ONE_STEP, "--train_file", folder / "train.tsv", "--output_dir", folder / "head"])
    assert done.returncode == 0, done.stderr[-3000:]


def _output_of_another_run(folder: Path) -> None:
    (folder / "out").mkdir()
    (folder / "out" / "eval_results.json").write_text("{}")


def _earlier_vectors(folder: Path) -> None:
    (folder / "out.h5").write_bytes(b"an earlier run's file")


PRETRAIN = ("--train_file", "{dir}/train.txt", "--output_dir", "{dir}/out", "--preset", "tiny", "--max_steps", "2",
            "--per_device_batch_size", "2", "--unroll_steps", "4", "--disable_tqdm", "--report_to", "none")


def _checkpoint_with_the_full_softmax(folder: Path) -> None:
    """A run's first step and its checkpoint, trained with --softmax full."""
    args = [arg.format(dir=folder) for arg in PRETRAIN]
    args[args.index("--max_steps") + 1] = "1"
    done = run_cli("elmo-pretrain", [*args, "--softmax", "full", "--save_steps", "1"])
    assert done.returncode == 0, done.stderr[-3000:]


def _resumed(folder: Path) -> None:
    """The rerun went on from the checkpoint to step 2 (the log: the first run's step and the rerun's)."""
    assert json.loads((folder / "out" / "train_results.json").read_text())["steps"] == 2
    log = (folder / "out" / "train_log.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in log] == [1, 2]


HEADERLESS = b"pos\tgood film\nneg\tbad film\npos\tfine film\nneg\tdull film\n"
QUERY_TITLE = b"query\ttitle\tlabel\nhow old is Ada\tAda's age\t1\nwhere is Rome\tAda's home\t0\n"
GREEK = "Άθήνα είναι\nη πρωτεύουσα\n"
MIXED = "un café\nle thé\n".encode() + "une crème brûlée\n".encode("latin-1") + "ça va\n".encode()
SQUAD = json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    "context": "Ada was born in Lisbon .", "qas": [{"id": "q1", "question": "Where was Ada born ?",
                                                 "answers": [{"text": "Lisbon", "answer_start": 16}]}]}]}]}).encode()
SQUAD_NO_ANSWER = json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    "context": "Ada was born in Lisbon .", "qas": [
        {"id": "q1", "question": "Where was Ada born ?", "answers": [{"text": "Lisbon", "answer_start": 16}]},
        {"id": "q2", "question": "When was Ada born ?", "answers": []}]}]}]}).encode()

ROWS = {
    "a file without a header line": Row(
        ("train/tasks/common_data.py: --column_names", "train/tasks/table_header.py: --column_names"), CLASSIFY,
        {"train.tsv": HEADERLESS}, (*ONE_STEP, "--train_file", "{dir}/train.tsv", "--output_dir", "{dir}/out"),
        "name the columns in order with --column_names (e.g. --column_names label,text)",
        ("--column_names", "label,text"), trained_on(4)),  # every row: none taken for a header
    "a column named by the first line's value": Row(
        ("train/tasks/table_header.py: --column_names",), CLASSIFY, {"train.tsv": HEADERLESS},
        (*ONE_STEP, "--train_file", "{dir}/train.tsv", "--output_dir", "{dir}/out", "--label_column", "pos"),
        "--label_column pos would take it for the header and leave that example out; name the columns in order with "
        "--column_names in place of --label_column pos", ("--column_names", "label,text"), trained_on(4),
        drop=("--label_column",)),
    "two text columns": Row(
        ("train/tasks/common_data.py: --text_column", "train/tasks/table_header.py: --text_column --text_pair_column"),
        CLASSIFY, {"train.tsv": QUERY_TITLE},
        (*ONE_STEP, "--train_file", "{dir}/train.tsv", "--output_dir", "{dir}/out"),
        "for sentence pairs give both, --text_column query --text_pair_column title",
        ("--text_column", "query", "--text_pair_column", "title"), trained_on(2, pairs=True)),
    "Latin-1 text": Row(
        ("tools/core/text_files.py: --<option>",), "elmo-embed",
        {"corpus.txt": "une crème brûlée\nun café naïf\n".encode("latin-1")}, EMBED,
        "the file reads as cp1252: --encoding cp1252", ("--encoding", "cp1252"),
        embedded(["une", "crème", "brûlée"], ["un", "café", "naïf"])),
    "ISO-8859-7 Greek": Row(
        ("tools/core/text_files.py: --<option>",), "elmo-embed", {"corpus.txt": GREEK.encode("iso8859_7")}, EMBED,
        "the file reads as iso8859_7: --encoding iso8859_7", ("--encoding", "iso8859_7"),
        embedded(["Άθήνα", "είναι"], ["η", "πρωτεύουσα"])),
    "UTF-8 but for one line": Row(
        ("tools/core/text_files.py: --<option>",), "elmo-embed", {"corpus.txt": MIXED}, EMBED,
        "the file is UTF-8 but for line 3", ("--encoding_errors", "skip"),
        embedded(["un", "café"], ["le", "thé"], ["ça", "va"])),
    "tags the CRF's scheme forbids": Row(
        ("train/tasks/token_classification.py: --crf_constraints",), "elmo-finetune-ner",
        {"train.conll": b"EU B-ORG\nrejects O\n\nPeter I-PER\nBlackburn I-PER\n"},
        (*ONE_STEP, "--train_file", "{dir}/train.conll", "--output_dir", "{dir}/out", "--crf", "true"),
        "which BIO tags forbid; give IOB2 or BIOES tags, or --crf_constraints none (IOB1 tags)",
        ("--crf_constraints", "none"), trained_on(2)),
    "a question without answers": Row(
        ("train/tasks/squad_data.py: --version_2_with_negative",), "elmo-finetune-qa", {"train.json": SQUAD_NO_ANSWER},
        (*ONE_STEP, "--train_file", "{dir}/train.json", "--output_dir", "{dir}/out"),
        "or --version_2_with_negative true to read questions without answers as unanswerable",
        ("--version_2_with_negative", "true"), trained_on(2)),  # both questions, the second unanswerable
    "a data file without a text column": Row(
        ("tools/embedding/embed_io.py: --text_column",), "elmo-embed",
        {"corpus.jsonl": b'{"sentence": "the bank ."}\n{"sentence": "rates rose ."}\n'},
        ("{dir}/corpus.jsonl", *EMBED[1:]), "has no column 'text'; it has ['sentence'] (--text_column)",
        ("--text_column", "sentence"), embedded(["the", "bank", "."], ["rates", "rose", "."])),
    "a pair head given one text column to predict": Row(  # predicting only: the option names the test file's
        ("train/tasks/sequence_classification.py: --text_pair_column",), CLASSIFY,
        {"train.tsv": b"label\ttext\ttext_pair\n1\tA man sleeps .\tA man rests .\n0\tA man sleeps .\tA man runs .\n",
         "test.tsv": b"text\tsecond\nA man sleeps .\tA man rests .\nA dog barks .\tA dog sleeps .\n"},
        (*ONE_STEP, "--model_name_or_path", "{dir}/pairs", "--do_predict", "--test_file", "{dir}/test.tsv",
         "--output_dir", "{dir}/out"),
        "(with a header naming both sentences' columns, or --text_pair_column)", ("--text_pair_column", "second"),
        lambda folder: _predicted(folder, 2), before=lambda folder: _pair_head(folder)),
    "an option that would change a fine-tuned head, predicting": Row(  # issue 68, case 3
        ("train/finetune_run.py: --train_file",), CLASSIFY,
        {"train.tsv": b"label\ttext\n1\tgood film\n0\tbad film\n", "test.tsv": b"text\ngood film\nbad one\n"},
        (*ONE_STEP, "--model_name_or_path", "{dir}/head", "--do_predict", "--test_file", "{dir}/test.tsv",
         "--output_dir", "{dir}/out", "--ignore_mismatched_sizes", "true"),
        "predicts as it was trained; leave the option out", (), lambda folder: _predicted(folder, 2),
        before=_classifier_head, drop=("--ignore_mismatched_sizes",)),
    "a word split that cuts the file's words": Row(
        ("train/tasks/token_classification.py: --train_file --word_split",), "elmo-finetune-ner",
        {"train.conll": "北京 B-LOC\n是 O\n首都 O\n\n上海 B-LOC\n很 O\n大 O\n".encode()},
        (*ONE_STEP, "--train_file", "{dir}/train.conll", "--output_dir", "{dir}/out", "--word_split", "punctuation"),
        "--word_split jieba cuts text as the file does", ("--word_split", "jieba"), lambda folder: _split_saved(
            folder, "jieba", 2), needs="jieba"),
    "output folder of another run": Row(
        ("tools/core/output_folders.py: --<option> --<overwrite_option>",), CLASSIFY,
        {"train.tsv": b"label\ttext\n1\tgood film\n0\tbad film\n"},
        (*ONE_STEP, "--train_file", "{dir}/train.tsv", "--output_dir", "{dir}/out"),
        "give another folder, or --overwrite_output_dir", ("--overwrite_output_dir",), trained_on(2),
        before=_output_of_another_run),
    "embed output exists": Row(
        ("tools/embedding/embed.py: --overwrite",), "elmo-embed", {"corpus.txt": b"the bank .\nrates rose .\n"},
        EMBED, "--overwrite", ("--overwrite",), embedded(["the", "bank", "."], ["rates", "rose", "."]),
        before=_earlier_vectors),
    "a checkpoint of another recipe": Row(
        ("train/checkpoints.py: --output_dir",), "elmo-pretrain",
        {"train.txt": b"the cat sat on the mat .\nthe dog ran in the park .\n" * 20},
        (*PRETRAIN, "--resume_from_checkpoint", "latest"),
        "was trained with --softmax full, this command says --softmax sampled", ("--softmax", "full"),
        _resumed, before=_checkpoint_with_the_full_softmax),
    "QA window without room": Row(
        ("train/tasks/question_answering.py: --doc_stride --max_question_length --max_seq_length",),
        "elmo-finetune-qa",
        {"train.json": SQUAD}, (*ONE_STEP, "--train_file", "{dir}/train.json", "--output_dir", "{dir}/out",
                                "--max_seq_length", "6"),
        "give at least 42 (with --doc_stride 32)", ("--max_seq_length", "42"), trained_on(1)),
}


def _args(args: tuple[str, ...], folder: Path, drop: tuple[str, ...] = ()) -> list[str]:
    out = [arg.format(dir=folder) for arg in args]
    for option in drop:  # the option and its value
        at = out.index(option)
        del out[at: at + 2]
    return out


@pytest.mark.parametrize("name", ROWS)
def test_a_hint_followed_gives_the_right_run(name, tmp_path):
    row = ROWS[name]
    if row.needs:
        pytest.importorskip(row.needs, reason=f"the rerun needs {row.needs}, an optional package")
    for file_name, data in row.files.items():
        (tmp_path / file_name).write_bytes(data)
    if row.before:
        row.before(tmp_path)
    refused = run_cli(row.command, _args(row.args, tmp_path))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert row.says in refused.stderr.strip().splitlines()[-1], refused.stderr[-3000:]
    followed = run_cli(row.command, _args(row.args, tmp_path, row.drop) + list(row.follow))
    assert followed.returncode == 0, followed.stderr[-3000:]
    row.check(tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# The inventory: every refusal (and hint builder) of the package's source whose message names an option
# ---------------------------------------------------------------------------------------------------------------
PACKAGE_FOLDERS = ("cli", "modeling_elmo", "tokenization", "train", "tools")
OPTION = re.compile(r"(?<![\w-])--<?[a-z][a-z0-9_]+>?")


def _message_text(node: ast.AST) -> str:
    """The literal pieces of a message (the constant parts of an f-string or a concatenation), with an option
    passed in by name (`{option}`, `{errors_option}`: a hint builder's argument) as --<option>."""
    pieces = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            pieces.append(sub.value)
        elif isinstance(sub, ast.FormattedValue) and isinstance(sub.value, ast.Name) and \
                sub.value.id.endswith("option"):
            pieces.append(f" --<{sub.value.id}> ")
    return " ".join(pieces)


def refusals_naming_options() -> set[str]:
    """"path: --option ..." for each raise statement whose message names options, and each return of a hint
    builder (a function named *_hint or *_message) that does: the options sorted, one key for the raises of a file
    that name the same ones."""
    keys = set()
    for folder in PACKAGE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            messages = [node.exc.args[0] for node in ast.walk(tree) if isinstance(node, ast.Raise)
                        and isinstance(node.exc, ast.Call) and node.exc.args]
            for function in ast.walk(tree):
                if isinstance(function, ast.FunctionDef) and function.name.endswith(("_hint", "_message")):
                    messages += [node.value for node in ast.walk(function)
                                 if isinstance(node, ast.Return) and node.value is not None]
            for message in messages:
                options = sorted(set(OPTION.findall(_message_text(message))))
                if options:
                    keys.add(f"{path.relative_to(REPO)}: {' '.join(options)}")
    return keys


# Why a refusal that names an option has no row. A reason says what the rerun would be and where it is tested.
VALUE = ("names the option given and the values it takes (a range, a choice, a format): the rerun is any valid value, "
         "which the option's own tests run (tests/test_arguments.py, tests/test_bad_inputs.py 'non-positive number', "
         "tests/test_time_budget.py for --lr_scheduler_type)")
MISSING = ("names a file, folder, model, checkpoint or package that is not there or not what the option needs: the "
           "rerun needs that thing, not another option value")
TOGETHER = "names options that do not go together: the rerun leaves one of them out, which each one's own tests run"
OWNED = ("an earlier run's output: --overwrite replaces it (the rows 'embed output exists' and 'output folder of "
         "another run'), --resume continues it (tests/test_embed.py, tests/test_pretrain.py)")
DEVICE = "a device or dtype this machine does not have: the rerun names another device (tests/test_backend_registry.py)"
EXEMPT = {
    **dict.fromkeys([
        "tokenization/word_splits_elmo.py: --<option>", "tools/analysis.py: --max_lines", "tools/analysis.py: "
        "--max_occurrences", "tools/analysis.py: --max_words", "tools/analysis.py: --min_count",
        "tools/core/command_options.py: --port", "tools/core/early_checks.py: --format",
        "tools/embedding/embed_plan.py: --batch_tokens --max_tokens",
        "tools/embedding/embed_plan.py: --engine", "tools/embedding/embed_plan.py: --<option> --engine",
        "train/finetune_run.py: --learning_rate",
        "train/finetune_run.py: --max_steps --num_train_epochs", "train/lr_schedule.py: --lr_scheduler_type",
        "train/pretrain_args.py: --max_steps "
        "--num_train_epochs", "train/pretrain_args.py: --unroll_steps", "train/tasks/squad_metrics.py: --scoring",
        "train/tasks/sequence_classification.py: --problem_type",
        "train/tasks/token_classification.py: --test_format",
        "train/time_budget.py: --<option>", "train/tasks/semantic_role_labeling.py: --predicate_column",
        "tools/export/onnx_export.py: --output", "tools/core/output_paths.py: --<option>",
        "train/finetune_run.py: --help",
        "train/pretrain_run.py: --per_device_batch_size --unroll_steps",
        "train/pretrain_eval.py: --per_device_batch_size --unroll_steps",
        "train/tasks/sequence_classification.py: --max_seq_length", "train/tasks/token_classification.py: "
        "--max_seq_length", "train/tasks/semantic_role_labeling.py: --max_seq_length",
        "train/tasks/question_answering.py: --doc_stride --max_seq_length"], VALUE),
    **dict.fromkeys([
        "tools/analysis.py: --model", "tools/app/server.py: --model", "tools/conversion/convert.py: --manylangs_dir",
        "tools/conversion/convert_allennlp_elmo.py: --model",
        "tools/conversion/convert_allennlp_elmo.py: --model --options_file "
        "--weight_file", "tools/conversion/convert_allennlp_elmo.py: --vocab_file --with_vocab",
        "tools/conversion/download.py: --model",
        "tools/embedding/embed.py: --model", "tools/flair_embeddings.py: --options_file --output_dir --weight_file",
        "tools/flair_embeddings.py: --output_dir", "tools/core/early_checks.py: --<option>",
        "train/tasks/common_data.py: --<option>", "train/finetune_run.py: --<option>",
        "train/finetune_run.py: --model_name_or_path",
        "train/finetune_run.py: --validation_file", "train/pretrain_run.py: --config_file",
        "train/pretrain_run.py: --init_from", "train/pretrain_run.py: --preset",
        "train/pretrain_run.py: --softmax_weight_file", "train/pretrain_run.py: --vocab_file",
        "tokenization/word_splits_elmo.py: --<option> --word_split", "tools/embedding/embed_io.py: --dataset_split",
        "tools/embedding/embed_io.py: --word_split"], MISSING),
    **dict.fromkeys([
        "train/finetune_run.py: --do_predict --model_name_or_path --test_file --train_file --validation_file",
        "train/finetune_run.py: --do_predict --test_file", "train/finetune_run.py: --model_name_or_path --train_file",
        "train/finetune_run.py: --train_file --validation_file", "train/pretrain_args.py: --config_file "
        "--init_from --preset", "train/pretrain_args.py: --config_file --preset", "train/pretrain_args.py: "
        "--hub_model_id --push_to_hub", "train/pretrain_args.py: --init_from --softmax_weight_file",
        "train/pretrain_args.py: --softmax --softmax_weight_file"], TOGETHER),
    **dict.fromkeys([
        "tools/analysis.py: --overwrite", "tools/conversion/convert_common.py: --overwrite",
        "tools/embedding/embed.py: --overwrite "
        "--resume", "tools/embedding/embed.py: --resume", "tools/embedding/embed_io.py: --overwrite",
        "tools/export/onnx_export.py: --overwrite",
        "train/demo_run.py: --output_dir --overwrite_output_dir", "train/pretrain_run.py: --overwrite_output_dir "
        "--resume_from_checkpoint", "tools/embedding/embed_plan.py: --overwrite --resume",
        "train/finetune_run.py: --output_dir --overwrite_output_dir --predictions_file"], OWNED),
    **dict.fromkeys(["tools/export/backend_choice.py: --backend --device --dtype",
                     "tools/export/backends.py: --backend",
                     "tools/export/backends.py: --backend --dtype", "tools/embedding/embed.py: --device --dtype",
                     "tools/embedding/embed.py: --dtype", "tools/loading.py: --<option>"], DEVICE),
    "tools/embedding/embed_io.py: --encoding": "not reached: text_files' line-by-line check names the line first (a "
                                     "fallback for an encoding that decodes otherwise in blocks)",
    "train/tasks/sequence_classification.py: --train_file": "a test file of single sentences for a pair head in a "
                                                            "run that trains: the hint renames its column, no option "
                                                            "(tests/test_silent_results.py)",
    "train/tasks/sequence_classification.py: --problem_type --train_file":
        "a new classifier's training file of one label: the rerun needs another file, or a saved head of more labels "
        "(tests/test_silent_results.py); --problem_type regression is named for a file of scores, whose own tests run "
        "it (tests/test_pairs.py)",
    "tools/embedding/embed.py: --encoding --encoding_errors":
        "every line left out by --encoding_errors skip: the rerun gives "
                                                    "--encoding (tests/test_bad_inputs.py 'every line left out')",
    "tools/core/output_folders.py: --<option>": "a folder another run is writing (the rerun waits for it: "
                                                "tests/test_bad_inputs.py 'output locked by another run'), or one "
                                                "that holds the run's own inputs (the rerun names another folder)",
}


def test_every_refusal_naming_an_option_is_a_row_or_exempt():
    found = refusals_naming_options()
    covered = {key for row in ROWS.values() for key in row.covers}
    assert not covered & EXEMPT.keys(), "a refusal both covered by a row and exempt"
    missing = sorted(found - covered - EXEMPT.keys())
    assert not missing, f"refusals that name an option, without a row in ROWS or a reason in EXEMPT: {missing}"
    gone = sorted((covered | EXEMPT.keys()) - found)
    assert not gone, f"rows or exemptions of refusals no longer in the source: {gone}"
