"""`elmo-pretrain` end to end on a small generated corpus: through its frame in this process, and as real processes
where signals, several processes (torchrun; accelerate launch in tests/test_pretrain_nodes.py) or the Hub push are
what is tested.

A softmax initialised from layer-0 vectors is compared with the model's own character CNN to REORDERED
(tests/tolerances.py); a resumed run with the run never stopped to RESUMED, below."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, clean_env, run_cli, run_command
from tolerances import REORDERED, Bound, assert_close

from elmo_hf import modeling_elmo  # noqa: F401  (registers the Elmo classes with the Auto classes)
from elmo_hf.tools.core.errors import InputError

# A resumed run against the run never stopped, both on one thread a process (`pretrain` sets OMP_NUM_THREADS=1) on
# this CPU: the same float32 arithmetic on the same restored state, so the same bits are expected; 1e-6 allows the
# last 2 bits of a loss below 8 (its ulp is 4.8e-7 in [4, 8)) and nothing that a state restored wrong would give.
RESUMED = Bound("resumed run", 1e-6, scaled=False,
                rule="1e-6 absolute: 2 ulps of a loss below 8; the resumed run repeats the same arithmetic")


def write_corpus(path: Path, lines: int, seed: int) -> Path:
    """Sentences from a small grammar, so that a language model has something to learn."""
    rng = random.Random(seed)
    nouns, verbs, places = ["cat", "dog", "fish", "bird"], ["sat", "slept", "ran", "swam"], ["mat", "bank", "river"]
    with open(path, "w") as handle:
        for _ in range(lines):
            words = ["the", rng.choice(["big", "small", "red"]), rng.choice(nouns), rng.choice(verbs), "on", "the",
                     rng.choice(places)]
            if rng.random() < 0.5:
                words += ["and", "then", rng.choice(verbs), "quickly"]
            handle.write(" ".join(words) + " .\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    return write_corpus(folder / "train.txt", 400, 0), write_corpus(folder / "valid.txt", 40, 1)


ELMO_PRETRAIN = str(Path(sys.executable).parent / "elmo-pretrain")


def command_line(args, launcher: list[str] | None) -> list[str]:
    """The installed script, or a launcher (`torchrun ... -m`) running the command layer's module."""
    return [*launcher, "elmo_hf.cli", "pretrain", *map(str, args)] if launcher else [ELMO_PRETRAIN, *map(str, args)]


