"""`elmo-embed` end to end: the command in subprocesses on a tiny model saved to a temporary folder.

Layout and values (against the model run sentence by sentence), --top/--average, Parquet, independence from the
batch size, resumption after a kill, streaming in windows (what keeps memory flat with corpus size; the memory itself
is measured by benchmarks/bench_embed_memory.py), bad inputs, `datasets` inputs, bfloat16, two processes under
torchrun, and the feature-extraction pipeline.

The command's vectors are compared with the model's own forward (one sentence at a time) to REORDERED
(tests/tolerances.py): the same float32 arithmetic in batches of other shapes, in another process. Where the command
promises the same bits (a resumed run without the token cache against an uninterrupted one, on the same threads and
CPU), the comparison is exact.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import REPO, _descendants, clean_env, cli, run_cli, run_command
from tolerances import REORDERED, assert_close

from elmo_hf.modeling_elmo import ElmoModel
from elmo_hf.tokenization import ElmoTokenizer, split_words
from elmo_hf.tools.core.arguments import parse_options
from elmo_hf.tools.embedding import embed as embed_module
from elmo_hf.tools.embedding.embed_io import done_windows
from elmo_hf.tools.embedding.embed_plan import EmbedOptions

SENTENCES = [
    "The cat sat on the mat .",
    "",
    "A much longer sentence , with punctuation , numbers like 3.14 and words repeated : the the the .",
    "   ",
    "Ünïcödé wörds — and emoji 🙂 too",
    "one",
    "The cat sat on the mat .",
    "Short line",
    "x " * 25,
    "Deep contextualized word representations model both complex characteristics of word use .",
]


def write_corpus(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def generated_lines(count: int, seed: int = 0, max_words: int = 15) -> list[str]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(3000)] + ["the", ",", ".", "of", "and"]
    return [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, max_words))) for _ in range(count)]


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="module")
def reference(model_dir):
    """The model run on one sentence at a time: words -> (L + 1, n, 2P) without <S> and </S>."""
    model = ElmoModel.from_pretrained(model_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)

    def layers(words: list[str]) -> np.ndarray:
        if not words:
            return np.zeros((3, 0, 32), dtype=np.float32)
        batch = tokenizer([words], is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            out = model(**batch, output_hidden_states=True)
        return torch.stack(out.hidden_states)[:, 0, 1:-1].numpy()

    return layers


def run_embed(*args, check: bool = True) -> subprocess.CompletedProcess:
    """`elmo-embed ARGS --threads 1 --quiet` through its frame in this process, from the repository root."""
    result = run_cli("elmo-embed", [*args, "--threads", "1", "--quiet"], cwd=REPO)
    if check and result.returncode != 0:
        raise AssertionError(f"elmo-embed failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


ELMO_EMBED = str(Path(sys.executable).parent / "elmo-embed")  # the installed script, where its process is tested


def read_hdf5(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as handle:
        return {name: handle[name][()] for name in handle}


def read_tokens(path: Path) -> dict[str, list[str]]:
    """The words stored with each line's vectors."""
    with h5py.File(path, "r") as handle:
        return {name: list(handle[name].attrs["tokens"]) for name in handle}


# --------------------------------------------------------------------------------------------------
# Layout and values
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_hdf5_layout_and_values_all_top_average(model_dir, reference, tmp_path):
    """--all through the real command; --top and --average, the same path with another mode, through `main` here."""
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES)
    outputs = {}
    for mode in ("all", "top", "average"):
        out = tmp_path / f"{mode}.hdf5"
        args = (corpus, out, "--model", model_dir, f"--{mode}", "--batch_size", "3", "--window", "4")
        if mode == "all":
            assert f"wrote {out}" in run_embed(*args).stderr
        else:
            assert embed_main(*args) == 0
        outputs[mode] = read_hdf5(out)
        assert sorted(outputs[mode], key=int) == [str(i) for i in range(len(SENTENCES))]
    tokens = read_tokens(tmp_path / "all.hdf5")
    for i, line in enumerate(SENTENCES):
        expected = reference(line.split())
        assert tokens[str(i)] == line.split()  # the tokenizer's split (punctuation) of tokenized text
        got = outputs["all"][str(i)]
        assert got.dtype == np.float32 and got.shape == expected.shape == (3, len(line.split()), 32)
        assert_close(got, expected, REORDERED, what=f"--all, line {i}")
        assert outputs["top"][str(i)].shape == expected.shape[1:]
        assert_close(outputs["top"][str(i)], expected[-1], REORDERED, what=f"--top, line {i}")
        assert_close(outputs["average"][str(i)], expected.mean(0), REORDERED, what=f"--average, line {i}")
    assert outputs["all"]["1"].shape == (3, 0, 32) and outputs["top"]["3"].shape == (0, 32)  # empty lines
    with h5py.File(tmp_path / "all.hdf5", "r") as handle:
        assert handle.attrs["mode"] == "all" and int(handle.attrs["lines"]) == len(SENTENCES)
    assert not (tmp_path / "all.hdf5.partial").exists()