def pretrain(*args: str, launcher: list[str] | None = None, check: bool = True, cwd: Path | None = None):
    """`elmo-pretrain ARGS` in this process (through its frame), or under `launcher` in processes of their own."""
    if launcher is None:
        result = run_cli("elmo-pretrain", args, cwd=cwd or REPO)
    else:
        env = {**clean_env(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        result = run_command(command_line(args, launcher), cwd=cwd or REPO, env=env, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(
            f"pretrain failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    return result


COMMON = ["--preset", "tiny", "--per_device_batch_size", "4", "--unroll_steps", "8", "--disable_tqdm",
          "--logging_steps", "1", "--report_to", "none", "--shuffle_buffer", "50"]


def losses(folder: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records}


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m"]
ACCELERATE = [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2", "-m"]


def interrupt_after_first_checkpoint(*args: str, signum: int, launcher: list[str] | None = None):
    """Start a long run that checkpoints every 2 steps, and once its first checkpoint is there send `signum` to its
    process group, as Ctrl-C in a terminal does (torchrun passes it on to its workers). Returns (exit status,
    stderr)."""
    out = Path(args[args.index("--output_dir") + 1])
    command = command_line([*args, "--max_steps", "100000", "--save_steps", "2"], launcher)
    env = {**clean_env(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 240
    while not (out / "checkpoints" / "step-00000002").is_dir():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
        time.sleep(0.05)
    os.killpg(process.pid, signum)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


def saved_step(out: Path) -> int:
    """The step of the newest checkpoint, which every checkpoint also records in its progress file."""
    newest = sorted((out / "checkpoints").glob("step-*"))[-1]
    step = torch.load(newest / "progress_rank0.pt", weights_only=False)["progress"]["step"]
    assert newest.name == f"step-{step:08d}"
    return step


def parameters(out: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(out / "model.safetensors")


def test_the_log_claims_no_training_perplexity_and_the_bar_shows_the_validations(corpus, tmp_path):
    """The sampled softmax's training loss (the default recipe's) reads far below the model's perplexity: the log
    and the progress bar name it a loss, and the bar shows the evaluation's perplexity once there is one."""
    train, valid = corpus
    out = tmp_path / "out"
    args = [a for a in COMMON if a != "--disable_tqdm"]
    result = pretrain("--train_file", str(train), "--validation_file", str(valid), "--output_dir", str(out),
                      "--max_steps", "4", "--eval_steps", "2", "--softmax", "sampled", "--num_sampled", "8", *args)
    records = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert all("loss" in r and not any("perplexity" in key for key in r) for r in records), records
    evaluations = re.findall(r"step 2: .*average_perplexity ([0-9.]+)", result.stderr)
    assert len(evaluations) == 1, result.stderr
    shown = [float(value) for value in re.findall(r"valid_ppl=([0-9.]+)", result.stderr)]
    assert shown and all(abs(value - float(evaluations[0])) <= 0.06 for value in shown), result.stderr[-2000:]
    before_evaluation = result.stderr.split("step 2: ")[0]
    assert "loss=" in before_evaluation and "valid_ppl=" not in before_evaluation


def test_a_resumed_run_keeps_its_vocabulary_and_ignores_num_sampled_without_the_sampled_softmax(corpus, tmp_path):
    """Resuming rebuilt the vocabulary from the corpus: a corpus grown since would shift the word ids under the
    restored softmax. The run's vocab.txt is read instead. And --num_sampled, which the full softmax never reads, does
    not stop a full-softmax run from resuming (those runs saved bilm-tf's 8192 when the default was full)."""
    train, _ = corpus
    out = tmp_path / "out"
    pretrain("--train_file", str(train), "--output_dir", str(out), "--max_steps", "1", "--save_steps", "1",
             "--softmax", "full", "--num_sampled", "8192", *COMMON)
    vocabulary = (out / "vocab.txt").read_text()
    grown = tmp_path / "grown.txt"
    grown.write_text(train.read_text() + "zebras and aardvarks wander\n" * 50)
    result = pretrain("--train_file", str(grown), "--output_dir", str(out), "--max_steps", "2", "--softmax", "full",
                      "--resume_from_checkpoint", "latest", *COMMON)
    assert "of the run resumed" in result.stderr, result.stderr
    assert (out / "vocab.txt").read_text() == vocabulary and "zebras" not in vocabulary
    assert json.loads((out / "train_results.json").read_text())["steps"] == 2


@pytest.mark.slow
def test_pretrain_writes_a_model_folder_that_loads(corpus, tmp_path):
    train, valid = corpus
    out = tmp_path / "out"
    result = pretrain("--train_file", str(train), "--validation_file", str(valid), "--output_dir", str(out),
                      "--max_steps", "12", "--softmax", "sampled", "--num_sampled", "8", *COMMON)
    assert "wrote the model folder to" in result.stderr
    # Quiet by default: this command's own lines, none of the libraries' warnings or progress bars.
    lines = result.stderr.strip().splitlines()
    assert all(" INFO elmo-pretrain: " in line for line in lines), result.stderr
    said = [line.split(" INFO elmo-pretrain: ", 1)[1] for line in lines]
    expected = ["a vocabulary of", "trained 12 steps", "validation: forward_perplexity", "wrote the model folder to"]
    assert len(said) == len(expected) and all(m.startswith(e) for m, e in zip(said, expected)), result.stderr
    for name in ("config.json", "model.safetensors", "modeling_elmo.py", "tokenizer_config.json", "vocab.txt",
                 "tokenization_elmo.py", "tokenization_elmo_fast.py", "eval_results.json", "train_results.json"):
        assert (out / name).exists(), name
    # the fast twin named beside ElmoTokenizer: transformers' example scripts ask the folder for a fast tokenizer
    assert json.loads((out / "tokenizer_config.json").read_text())["auto_map"]["AutoTokenizer"] == [
        "tokenization_elmo.ElmoTokenizer", "tokenization_elmo_fast.ElmoTokenizerFast"]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["average_perplexity"] > 1 and results["eval_tokens"] > 0
    summary = json.loads((out / "train_results.json").read_text())
    assert summary["steps"] == 12 and summary["tokens_seen"] == 12 * 4 * 8
    # the sampled softmax of 8 negatives, which this vocabulary leaves words for, is what the config says
    assert json.loads((out / "config.json").read_text())["softmax_type"] == "sampled"

    from transformers import AutoModel, AutoModelForPreTraining, AutoTokenizer

    model = AutoModel.from_pretrained(out)
    lm = AutoModelForPreTraining.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert type(model).__name__ == "ElmoModel" and type(lm).__name__ == "ElmoForPreTraining"
    assert tokenizer.word_vocab_size == lm.config.vocab_size
    batch = tokenizer(["the cat sat on the bank"], return_tensors="pt")
    assert torch.equal(model(**batch).last_hidden_state, lm.elmo(**batch).last_hidden_state)


@pytest.mark.slow
def test_loss_decreases_and_sentence_mode(corpus, tmp_path):
    train, valid = corpus
    out = tmp_path / "out"
    pretrain("--train_file", str(train), "--validation_file", str(valid), "--output_dir", str(out),
             "--max_steps", "40", "--batch_mode", "sentence", "--optimizer", "adamw", "--learning_rate", "0.01",
             *COMMON)
    log = losses(out)
    first = sum(log[s] for s in range(1, 6)) / 5
    last = sum(log[s] for s in range(36, 41)) / 5
    assert last < first - 0.3, (first, last)
    # The default recipe's sampled softmax of 1,024 negatives trains a vocabulary of fewer words as the full one, and
    # the model folder's config says so.
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] <= 1024 and config["softmax_type"] == "full"


@pytest.mark.slow
def test_resume_gives_the_same_losses_as_an_uninterrupted_run(corpus, tmp_path):
    train, _ = corpus
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    pretrain("--train_file", str(train), "--output_dir", str(whole), "--max_steps", "8", "--dropout", "0.2", *COMMON)
    pretrain("--train_file", str(train), "--output_dir", str(parted), "--max_steps", "4", "--dropout", "0.2", *COMMON)
    assert (parted / "checkpoints" / "step-00000004").is_dir()
    pretrain("--train_file", str(train), "--output_dir", str(parted), "--max_steps", "8", "--dropout", "0.2",
             "--resume_from_checkpoint", "latest", *COMMON)
    expected, got = losses(whole), losses(parted)
    for step in range(5, 9):
        assert_close(got[step], expected[step], RESUMED, what=f"loss of step {step}")


@pytest.mark.slow
def test_ctrl_c_keeps_a_checkpoint_and_the_run_resumes_from_it(corpus, tmp_path):
    """SIGINT during training: a checkpoint of the step reached, one line saying so and how to go on, exit 130."""
    train, _ = corpus
    out = tmp_path / "out"
    code, stderr = interrupt_after_first_checkpoint("--train_file", str(train), "--output_dir", str(out), *COMMON,
                                                    signum=signal.SIGINT)
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    step = saved_step(out)
    last = stderr.strip().splitlines()[-1]
    assert "interrupted (SIGINT): the checkpoint of step" in last and f"step-{step:08d}" in last, stderr[-3000:]
    assert "--resume_from_checkpoint latest" in last
    assert not list((out / "checkpoints").glob(".tmp-*"))  # nothing half-written
    assert max(losses(out)) == step  # the checkpoint holds the last step trained
    pretrain("--train_file", str(train), "--output_dir", str(out), "--max_steps", str(step + 2),
             "--resume_from_checkpoint", "latest", *COMMON)
    assert json.loads((out / "train_results.json").read_text())["steps"] == step + 2


@pytest.mark.slow
def test_two_processes_stop_together_and_resume_as_if_never_stopped(corpus, tmp_path):
    """Two processes (torchrun, gloo): Ctrl-C stops both at one step, after a checkpoint; the resumed run's losses
    and final parameters are those of a run that was never stopped (so the saved state was restored: optimizer,
    RNG states of both processes, data position, LSTM states)."""
    train, valid = corpus
    parted, whole = tmp_path / "parted", tmp_path / "whole"
    ddp = [*COMMON, "--ddp_timeout", "120", "--dropout", "0.2"]  # a process stuck on its peer fails, not hangs
    _, stderr = interrupt_after_first_checkpoint("--train_file", str(train), "--output_dir", str(parted), *ddp,
                                                 signum=signal.SIGINT, launcher=TORCHRUN)
    step = saved_step(parted)
    assert f"interrupted (SIGINT): the checkpoint of step {step} is kept" in stderr, stderr[-3000:]
    assert stderr.count("interrupted (SIGINT)") == 1  # said once, by the first process
    assert f'File "{REPO / "train"}' not in stderr  # torchrun prints its own traceback; the workers none
    assert not list((parted / "checkpoints").glob(".tmp-*"))
    assert {p.name for p in (parted / "checkpoints" / f"step-{step:08d}").glob("progress_rank*.pt")} == {
        "progress_rank0.pt", "progress_rank1.pt"}
    end = step + 3
    pretrain("--train_file", str(train), "--validation_file", str(valid), "--output_dir", str(parted),
             "--max_steps", str(end), "--resume_from_checkpoint", "latest", *ddp, launcher=TORCHRUN)
    pretrain("--train_file", str(train), "--validation_file", str(valid), "--output_dir", str(whole),
             "--max_steps", str(end), *ddp, launcher=TORCHRUN)
    summary = json.loads((parted / "train_results.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == end
    assert summary["parameters_identical_across_processes"] is True
    assert summary["tokens_seen"] == end * 2 * 4 * 8  # steps x processes x rows x window
    expected, got = losses(whole), losses(parted)
    for resumed_step in range(step + 1, end + 1):
        assert_close(got[resumed_step], expected[resumed_step], RESUMED, what=f"loss of step {resumed_step}")
    ours, theirs = parameters(parted), parameters(whole)
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert_close(ours[name], theirs[name], RESUMED, what=name)
    evaluated, expected_eval = (json.loads((out / "eval_results.json").read_text()) for out in (parted, whole))
    assert evaluated.keys() == expected_eval.keys()
    for key in expected_eval:
        assert_close(evaluated[key], expected_eval[key], RESUMED, what=f"eval_results.json: {key}")


@pytest.mark.slow
def test_sigterm_before_the_first_checkpoint_leaves_nothing(corpus, tmp_path):
    """SIGTERM (a scheduler's stop) during the set-up: exit 143, one line, the output folder never made."""
    train, _ = corpus
    out = tmp_path / "out"
    command = [ELMO_PRETRAIN, "--train_file", str(train), "--output_dir", str(out), *COMMON, "--max_steps", "5"]
    env = {**clean_env(), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    first = process.stderr.readline()  # the set-up's first line: the vocabulary it built, before the output folder
    assert "a vocabulary of" in first, first + process.communicate()[1][-3000:]
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    stderr = first + stderr
    assert process.returncode == 143 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].endswith(
        f"interrupted (SIGTERM) before the first checkpoint of {out}: nothing was kept; run the same command to "
        "start again"), stderr[-3000:]
    assert not out.exists()


@pytest.mark.slow
def test_encoding_gbk_corpus(tmp_path):
    """A GBK file: refused under the default utf-8 (one line naming file, line and byte; exit 2; no folder), trained
    on with --encoding gbk (its words, not U+FFFD, in the vocabulary)."""
    from elmo_hf.train.pretrain_args import PretrainArguments
    from elmo_hf.train.pretrain_run import train

    rng = random.Random(0)
    corpus = tmp_path / "train.txt"
    corpus.write_bytes("".join(f"{rng.choice(['我们', '他们'])} 在 {rng.choice(['银行', '河边'])} 散步 。\n"
                               for _ in range(100)).encode("gbk"))
    out = tmp_path / "out"
    result = pretrain("--train_file", str(corpus), "--output_dir", str(out), "--max_steps", "2", *COMMON, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    first_byte = corpus.read_bytes()[0]
    assert result.stderr.strip().splitlines()[-1].endswith(
        f"{corpus}: line 1, byte 1 of the line (0x{first_byte:02x}) is not valid utf-8; the file reads as gb18030: "
        "--encoding gb18030"), result.stderr
    assert not out.exists()
    train(PretrainArguments(train_file=[str(corpus)], output_dir=str(out), max_steps=2, encoding="gbk", preset="tiny",
                            per_device_batch_size=4, unroll_steps=8, report_to="none", disable_tqdm=True))
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert {"我们", "银行", "散步"} <= set(vocab) and not any("\ufffd" in word for word in vocab)


@pytest.mark.slow
@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing", "no file matches"),
        ("empty", "holds no words"),
        ("tiny_corpus", "no full batch"),
        ("bad_vocab", "lacks the line"),
        ("nan", "non-finite loss"),
    ],
)
def test_bad_input_gives_a_clear_error(tmp_path, setup, message):
    train = tmp_path / "train.txt"
    extra: list[str] = []
    if setup == "empty":
        train.write_text("\n   \n")
    elif setup == "tiny_corpus":
        train.write_text("a b c\n")
    elif setup != "missing":
        write_corpus(train, 200, 4)
    if setup == "bad_vocab":
        (tmp_path / "vocab.txt").write_text("the\ncat\n")
        extra = ["--vocab_file", str(tmp_path / "vocab.txt")]
    if setup == "nan":
        extra = ["--learning_rate", "1e30", "--max_grad_norm", "0", "--optimizer", "adamw"]
    out = tmp_path / "out"
    result = pretrain("--train_file", str(train), "--output_dir", str(out), "--max_steps", "30", *COMMON, *extra,
                      check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]  # bad input, one line
    assert message in result.stderr.strip().splitlines()[-1], result.stderr[-3000:]
    if setup == "nan":
        assert "at step" in result.stderr
    assert not (out / "model.safetensors").exists()


@pytest.mark.slow
def test_refuses_to_overwrite_an_output_folder(corpus, tmp_path):
    train, _ = corpus
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    result = pretrain("--train_file", str(train), "--output_dir", str(out), "--max_steps", "2", *COMMON, check=False)
    assert result.returncode == 2 and "--overwrite_output_dir" in result.stderr
    assert (out / "precious.txt").read_text() == "keep me"
    assert os.listdir(out) == ["precious.txt"]


@pytest.mark.slow
def test_continue_training_a_feature_model_with_a_new_softmax(corpus, tmp_path, tiny_model_dir):
    """A saved model without a softmax (as converted published weights): --init_from loads it as every command does
    and starts a softmax from the model's own layer-0 vectors of the vocabulary, saying so in one line."""
    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    train, valid = corpus
    out = tmp_path / "continued"
    result = pretrain("--train_file", str(train), "--validation_file", str(valid), "--output_dir", str(out),
                      "--init_from", str(tiny_model_dir), "--max_steps", "0", "--num_train_epochs", "1",
                      "--learning_rate", "0", *[a for a in COMMON if a not in ("--preset", "tiny")])
    vocabulary = ElmoTokenizer.from_pretrained(out).word_vocab
    assert (f"INFO elmo-pretrain: {tiny_model_dir} has no softmax for this vocabulary: initialised one from the "
            f"layer-0 vectors of the {len(vocabulary)} vocabulary words") in result.stderr
    assert "WARNING" not in result.stderr  # no load report of the missing softmax
    from transformers import AutoModelForPreTraining

    lm = AutoModelForPreTraining.from_pretrained(out).eval()
    base = ElmoModel.from_pretrained(tiny_model_dir).eval()
    assert json.loads((out / "train_results.json").read_text())["steps"] > 0
    for name, tensor in base.state_dict().items():  # learning rate 0: the weights it started from
        assert torch.equal(lm.elmo.state_dict()[name], tensor), name
    rows = torch.tensor(ElmoTokenizer.from_pretrained(out).convert_tokens_to_char_ids(vocabulary))
    with torch.no_grad():
        assert_close(lm.softmax.weight, base.char_encoder(rows), REORDERED, what="softmax from the layer-0 vectors")


def manylangs_folder(folder: Path, *, words: bool) -> Path:
    """A tiny ELMoForManyLangs-layout model (characters through its own dictionary; a word embedding if `words`)
    with its tokenizer, as `convert_elmoformanylangs` writes one."""
    from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel
    from elmo_hf.tokenization import ElmoManyLangsTokenizer

    chars = {c: i for i, c in enumerate(
        ["<bow>", "<eow>", "<oov>", "<pad>", "<bos>", "<eos>", *"abcdefghijklmnopqrstuvwxyz."])}
    dictionary = {w: i for i, w in enumerate(["<oov>", "<pad>", "the", "cat", "sat"])} if words else None
    config = ElmoConfig(token_encoder="word_char", char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8]],
                        num_highway_layers=1, max_characters_per_token=12, char_vocab_size=len(chars) + 1,
                        word_input_vocab_size=len(dictionary) + 1 if words else 0,
                        word_input_embedding_dim=4 if words else 0, projection_dim=8, cell_size=16, num_layers=1,
                        vocab_size=0)
    torch.manual_seed(0)
    ElmoModel(config).save_pretrained(folder)
    ElmoManyLangsTokenizer(char_dictionary=chars, word_dictionary=dictionary,
                           max_characters_per_token=12).save_pretrained(folder)
    return folder


@pytest.fixture
def pretrain_in_process():
    """`elmo_hf.train.pretrain_run.train` in this process, with Accelerate's process-wide state reset after it."""
    from accelerate.state import AcceleratorState

    from elmo_hf.train.pretrain_args import PretrainArguments
    from elmo_hf.train.pretrain_run import train

    yield lambda **fields: train(PretrainArguments(**{
        "per_device_batch_size": 4, "unroll_steps": 8, "report_to": "none", "disable_tqdm": True, **fields}))
    AcceleratorState._reset_state(reset_partial_state=True)


def test_continue_an_elmoformanylangs_model_reading_characters(corpus, tmp_path, pretrain_in_process):
    """A converted ELMoForManyLangs model (its own character dictionary, 12 characters a word, `<bos>`/`<eos>`):
    the rows fed to it and to its new softmax are its tokenizer's; the folder keeps that tokenizer."""
    from elmo_hf.modeling_elmo import ElmoForPreTraining, ElmoModel
    from elmo_hf.tokenization import ElmoManyLangsTokenizer

    base = manylangs_folder(tmp_path / "manylangs", words=False)
    out = tmp_path / "out"
    pretrain_in_process(train_file=[str(corpus[0])], output_dir=str(out), init_from=str(base), max_steps=2,
                        learning_rate=0.0, batch_mode="sentence", unroll_steps=16)
    tokenizer = ElmoManyLangsTokenizer.from_pretrained(out)
    assert tokenizer.row_width == 12 and tokenizer.word_vocab[:3] == ["<S>", "</S>", "<UNK>"]
    lm = ElmoForPreTraining.from_pretrained(out).eval()
    rows = torch.tensor([*tokenizer.sentence_boundary_rows,  # <S> and </S> are fed as the model's <bos> and <eos>
                         *tokenizer.convert_tokens_to_char_ids(tokenizer.word_vocab[2:])])
    with torch.no_grad():
        expected = ElmoModel.from_pretrained(base).eval().char_encoder(rows)
    assert_close(lm.softmax.weight, expected, REORDERED, what="softmax from the layer-0 vectors")


def test_a_model_reading_words_is_refused(corpus, tmp_path, pretrain_in_process):
    base = manylangs_folder(tmp_path / "manylangs", words=True)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"reads words through its own input dictionary \(5 words\)") as error:
        pretrain_in_process(train_file=[str(corpus[0])], output_dir=str(out), init_from=str(base), max_steps=2)
    assert "\n" not in str(error.value) and str(base) in str(error.value)
    assert not out.exists()


@pytest.mark.slow
def test_init_from_with_an_hdf5_softmax(corpus, tmp_path):
    h5py = pytest.importorskip("h5py")
    from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel
    from elmo_hf.tokenization import build_vocab, write_vocab

    train, _ = corpus
    ElmoModel(ElmoConfig.from_preset("tiny")).save_pretrained(tmp_path / "base")
    words = build_vocab([train], split="whitespace")
    write_vocab(words, tmp_path / "vocab.txt")
    weight = torch.randn(len(words), 16)
    bias = torch.randn(len(words))
    with h5py.File(tmp_path / "softmax.hdf5", "w") as handle:
        handle["softmax/W"] = weight.numpy()
        handle["softmax/b"] = bias.numpy()
    out = tmp_path / "continued"
    pretrain("--train_file", str(train), "--output_dir", str(out), "--init_from", str(tmp_path / "base"),
             "--vocab_file", str(tmp_path / "vocab.txt"), "--softmax_weight_file", str(tmp_path / "softmax.hdf5"),
             "--max_steps", "1", "--learning_rate", "0", *[a for a in COMMON if a not in ("--preset", "tiny")])
    from transformers import AutoModelForPreTraining

    lm = AutoModelForPreTraining.from_pretrained(out)
    assert torch.equal(lm.softmax.weight, weight) and torch.equal(lm.softmax.bias, bias)  # read, learning rate 0
    bad = tmp_path / "bad.hdf5"
    with h5py.File(bad, "w") as handle:
        handle["softmax/W"] = weight[:5].numpy()
        handle["softmax/b"] = bias[:5].numpy()
    result = pretrain("--train_file", str(train), "--output_dir", str(tmp_path / "bad_out"), "--init_from",
                      str(tmp_path / "base"), "--vocab_file", str(tmp_path / "vocab.txt"), "--softmax_weight_file",
                      str(bad), "--max_steps", "1", *[a for a in COMMON if a not in ("--preset", "tiny")], check=False)
    assert result.returncode == 2 and "softmax/W" in result.stderr and "shape" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("folder_state", ["absent", "empty"])
@pytest.mark.parametrize(
    "setup, message",
    [("bad_preset", "--preset must be one of"), ("empty", "holds no words"), ("tiny_corpus", "no full batch")],
)
def test_a_failed_run_leaves_the_output_folder_as_it_found_it(corpus, tmp_path, setup, message, folder_state):
    """Errors found before the first checkpoint write nothing that would refuse the corrected rerun."""
    train = tmp_path / "train.txt"
    args = list(COMMON)
    if setup == "bad_preset":
        write_corpus(train, 200, 4)
        args[args.index("tiny")] = "huge"
    elif setup == "empty":
        train.write_text("\n   \n")
    else:
        train.write_text("a b c\n")
    out = tmp_path / "out"
    if folder_state == "empty":
        out.mkdir()
    result = pretrain("--train_file", str(train), "--output_dir", str(out), "--max_steps", "2", *args, check=False)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    if folder_state == "absent":
        assert not out.exists()
    else:
        assert os.listdir(out) == []
    if setup == "tiny_corpus" and folder_state == "empty":  # the corrected command runs in the same folder
        pretrain("--train_file", str(corpus[0]), "--output_dir", str(out), "--max_steps", "2", *COMMON)
        assert (out / "model.safetensors").exists()


@pytest.mark.slow
def test_a_run_that_fails_after_a_checkpoint_keeps_it(corpus, tmp_path):
    """Once a checkpoint is written, a later failure keeps the folder: the run resumes from it."""
    train, valid = corpus
    tiny_valid = tmp_path / "valid.txt"
    tiny_valid.write_text("a b\n")  # too short for one evaluation batch: fails at the end, after step 2's checkpoint
    out = tmp_path / "out"
    result = pretrain("--train_file", str(train), "--validation_file", str(tiny_valid), "--output_dir", str(out),
                      "--max_steps", "2", "--save_steps", "2", *COMMON, check=False)
    assert result.returncode == 2 and "gave no batch" in result.stderr, result.stderr[-3000:]
    assert (out / "checkpoints" / "step-00000002").is_dir() and (out / "vocab.txt").exists()


@pytest.mark.slow
def test_word_split_jieba_trains_on_chinese_words(tmp_path):
    """`--word_split jieba`: the vocabulary holds jieba's words (not single characters), and the saved tokenizer
    splits raw text the same way."""
    pytest.importorskip("jieba", reason="jieba is the optional extra elmo-hf[zh]")
    rng = random.Random(0)
    subjects, places, verbs = ["我们", "他们", "老师"], ["银行", "河边", "学校"], ["散步", "存钱", "看书"]
    train = tmp_path / "train.txt"
    train.write_text("".join(f"{rng.choice(subjects)}在{rng.choice(places)}{rng.choice(verbs)}。\n"
                             for _ in range(200)), encoding="utf-8")
    out = tmp_path / "out"
    pretrain("--train_file", str(train), "--output_dir", str(out), "--max_steps", "3", "--word_split", "jieba",
             *COMMON)
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert {"我们", "银行", "散步"} <= set(vocab) and "银" not in vocab
    assert json.loads((out / "tokenizer_config.json").read_text())["word_split"] == "jieba"

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.tokenize("老师在学校看书。") == ["老师", "在", "学校", "看书", "。"]


@pytest.mark.slow
def test_push_uploads_the_model_not_the_training_state(corpus, tmp_path, monkeypatch):
    """--push_to_hub and push_folder on a pretraining folder: model, tokenizer, card and code; no checkpoints/,
    optimizer or RNG states, no logs."""
    import huggingface_hub.constants
    from hub_server import HubServer

    from elmo_hf.tools.hub.hub_push import push_folder

    token = "hf_test_token_for_the_local_hub"
    train, _ = corpus
    out = tmp_path / "out"
    env = {k: v for k, v in clean_env().items() if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_"))}
    with HubServer(tmp_path / "hub", token=token) as hub:
        env.update(HF_ENDPOINT=hub.url, HF_TOKEN=token, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_XET="1",
                   HF_HUB_DISABLE_TELEMETRY="1", PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
        command = [ELMO_PRETRAIN, "--train_file", str(train), "--output_dir", str(out),
                   "--max_steps", "2", "--save_steps", "1", *COMMON, "--push_to_hub", "--hub_model_id", "org/run"]
        result = run_command(command, cwd=REPO, env=env, timeout=300)
        assert result.returncode == 0, result.stderr[-4000:]
        assert (out / "checkpoints" / "step-00000002" / "progress_rank0.pt").exists()
        assert (out / "train_log.jsonl").exists()
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)  # the local hub has no Xet
        push_folder(out, "org/recipe", token=token, endpoint=hub.url)  # the README's recipe
        for repo in ("org/run", "org/recipe"):
            files = hub.files(repo)
            assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "README.md",
                    "modeling_elmo.py"} <= set(files), files
            assert not [f for f in files if f.startswith(("checkpoints/", "logs/")) or f == "train_log.jsonl"], files


def test_arguments_read_as_hf_argument_parser_reads_them(tmp_path):
    """The dataclass parser behind the fast --help: lists, optional values, flags with or without a value, dashes,
    a JSON file; unknown or missing JSON fields in one line."""
    from elmo_hf.tools.core.arguments import parse_options as parse_dataclass
    from elmo_hf.train.pretrain_args import PretrainArguments

    args = parse_dataclass(PretrainArguments,
                           ["--train_file", "a.txt", "b.txt", "--output-dir", "out", "--disable_tqdm",
                                               "--verbose", "false", "--dropout", "0.25", "--encoding", "GBK"])
    assert args.train_file == ["a.txt", "b.txt"] and args.output_dir == "out" and args.dropout == 0.25
    assert args.disable_tqdm is True and args.verbose is False and args.validation_file is None
    assert (args.encoding == "gbk" and args.preset == "small" and args.learning_rate == 3e-3
            and args.optimizer == "adamw")
    (tmp_path / "args.json").write_text(json.dumps({"train_file": ["a.txt"], "output_dir": "out", "max_steps": 3}))
    assert parse_dataclass(PretrainArguments, [str(tmp_path / "args.json")]).max_steps == 3
    (tmp_path / "bad.json").write_text(json.dumps({"train_file": ["a.txt"], "max_step": 3}))
    with pytest.raises(ValueError, match=r"unknown fields \['max_step'\]; missing fields \['output_dir'\]"):
        parse_dataclass(PretrainArguments, [str(tmp_path / "bad.json")])
    with pytest.raises(ValueError, match="--encoding: unknown encoding 'klingon'"):
        parse_dataclass(PretrainArguments, ["--train_file", "a.txt", "--output_dir", "o", "--encoding", "klingon"])


def test_a_vocabulary_of_unsegmented_chinese_is_warned_about(caplog):
    """Chinese split on spaces keeps sentences as words: one warning naming the splits that segment it."""
    from elmo_hf.train.pretrain_run import warn_if_unsegmented

    warn_if_unsegmented(["<S>", "</S>", "<UNK>", "我爱北京天安门。", "今天天气很好啊", "北京"], "whitespace")
    assert "2 of the 6 words" in caplog.text and "--word_split whitespace does not segment" in caplog.text
    caplog.clear()
    warn_if_unsegmented(["<S>", "</S>", "<UNK>", "北京", "天安门", "我", "the", "bank"], "jieba")
    assert not caplog.text


def test_resume_auto_is_latest_when_there_is_a_checkpoint(tmp_path):
    """`--resume_from_checkpoint auto`, the one command line a launcher can restart as it is: a fresh start in a
    folder without a checkpoint (an unfinished `.tmp-*` one does not count), the newest checkpoint once there is one."""
    from elmo_hf.train.checkpoints import resolved_resume
    from elmo_hf.train.pretrain_args import PretrainArguments

    def resolved(value):
        args = PretrainArguments(train_file=["a.txt"], output_dir=str(tmp_path), resume_from_checkpoint=value)
        return resolved_resume(args)

    assert resolved("auto") is None
    (tmp_path / "checkpoints" / ".tmp-step-00000002").mkdir(parents=True)
    assert resolved("auto") is None
    (tmp_path / "checkpoints" / "step-00000002").mkdir()
    assert resolved("auto") == "latest"
    assert resolved(None) is None and resolved("latest") == "latest" and resolved("some/folder") == "some/folder"


def test_resume_auto_without_a_checkpoint_in_a_used_folder(tmp_path):
    """What an attempt killed before its first checkpoint leaves (its vocabulary) is refused in one line, as any
    folder in use; --overwrite_output_dir lets `auto` start afresh there, and is not needed once there is a
    checkpoint (which it then never deletes: the run resumes)."""
    from dataclasses import replace

    from elmo_hf.train.checkpoints import resolved_resume
    from elmo_hf.train.pretrain_args import PretrainArguments
    from elmo_hf.train.pretrain_run import check_output_dir

    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\n")

    def check(**fields):
        given = PretrainArguments(train_file=["a.txt"], output_dir=str(tmp_path), resume_from_checkpoint="auto",
                                  **fields)
        args = replace(given, resume_from_checkpoint=resolved_resume(given))
        check_output_dir(args, auto=True)
        return args.resume_from_checkpoint

    with pytest.raises(InputError, match="holds no checkpoint for --resume_from_checkpoint auto; add "
                                         "--overwrite_output_dir") as error:
        check()
    assert "\n" not in str(error.value)
    assert check(overwrite_output_dir=True) is None
    (tmp_path / "checkpoints" / "step-00000002").mkdir(parents=True)
    assert check() == "latest" and check(overwrite_output_dir=True) == "latest"


def test_a_resumed_run_drops_the_log_lines_after_its_checkpoint(tmp_path):
    """The stopped run logged steps 4 and 5 after its checkpoint of step 3 (and was killed halfway through a line):
    the resumed run keeps steps 1-3 and logs 4 and 5 again, once."""
    from elmo_hf.train.checkpoints import drop_log_lines_after

    log = tmp_path / "train_log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in range(1, 6)) + '{"step": 6, "lo')
    drop_log_lines_after(log, 3)
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2, 3]
    drop_log_lines_after(tmp_path / "absent.jsonl", 3)  # a run that logged nothing yet
    assert not (tmp_path / "absent.jsonl").exists()