@pytest.mark.slow
def test_parquet_output_and_datasets(model_dir, reference, tmp_path):
    import datasets

    corpus = write_corpus(tmp_path / "in.txt", SENTENCES)
    for mode in ("top", "all"):  # --top through `main` here, --all through the real command
        out = tmp_path / f"{mode}.parquet"
        args = (corpus, out, "--model", model_dir, f"--{mode}", "--batch_size", "4")
        if mode == "all":
            run_embed(*args)
        else:
            assert embed_main(*args) == 0
        table = datasets.Dataset.from_parquet(str(out))
        assert sorted(table["line"]) == list(range(len(SENTENCES)))  # rows in any order, keyed by line
        for row in table:
            words = SENTENCES[row["line"]].split()
            assert row["tokens"] == words
            expected = reference(words)
            expected = expected if mode == "all" else expected[-1]
            if not words:  # an empty line: no vectors (three empty layers with --all)
                assert row["embedding"] == ([[], [], []] if mode == "all" else [])
                continue
            got = np.asarray(row["embedding"], dtype=np.float32)
            assert_close(got, expected, REORDERED, what=f"Parquet --{mode}, line {row['line']}")


@pytest.mark.slow
def test_output_does_not_depend_on_batch_size(model_dir, tmp_path):
    """Through `main` in this process: what is proven is the batches', whichever process runs them."""
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES + generated_lines(150, seed=1))
    one = tmp_path / "one.hdf5"
    many = tmp_path / "many.hdf5"
    assert embed_main(corpus, one, "--model", model_dir, "--batch_size", "1") == 0
    assert embed_main(corpus, many, "--model", model_dir, "--batch_size", "64", "--batch_tokens", "100000") == 0
    a, b = read_hdf5(one), read_hdf5(many)
    assert a.keys() == b.keys()
    for k in a:
        assert_close(b[k], a[k], REORDERED, what=f"batches of 64 against batches of 1, line {k}")


# --------------------------------------------------------------------------------------------------
# Interruption and resumption
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_resume_after_kill_equals_uninterrupted_run(model_dir, tmp_path, caplog):
    """Without the token cache a resumed run is bit-identical to an uninterrupted one (the same windows give the
    same batches); with it, a token's layer 0 may come from an earlier batch, equal to rounding (REORDERED). The
    killed runs are the real command (SIGKILL ends a process); the uninterrupted and the resumed runs are `main` in
    this process, on the same one thread."""
    lines = generated_lines(600, seed=2)  # 12 windows of 50: the kills below land with windows left to do
    corpus = write_corpus(tmp_path / "in.txt", lines)
    whole = tmp_path / "whole.hdf5"
    no_cache = ("--token_cache_size", "0")
    assert embed_main(corpus, whole, "--model", model_dir, "--window", "50", *no_cache) == 0
    expected = read_hdf5(whole)

    # 1. killed (SIGKILL) while writing its third chunk, on demand
    out = tmp_path / "out.hdf5"
    partial = tmp_path / "out.hdf5.partial"
    killed = run_command([ELMO_EMBED, corpus, out, "--model", model_dir, "--window", "50", "--debug_kill_after_chunks",
                          "2", *no_cache, "--threads", "1", "--quiet"], cwd=REPO, env=clean_env(), timeout=300)
    assert killed.returncode == -signal.SIGKILL
    assert not out.exists()
    assert len(list(partial.glob("chunk-*.h5"))) == 2 and list(partial.glob("*.tmp"))
    assert embed_main(corpus, out, "--model", model_dir, "--window", "50") == 2  # needs --resume (or --overwrite)
    assert "--resume" in caplog.text
    assert embed_main(corpus, out, "--model", model_dir, "--window", "25", "--resume") == 2  # other settings
    assert "window" in caplog.text
    caplog.set_level(logging.INFO)
    caplog.clear()
    assert embed_main(corpus, out, "--model", model_dir, "--window", "50", "--resume", *no_cache) == 0
    assert "resuming: 2 window(s)" in caplog.text
    got = read_hdf5(out)
    assert got.keys() == expected.keys() and all(np.array_equal(got[k], expected[k]) for k in expected)
    assert read_tokens(out) == {str(i): line.split() for i, line in enumerate(lines)}  # the words kept too
    assert not partial.exists()

    # 2. killed from outside at an arbitrary moment after its first chunk was complete; the batches slowed down, so that
    # the windows left take seconds and a test process the machine's load keeps waiting still kills a running command
    out.unlink()
    command = [ELMO_EMBED, str(corpus), str(out), "--model", str(model_dir), "--window", "50", "--threads", "1",
               "--debug_batch_delay", "0.1", "--quiet"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(partial.glob("chunk-*.h5")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL and not out.exists()  # killed before the end
    assert 1 <= len(list(partial.glob("chunk-*.h5"))) < 12
    caplog.clear()
    assert embed_main(corpus, out, "--model", model_dir, "--window", "50", "--resume") == 0
    assert "resuming:" in caplog.text
    got = read_hdf5(out)
    assert got.keys() == expected.keys()
    for k in expected:
        assert_close(got[k], expected[k], REORDERED, what=f"resumed with the token cache, line {k}")


def _parts(partial: Path) -> list[Path]:
    return sorted(partial.glob("chunk-*-part*.h5"))


@pytest.mark.slow
def test_sigint_commits_what_is_done_and_resume_completes_it(model_dir, tmp_path):
    """The real command, signalled in the middle of its one window (parts committed every 0.1 s, batches slowed
    down on demand): one line saying what was kept and --resume, exit 130, no traceback; then --resume finishes
    and equals the uninterrupted run, bit for bit."""
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES + generated_lines(50, seed=5))
    common = ["--model", model_dir, "--window", "100000", "--batch_size", "2", "--token_cache_size", "0"]
    whole = tmp_path / "whole.hdf5"
    assert embed_main(corpus, whole, *common) == 0
    out = tmp_path / "out.hdf5"
    partial = out.with_name(out.name + ".partial")
    command = [ELMO_EMBED, str(corpus), str(out), *map(str, common), "--commit_seconds", "0.1", "--debug_batch_delay",
               "0.05", "--threads", "1", "--quiet"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(partial.glob("chunk-*-part*.h5")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=120)[1]
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and "SIGINT" in lines[0] and "--resume" in lines[0] and str(partial) in lines[0], stderr
    assert not out.exists() and list(partial.glob("chunk-*-part*.h5"))  # what was done is kept
    assert embed_main(corpus, out, *common, "--resume") == 0
    got, expected = read_hdf5(out), read_hdf5(whole)
    assert got.keys() == expected.keys() and all(np.array_equal(got[k], expected[k]) for k in expected)
    assert not partial.exists()


def test_sigterm_mid_window_keeps_its_parts_and_resume_skips_them(model_dir, tmp_path, monkeypatch, caplog):
    """In-process, Parquet: a SIGTERM sent to this process after three batches of a window (every batch committed)
    ends `main` with 143 and the parts kept; --resume runs only the batches whose lines are not done and gives the
    rows of an uninterrupted run."""
    import pyarrow.parquet as pq

    lines = SENTENCES + generated_lines(40, seed=6)
    corpus = write_corpus(tmp_path / "in.txt", lines)
    common = ["--model", model_dir, "--window", "1000", "--batch_size", "4", "--token_cache_size", "0"]
    whole, out = tmp_path / "whole.parquet", tmp_path / "out.parquet"
    assert embed_main(corpus, whole, *common) == 0
    real_call, calls = embed_module.Embedder.__call__, []

    def counted(self, sentences):
        calls.append(len(sentences))
        if stop_after and len(calls) > stop_after:
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the guard `main` installs
        return real_call(self, sentences)

    monkeypatch.setattr(embed_module.Embedder, "__call__", counted)
    stop_after = 3
    assert embed_main(corpus, out, *common, "--commit_seconds", "1e-9") == 143
    assert "interrupted (SIGTERM)" in caplog.text and "--resume" in caplog.text
    partial = out.with_name(out.name + ".partial")
    assert len(list(partial.glob("chunk-*-part*.parquet"))) >= 3
    stop_after, batches = None, len(calls)
    calls.clear()
    kept = set().union(*(set(pq.read_table(part, columns=["line"])["line"].to_pylist())
                         for part in partial.glob("chunk-*-part*.parquet")))
    caplog.set_level(logging.INFO)
    assert embed_main(corpus, out, *common, "--resume") == 0
    assert f"{len(lines) - len(kept)} lines embedded in this run" in caplog.text  # not those kept by the parts
    total = -(-sum(1 for line in lines if line.split()) // 4)  # batches of 4 non-empty lines
    assert len(calls) <= total - (batches - 1)  # the batches committed are not run again

    def rows(path):
        return sorted((row["line"], row["tokens"], row["embedding"]) for row in pq.read_table(path).to_pylist())

    assert rows(out) == rows(whole)


# --------------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------------

def test_command_streams_in_windows(model_dir, tmp_path, monkeypatch):
    """Memory does not grow with the corpus: the command reads a window of lines, embeds it, writes it to disk as a
    complete chunk, and only then reads on. Checked here as the order of events (no line beyond the window embedded
    has been read; every earlier window is a complete chunk file); the peak memory itself against corpus size is
    measured by benchmarks/bench_embed_memory.py (results_embed_memory.md)."""
    lines = generated_lines(230, seed=3)
    corpus = write_corpus(tmp_path / "in.txt", lines)
    out = tmp_path / "out.hdf5"
    read, seen = [0], []
    real_open, real_call = embed_module._open_input, embed_module.WindowEmbedder.__call__

    def counted_input(args):
        source = real_open(args)

        def counted(stream):
            for item in stream:
                read[0] += 1
                yield item

        source.lines = counted(source.lines)
        return source

    def window_call(self, window, items):
        seen.append((window, read[0], len(items), done_windows(self.work)))
        return real_call(self, window, items)

    monkeypatch.setattr(embed_module, "_open_input", counted_input)
    monkeypatch.setattr(embed_module.WindowEmbedder, "__call__", window_call)
    assert embed_main(corpus, out, "--model", model_dir, "--all", "--window", "50") == 0
    # window k is embedded when lines [0, 50 (k + 1)) have been read, no more, and windows 0..k-1 are on disk
    assert seen == [(k, min(50 * (k + 1), len(lines)), min(50, len(lines) - 50 * k), set(range(k)))
                    for k in range(5)], seen
    assert sorted(read_hdf5(out), key=int) == [str(i) for i in range(len(lines))]


# --------------------------------------------------------------------------------------------------
# Bad input (in process: through the command's frame)
# --------------------------------------------------------------------------------------------------


def embed_main(*args) -> int:
    """The command in this process, on one thread (--threads 1; `run_cli` puts this process's thread count back
    after it: the tests after it, on two threads in `make test-numerics`, start from the session's count)."""
    return cli("elmo-embed", [*args, "--threads", "1", "--quiet"])


def test_bad_lines_long_truncated_undecodable(model_dir, reference, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    long_words = [f"w{i}" for i in range(12)]
    data = b"\n".join(
        [
            b"good line",
            " ".join(long_words).encode(),
            b"bad \xff\xfe bytes",
            b"y" * 200 + b" tail",
            b"last line without newline",
        ]
    )
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(data)
    out = tmp_path / "out.hdf5"
    # Bytes that do not decode: refused in one line naming the file, the line, the byte and --encoding; no output.
    assert embed_main(corpus, out, "--model", model_dir) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "\n" not in errors[0], errors  # the hint after it: text_files' tests
    assert errors[0].startswith(f"{corpus}: line 3, byte 5 of the line (0xff) is not valid utf-8; ") and \
        "--encoding" in errors[0], errors
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()

    common = ["--model", model_dir, "--split", "whitespace", "--max_tokens", "5", "--max_line_chars", "100"]
    assert embed_main(corpus, out, *common, "--encoding_errors", "replace") == 0
    got = read_hdf5(out)
    assert sorted(got, key=int) == ["0", "1", "2", "3", "4"]
    # a line of 12 words in pieces of 5: one vector per word, each piece with its own <S> </S>
    expected = np.concatenate([reference(long_words[i : i + 5]) for i in (0, 5, 10)], axis=1)
    assert got["1"].shape == (3, 12, 32)
    assert_close(got["1"], expected, REORDERED, what="a line of 12 words in pieces of 5")
    # bytes that do not decode replaced by U+FFFD; the over-long line truncated to its first 100 characters
    assert_close(got["2"], reference("bad \ufffd\ufffd bytes".split()), REORDERED, what="U+FFFD")
    assert got["3"].shape == (3, 1, 32)
    assert_close(got["3"], reference(["y" * 100]), REORDERED, what="a line truncated to 100 characters")
    assert got["4"].shape == (3, 4, 32)
    messages = caplog.text
    assert "not valid utf-8 and were decoded with U+FFFD" in messages and "truncated" in messages
    assert "in pieces" in messages
    # named as they are met, with their line numbers (a long line takes a while; the progress bar counts lines)
    assert "line 2 has 12 words, more than --max_tokens 5: it is embedded in 3 pieces of at most 5 words" in messages
    assert "line 4 is longer than --max_line_chars 100 characters: only its first 100 are read" in messages

    skipped = tmp_path / "skipped.hdf5"
    assert embed_main(corpus, skipped, *common, "--encoding_errors", "skip") == 0
    with h5py.File(skipped, "r") as handle:
        assert "2" not in handle and "3" in handle
        assert list(handle.attrs["skipped_lines"]) == [2]


def test_encoding_reads_gb18030_and_outputs_record_the_words(model_dir, reference, tmp_path, caplog):
    """A GBK corpus: refused as UTF-8 (line and byte named), embedded with --encoding gb18030 (a byte-order mark of
    a UTF-8 file is dropped likewise). The words of every line are stored next to its vectors."""
    lines = ["我爱北京天安门。", "", "ELMo 很 好用 👍🏽"]
    corpus = tmp_path / "gbk.txt"
    corpus.write_bytes("\n".join(lines).encode("gb18030"))
    out = tmp_path / "out.hdf5"
    caplog.set_level(logging.INFO)
    assert embed_main(corpus, out, "--model", model_dir) == 2
    assert f"{corpus}: line 1, byte 1 of the line (0xce) is not valid utf-8" in caplog.text and not out.exists()
    assert embed_main(corpus, out, "--model", model_dir, "--encoding", "gb18030") == 0
    words = [split_words(line) for line in lines]  # the tokenizer's saved split (punctuation)
    assert words[0] == ["我", "爱", "北", "京", "天", "安", "门", "。"] and words[2][-1] == "👍🏽"
    with h5py.File(out, "r") as handle:
        assert handle.attrs["split"] == "punctuation"
        for i, expected_words in enumerate(words):
            assert list(handle[str(i)].attrs["tokens"]) == expected_words
            assert_close(handle[str(i)][()], reference(expected_words), REORDERED, what=f"gb18030, line {i}")
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())
    assert embed_main(bom, tmp_path / "bom.parquet", "--model", model_dir, "--top") == 0
    table = pq.read_table(tmp_path / "bom.parquet").to_pylist()
    assert sorted((row["line"], row["tokens"]) for row in table) == list(enumerate(words))


@pytest.mark.slow
def test_bad_arguments_exit_2(model_dir, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES[:3])
    out = tmp_path / "out.hdf5"
    assert embed_main(corpus, out, "--model", model_dir) == 0
    assert embed_main(corpus, out, "--model", model_dir) == 2 and "--overwrite" in caplog.text
    assert embed_main(corpus, out, "--model", model_dir, "--overwrite") == 0
    assert embed_main(corpus, out, "--model", model_dir, "--resume") == 0 and "nothing to do" in caplog.text
    assert embed_main(corpus, out, "--model", model_dir, "--resume", "--overwrite") == 2
    assert embed_main(tmp_path / "missing.txt", tmp_path / "x.hdf5", "--model", model_dir) == 2
    assert embed_main(corpus, tmp_path / "x.hdf5", "--model", tmp_path / "no-model") == 2
    assert embed_main(corpus, tmp_path / "x.hdf5", "--model", model_dir, "--batch_size", "0") == 2
    assert "not found" in caplog.text
    # a name announcing another format is refused; --format says the name is meant
    assert embed_main(corpus, tmp_path / "vectors.txt", "--model", model_dir) == 2 and "not .txt" in caplog.text
    assert not (tmp_path / "vectors.txt").exists() and not (tmp_path / "vectors.txt.partial").exists()
    assert embed_main(corpus, tmp_path / "vectors.txt", "--model", model_dir, "--format", "hdf5") == 0
    assert read_hdf5(tmp_path / "vectors.txt").keys() == read_hdf5(out).keys()
    # the real command: a clear message and status 2
    result = run_embed(corpus, tmp_path / "y.hdf5", "--model", tmp_path / "no-model", check=False)
    assert result.returncode == 2 and "no-model" in result.stderr and "Traceback" not in result.stderr


# --------------------------------------------------------------------------------------------------
# datasets inputs
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_dataset_inputs(model_dir, reference, tmp_path):
    import datasets

    folder = tmp_path / "dataset"
    datasets.Dataset.from_dict({"text": SENTENCES[:5], "label": list(range(5))}).save_to_disk(str(folder))
    out = tmp_path / "from_folder.hdf5"
    assert embed_main(folder, out, "--model", model_dir, "--top") == 0
    got = read_hdf5(out)
    for i, line in enumerate(SENTENCES[:5]):
        assert_close(got[str(i)], reference(line.split())[-1], REORDERED, what=f"dataset folder, line {i}")

    rows = tmp_path / "rows.jsonl"  # pre-split words in another column
    rows.write_text("".join(json.dumps({"words": s.split()}) + "\n" for s in SENTENCES[:4]))
    out = tmp_path / "from_jsonl.hdf5"
    assert embed_main(rows, out, "--model", model_dir, "--text_column", "words", "--average") == 0
    got = read_hdf5(out)
    for i, line in enumerate(SENTENCES[:4]):
        assert_close(got[str(i)], reference(line.split()).mean(0), REORDERED, what=f"jsonl words, line {i}")
    for source in (folder, rows):  # a wrong column fails before any output, even for a streamed file
        bad = tmp_path / f"bad-{source.name}.hdf5"
        assert embed_main(source, bad, "--model", model_dir, "--text_column", "nope") == 2
        assert not bad.exists() and not bad.with_name(bad.name + ".partial").exists()


# --------------------------------------------------------------------------------------------------
# The command is installed; the feature-extraction pipeline works with the model
# --------------------------------------------------------------------------------------------------


@pytest.mark.numerics
def test_feature_extraction_pipeline(model_dir):
    from transformers import pipeline

    model = ElmoModel.from_pretrained(model_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    extractor = pipeline("feature-extraction", model=model, tokenizer=tokenizer)
    text = "Deep contextualized word representations ."
    got = torch.tensor(extractor(text))  # (1, tokens with <S> </S>, 2P)
    with torch.no_grad():
        expected = model(**tokenizer(text, return_tensors="pt")).last_hidden_state
    assert_close(got, expected, REORDERED, what="pipeline, one text")
    batched = extractor([text, "short one"], batch_size=2)  # padded batch: real positions unchanged
    assert_close(torch.tensor(batched[0]), expected, REORDERED, what="pipeline, padded batch of 2")


# --------------------------------------------------------------------------------------------------
# Devices, dtypes and empty inputs
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_unknown_or_missing_device_and_empty_input_exit_2(model_dir, tmp_path, caplog):
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES[:2])
    out = tmp_path / "out.hdf5"
    assert embed_main(corpus, out, "--model", model_dir, "--device", "gpu") == 2
    assert "--device 'gpu' is not a device name" in caplog.text
    for empty in (tmp_path / "empty.txt", tmp_path / "empty.jsonl"):
        empty.write_bytes(b"")
        caplog.clear()
        column = ["--text_column", "text"] if empty.suffix == ".jsonl" else []
        assert embed_main(empty, out, "--model", model_dir, *column) == 2
        assert f"input {empty} is empty" in caplog.text
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()
    if not torch.cuda.is_available():  # the real command: one line, no traceback
        result = run_embed(corpus, out, "--model", model_dir, "--device", "cuda", check=False)
        errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
        assert len(errors) == 1 and "--device cuda" in errors[0], result.stderr[-3000:]
        assert not out.exists() and not out.with_name(out.name + ".partial").exists()


def test_bfloat16_is_close_to_float32(model_dir, tmp_path):
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES)
    outputs = {}
    for dtype in ("float32", "bfloat16"):
        outputs[dtype] = tmp_path / f"{dtype}.hdf5"
        assert embed_main(corpus, outputs[dtype], "--model", model_dir, "--dtype", dtype) == 0
    exact, low = read_hdf5(outputs["float32"]), read_hdf5(outputs["bfloat16"])
    assert exact.keys() == low.keys()
    vectors = [(exact[k].reshape(-1, 32), low[k].reshape(-1, 32)) for k in exact if exact[k].size]
    assert all(b.dtype == np.float32 for _, b in vectors)  # stored as float32 whatever the compute dtype
    a, b = np.concatenate([v[0] for v in vectors]), np.concatenate([v[1] for v in vectors])
    cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert 0 < np.abs(a - b).max() < 0.1 and cosine.min() > 0.99  # bfloat16 did run, and stayed close


def test_float16_needs_cuda(model_dir, tmp_path, caplog):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES[:2])
    assert embed_main(corpus, tmp_path / "out.hdf5", "--model", model_dir, "--dtype", "float16") == 2
    assert "--dtype float16 needs a CUDA device" in caplog.text


# --------------------------------------------------------------------------------------------------
# Several processes (torchrun)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, refused", [
    ({"mode": "top", "overwrite": "false", "batch_size": "8"}, None),
    ({"mode": "Top"}, "mode must be one of all, top, average, got 'Top'"),
    ({"overwrite": "maybe"}, "overwrite: expected a boolean"),
    ({"batch_size": 3.5}, "batch_size: a value of another type: 3.5"),
])
def test_an_options_file_is_held_to_the_command_lines_rules(tmp_path, value, refused):
    """`elmo-embed OPTIONS.json`: choices, types and booleans as on the command line ("Top" once ran layer 0 as the
    top layer, and "false" meant true)."""
    path = tmp_path / "options.json"
    path.write_text(json.dumps({"input": "in.txt", "output": "out.hdf5", "model": "tiny", **value}))
    if refused is None:
        options = parse_options(EmbedOptions, [str(path)])
        assert (options.mode, options.overwrite, options.batch_size) == ("top", False, 8)
        return
    with pytest.raises(ValueError, match=re.escape(refused)):
        parse_options(EmbedOptions, [str(path)])


def test_windows_left_are_dealt_out_evenly_after_a_resume(monkeypatch):
    """Windows 0-2 done by an interrupted run: two processes share the 5 left (3, 5, 7 and 4, 6)."""
    lines = [(i, f"line {i}") for i in range(80)]
    args = parse_options(EmbedOptions, ["in", "out", "--model", "m", "--window", "10"])
    shares = {}
    for rank in (0, 1):
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", str(rank))
        embedded = []
        windows, read = embed_module._embed_share(
            iter(lines), args, {0, 1, 2}, embed_module.Processes(60), lambda w, _, into=embedded: into.append(w),
            embed_module._progress_bar(None, quiet=True),
        )
        assert (windows, read) == (8, 80)
        shares[rank] = embedded
    assert shares == {0: [3, 5, 7], 1: [4, 6]}


def torchrun_embed(*args, processes: int = 2) -> subprocess.CompletedProcess:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    env = {**clean_env(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [*launcher, "-m", "elmo_hf.cli", "embed", *map(str, args), "--quiet", "--dist_timeout", "120"]
    return run_command(command, cwd=REPO, env=env, timeout=300)


def _two_process_case(model_dir, tmp_path) -> tuple[Path, list[str], Path, list[str]]:
    """A corpus of 7 windows of 10 lines, the options, and the one process's output of it (the expected)."""
    lines = SENTENCES + generated_lines(60, seed=4)
    corpus = write_corpus(tmp_path / "in.txt", lines)
    common = ["--model", model_dir, "--window", "10", "--batch_size", "4"]
    single = tmp_path / "single.hdf5"
    assert embed_main(corpus, single, *common) == 0
    return corpus, common, single, lines


@pytest.mark.slow
def test_two_processes_write_the_single_process_output(model_dir, tmp_path):
    corpus, common, single, lines = _two_process_case(model_dir, tmp_path)
    expected = read_hdf5(single)
    out = tmp_path / "two.hdf5"
    result = torchrun_embed(corpus, out, *common)
    assert result.returncode == 0, result.stderr[-6000:]
    assert "2 processes" in result.stderr and result.stderr.count("merging") == 1  # merged once
    got = read_hdf5(out)
    assert got.keys() == expected.keys()
    for k in expected:
        assert_close(got[k], expected[k], REORDERED, what=f"two processes, line {k}")
    assert read_tokens(out) == read_tokens(single) == {str(i): split_words(line) for i, line in enumerate(lines)}
    with h5py.File(out, "r") as handle:
        assert int(handle.attrs["lines"]) == len(expected)
    assert not out.with_name(out.name + ".partial").exists()


@pytest.mark.slow
def test_two_processes_killed_while_writing_then_one_process_resumes(model_dir, tmp_path):
    """Each process killed while writing its second chunk: complete chunks only count; then one process resumes
    (make test keeps the one-process kill and resume, test_resume_after_kill_equals_uninterrupted_run)."""
    corpus, common, single, _ = _two_process_case(model_dir, tmp_path)
    expected = read_hdf5(single)
    killed = tmp_path / "killed.hdf5"
    partial = killed.with_name(killed.name + ".partial")
    result = torchrun_embed(corpus, killed, *common, "--debug_kill_after_chunks", "1")
    assert result.returncode != 0 and not killed.exists()
    assert 1 <= len(list(partial.glob("chunk-*.h5"))) < 7
    assert embed_main(corpus, killed, *common, "--resume") == 0
    got = read_hdf5(killed)
    assert got.keys() == expected.keys()
    for k in expected:
        assert_close(got[k], expected[k], REORDERED, what=f"two processes killed, one resumed, line {k}")
    assert not partial.exists()


@pytest.mark.slow
def test_torchrun_max_restarts_resumes_after_a_killed_process(model_dir, tmp_path):
    """Elastic: `torchrun --max_restarts 1` with `--resume` from the start. One process SIGKILLed once a window is
    complete: torchrun stops the other (SIGTERM: it commits what it did) and starts both again; they resume the work
    folder (each attempt keys its own addresses in the store) and write the one-process output, to the bit."""
    lines = SENTENCES + generated_lines(150, seed=7)
    corpus = write_corpus(tmp_path / "in.txt", lines)  # 16 windows of 10
    common = ["--model", model_dir, "--window", "10", "--batch_size", "4", "--token_cache_size", "0"]
    single = tmp_path / "single.hdf5"
    assert embed_main(corpus, single, *common) == 0

    out = tmp_path / "elastic.hdf5"
    partial = out.with_name(out.name + ".partial")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                "--max_restarts", "1"]
    command = [*launcher, "-m", "elmo_hf.cli", "embed", str(corpus), str(out), *map(str, common), "--resume", "--quiet",
               "--debug_batch_delay", "0.05", "--dist_timeout", "120"]
    env = {**clean_env(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    with subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) as process:
        deadline = time.monotonic() + 180
        while not (partial.is_dir() and done_windows(partial)) and process.poll() is None:
            assert time.monotonic() < deadline, "no complete window in 180 s"
            time.sleep(0.02)
        workers = [pid for pid in _descendants(process.pid) if b"torch.distributed.run" not in
                   Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-6000:]
    assert "interrupted (SIGTERM)" in stderr and "resuming:" in stderr  # the other stopped; both started again
    got, expected = read_hdf5(out), read_hdf5(single)
    assert got.keys() == expected.keys() and all(np.array_equal(got[k], expected[k]) for k in expected)
    assert not partial.exists()


def test_split_choices_come_from_the_word_split_registry(model_dir, reference, tmp_path, caplog, monkeypatch):
    from elmo_hf.tokenization import WORD_SPLITTERS

    def missing():
        raise ImportError("the split 'needs_pkg' needs a package: pip install it")

    for registry in ("_functions", "_requirements"):  # the registrations below end with the test
        monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
    WORD_SPLITTERS.register("by_comma", lambda text: text.split(","))
    WORD_SPLITTERS.register("needs_pkg", str.split, requires=missing)
    corpus = write_corpus(tmp_path / "in.txt", ["the,cat sat", "one"])
    assert embed_main(corpus, tmp_path / "out.hdf5", "--model", model_dir, "--split", "by_comma") == 0
    embedded = read_hdf5(tmp_path / "out.hdf5")
    assert_close(embedded["0"], reference(["the", "cat sat"]), REORDERED, what="--split by_comma")
    caplog.set_level(logging.INFO)
    caplog.clear()
    assert embed_main(corpus, tmp_path / "none.hdf5", "--model", model_dir, "--split", "needs_pkg") == 2
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 1 and "pip install" in errors[0] and "\n" not in errors[0], errors
    assert not (tmp_path / "none.hdf5").exists()
    # A function by its import path: imported and registered, recorded in the output.
    assert embed_main(corpus, tmp_path / "path.hdf5", "--model", model_dir, "--split", "test_embed:comma_words") == 0
    with h5py.File(tmp_path / "path.hdf5", "r") as handle:
        assert handle.attrs["split"] == "test_embed:comma_words"
        assert list(handle["0"].attrs["tokens"]) == ["the", "cat sat"]
    caplog.clear()
    assert embed_main(corpus, tmp_path / "none.hdf5", "--model", model_dir, "--split", "test_embed:no_such") == 2
    assert "--word_split 'test_embed:no_such': test_embed has no no_such" in caplog.text


def comma_words(text: str) -> list[str]:
    return text.split(",")


def _model_with_split(model_dir: Path, folder: Path, word_split: str) -> Path:
    shutil.copytree(model_dir, folder)
    ElmoTokenizer.from_pretrained(model_dir, word_split=word_split).save_pretrained(folder)
    return folder


def test_default_split_is_the_tokenizers(model_dir, reference, tmp_path, caplog, monkeypatch):
    """Raw Chinese with a model whose tokenizer saved jieba: jieba's words, as the tokenizer splits them; --split
    whitespace for tokenized text; without jieba installed, one line (exit 2) unless another split is chosen."""
    pytest.importorskip("jieba", reason="jieba (the optional extra elmo-hf[zh]) is not installed")
    folder = _model_with_split(model_dir, tmp_path / "jieba-model", "jieba")
    corpus = write_corpus(tmp_path / "zh.txt", ["我爱北京天安门", "ELMo 很 好用"])
    out = tmp_path / "out.hdf5"
    assert embed_main(corpus, out, "--model", folder) == 0
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    with h5py.File(out, "r") as handle:
        assert handle.attrs["split"] == "jieba"
        assert (list(handle["0"].attrs["tokens"]) == tokenizer.tokenize("我爱北京天安门")
                == ["我", "爱", "北京", "天安门"])
        assert_close(handle["0"][()], reference(["我", "爱", "北京", "天安门"]), REORDERED, what="jieba's words")
    assert embed_main(corpus, tmp_path / "ws.hdf5", "--model", folder, "--word_split", "whitespace") == 0
    with h5py.File(tmp_path / "ws.hdf5", "r") as handle:
        assert list(handle["0"].attrs["tokens"]) == ["我爱北京天安门"]

    monkeypatch.setitem(sys.modules, "jieba", None)  # as if it were not installed
    caplog.set_level(logging.INFO)
    caplog.clear()
    assert embed_main(corpus, tmp_path / "none.hdf5", "--model", folder) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and f"the tokenizer of {folder}: word_split='jieba' needs the jieba package" in errors[0]
    assert "--word_split" in errors[0] and not (tmp_path / "none.hdf5").exists()
    assert embed_main(corpus, tmp_path / "ws2.hdf5", "--model", folder, "--word_split", "whitespace") == 0


@pytest.mark.slow
def test_elmoformanylangs_model_follows_its_tokenizer(tmp_path):
    """An ELMoForManyLangs model (ElmoManyLangsTokenizer) saved with jieba: its words and its own forward."""
    pytest.importorskip("jieba", reason="jieba (the optional extra elmo-hf[zh]) is not installed")
    pytest.importorskip("elmoformanylangs", reason="the ELMoForManyLangs fixture is written with its package")
    import manylangs_fixture

    from elmo_hf.tokenization import ElmoManyLangsTokenizer
    from elmo_hf.tools.conversion.convert_elmoformanylangs import convert
    from elmo_hf.tools.loading import load_elmo

    folder = convert(manylangs_fixture.write_model(tmp_path / "theirs"), tmp_path / "ours")
    ElmoManyLangsTokenizer.from_pretrained(folder, word_split="jieba").save_pretrained(folder)
    corpus = write_corpus(tmp_path / "zh.txt", ["我爱北京天安门", "the bank"])
    assert embed_main(corpus, tmp_path / "out.hdf5", "--model", folder, "--top") == 0
    model, tokenizer = load_elmo(str(folder))
    assert type(tokenizer) is ElmoManyLangsTokenizer
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert handle.attrs["split"] == "jieba"
        for i, line in enumerate(["我爱北京天安门", "the bank"]):
            words = list(handle[str(i)].attrs["tokens"])
            assert words == tokenizer.tokenize(line)
            with torch.no_grad():
                expected = model(**tokenizer(line, return_tensors="pt")).last_hidden_state[0, 1:-1].numpy()
            assert_close(handle[str(i)][()], expected, REORDERED, what=f"ELMoForManyLangs model, line {i}")


# --------------------------------------------------------------------------------------------------
# --resume of a complete output; data files; bad rows; --max_lines; --threads (in process)
# --------------------------------------------------------------------------------------------------


def _errors(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]


def test_resume_of_a_complete_output_compares_its_settings_and_weights(model_dir, tmp_path, caplog):
    """A complete output records its settings (the weights' fingerprint and the compute dtype among them): --resume
    with the same settings has nothing to do; with others (more lines, another mode, other weights behind the same
    config) it is refused in one line naming what differs and --overwrite, and the output is left as it was."""
    caplog.set_level(logging.INFO)
    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES[:3])
    common = ["--model", model, "--max_lines", "2"]
    for out in (tmp_path / "out.hdf5", tmp_path / "out.parquet"):
        assert embed_main(corpus, out, *common) == 0
        before = out.read_bytes()
        for extra, differs in ((["--max_lines", "3"], "max_lines"), (["--top"], "mode")):
            caplog.clear()
            assert embed_main(corpus, out, *common, *extra, "--resume") == 2
            assert len(_errors(caplog)) == 1 and differs in _errors(caplog)[0], _errors(caplog)
            assert "--overwrite" in _errors(caplog)[0] and out.read_bytes() == before
        caplog.clear()
        assert embed_main(corpus, out, *common, "--resume") == 0 and "nothing to do" in caplog.text
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert handle.attrs["dtype"] == "float32" and json.loads(handle.attrs["settings"])["max_lines"] == 2
    changed = ElmoModel.from_pretrained(model)
    with torch.no_grad():
        next(changed.parameters()).add_(0.01)
    changed.save_pretrained(model)  # the same config, other weights
    caplog.clear()
    assert embed_main(corpus, tmp_path / "out.hdf5", *common, "--resume") == 2
    assert len(_errors(caplog)) == 1 and "model_weights" in _errors(caplog)[0], _errors(caplog)


def test_data_files_are_datasets_and_bad_rows_are_one_line(model_dir, reference, tmp_path, caplog):
    """A .jsonl/.csv/.tsv without --text_column is read as a dataset (column `text`), not as raw text; a row that is no
    string (nor a list of strings), a file that does not decode, or a malformed line is one line (exit 2) naming
    the file, and no work folder is left behind to block the next run."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "the bank raised its rates"}\n{"text": "we sat"}\n')
    out = tmp_path / "out.hdf5"
    assert embed_main(rows, out, "--model", model_dir) == 0
    assert read_tokens(out) == {"0": ["the", "bank", "raised", "its", "rates"], "1": ["we", "sat"]}
    assert_close(read_hdf5(out)["1"], reference(["we", "sat"]), REORDERED, what="a .jsonl read as a dataset")
    # a .tsv is a table as the fine-tuning commands read it: its header and label column are never embedded, a quote
    # character is text, and the keys are the rows (it was read as plain text: every key one line further)
    table = tmp_path / "rows.tsv"
    table.write_text('label\ttext\n1\tthe bank raised its rates\n0\twe sat "there"\n')
    assert embed_main(table, tmp_path / "table.hdf5", "--model", model_dir) == 0
    assert read_tokens(tmp_path / "table.hdf5") == {"0": ["the", "bank", "raised", "its", "rates"],
                                                    "1": ["we", "sat", '"', "there", '"']}
    assert_close(read_hdf5(tmp_path / "table.hdf5")["0"], read_hdf5(out)["0"], REORDERED, what="a .tsv's first row")
    bad = {
        "numbers.csv": (b"text\n1\n2\n", "row 0 of column 'text' holds 1 (int)"),
        "latin.csv": (b"text\ncaf\xe9\n", "not valid utf-8"),
        "broken.jsonl": (b'{"text": "ok line"}\n{"text": broken\n', "broken.jsonl"),
        "none.jsonl": (b'{"text": ["a", null]}\n', "row 0 of column 'text'"),
        "no-text.tsv": (b"label\tsentence\n1\ta fine film\n", "has no column 'text'"),
    }
    for name, (data, expected) in bad.items():
        source = tmp_path / name
        source.write_bytes(data)
        target = tmp_path / f"{name}.hdf5"
        caplog.clear()
        assert embed_main(source, target, "--model", model_dir) == 2, name
        assert len(_errors(caplog)) == 1 and expected in _errors(caplog)[0], (name, _errors(caplog))
        assert not target.exists() and not target.with_name(target.name + ".partial").exists(), name


def test_max_lines_reads_no_further_and_threads_must_be_positive(model_dir, tmp_path, caplog):
    corpus = tmp_path / "in.txt"
    corpus.write_bytes(b"good line\nsecond line\nbad \xff byte\n")
    out = tmp_path / "out.hdf5"
    assert embed_main(corpus, out, "--model", model_dir, "--max_lines", "2") == 0  # line 3 is never read
    assert sorted(read_hdf5(out)) == ["0", "1"]
    for threads in ("0", "-1"):
        caplog.clear()
        assert cli("elmo-embed", [corpus, tmp_path / "t.hdf5", "--model", model_dir, "--quiet",
                                  "--threads", threads]) == 2
        assert f"--threads: must be a positive integer, got {threads}" in caplog.text
