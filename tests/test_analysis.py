"""`elmo-analyze`: the contextuality measures against a brute-force computation on a tiny model, the sampling cap,
and bad input (one line, exit 2, nothing written), with the command run through its own frame in this process
(`run_cli`).

The measures (cosines, variance explained) are O(1) statistics of float32 vectors, compared to STATISTIC
(tests/tolerances.py); what the JSON file holds is rounded to 8 decimals (JSON_DECIMALS, below)."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import REPO, cli, run_cli
from tolerances import STATISTIC, Bound, assert_close

from elmo_hf.modeling_elmo import ElmoModel
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.tools import analysis

# contextuality.json rounds every number to 8 decimals (analysis._floats): a value the file holds and one computed
# from two others it holds (an adjusted measure, raw minus baseline, in float64) differ by three such roundings,
# 3 * 5e-9, and float64's last bits (1e-16): 2e-8.
JSON_DECIMALS = Bound("8 decimals in JSON", 2e-8, scaled=False,
                      rule="3 roundings to 8 decimals (5e-9 each) and float64's last bits")

LINES = [
    "the bank raised the rate .",
    "we sat on the bank of the river .",
    "",
    "the river was quiet .",
    "a bat flew out of the cave .",
    "  ",
    "the bank of the river flooded .",
    "she swung the bat .",
    "word",
    "the cave was dark and the river was cold .",
]


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


def run_analyze(*args: str) -> subprocess.CompletedProcess:
    return run_cli("elmo-analyze", [*args, "--quiet"], cwd=REPO)


def brute_force(model_dir: Path, lines: list[str], min_count: int) -> dict:
    """The definitions of the module docstring, computed the slow way: each sentence on its own, every pair."""
    model = ElmoModel.from_pretrained(model_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    occurrences: dict[str, list[torch.Tensor]] = {}
    intra = []
    for line in lines:
        words = line.split()
        if not words:
            continue
        with torch.no_grad():
            hidden = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"),
                           output_hidden_states=True).hidden_states
        vectors = [torch.stack([layer[0, i + 1].double() for layer in hidden]) for i in range(len(words))]
        for word, vector in zip(words, vectors):
            occurrences.setdefault(word, []).append(vector)
        if len(words) >= 2:
            mean = sum(vectors) / len(vectors)
            intra.append(sum(torch.cosine_similarity(v, mean, dim=-1) for v in vectors) / len(vectors))
    words = {}
    for word, vectors in occurrences.items():
        if len(vectors) < min_count:
            continue
        pairs = [torch.cosine_similarity(a, b, dim=-1) for a, b in itertools.permutations(vectors, 2)]
        mev = []
        for layer in range(vectors[0].shape[0]):
            matrix = torch.stack([v[layer] for v in vectors])
            eigenvalues = torch.linalg.eigvalsh(matrix.T @ matrix)  # sigma_i^2 of the uncentred matrix
            mev.append(eigenvalues.max() / eigenvalues.sum())
        words[word] = {"count": len(vectors), "self_similarity": sum(pairs) / len(pairs),
                       "max_explainable_variance": torch.stack(mev)}
    return {
        "words": words,
        "self_similarity": sum(w["self_similarity"] for w in words.values()) / len(words),
        "max_explainable_variance": sum(w["max_explainable_variance"] for w in words.values()) / len(words),
        "intra_sentence_similarity": sum(intra) / len(intra),
        "sentences_for_intra_similarity": len(intra),
    }


@pytest.mark.slow
def test_measures_equal_a_brute_force_computation(model_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n")
    out = tmp_path / "out"
    result = run_analyze(corpus, "--model", model_dir, "--output_dir", out, "--min_count", "2",
                         "--batch_size", "3", "--anisotropy_pairs", "40", "--seed", "7")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote" in result.stderr and result.stdout == ""
    got = json.loads((out / "contextuality.json").read_text())
    assert (out / "contextuality.png").stat().st_size > 10_000
    expected = brute_force(model_dir, LINES, min_count=2)

    assert set(got["words"]) == set(expected["words"]) and "bank" in got["words"]
    for word, reference in expected["words"].items():
        entry = got["words"][word]
        assert entry["count"] == entry["used"] == reference["count"]
        assert_close(entry["self_similarity"], reference["self_similarity"], STATISTIC, what=f"{word}: self-similarity")
        assert_close(entry["max_explainable_variance"], reference["max_explainable_variance"], STATISTIC,
                     what=f"{word}: max explainable variance")
    for name in ("self_similarity", "max_explainable_variance", "intra_sentence_similarity"):
        assert_close(got[name], expected[name], STATISTIC, what=name)
    assert got["sentences_for_intra_similarity"] == expected["sentences_for_intra_similarity"]
    # layer 0 (characters only) gives every occurrence of a word the same vector
    assert_close(got["self_similarity"][0], 1.0, STATISTIC, what="self-similarity, layer 0")
    assert_close(got["max_explainable_variance"][0], 1.0, STATISTIC, what="max explainable variance, layer 0")
    for word, entry in got["words"].items():
        assert_close(entry["self_similarity"][0], 1.0, STATISTIC, what=f"{word}: self-similarity, layer 0")
    # the baseline is a mean cosine of random pairs; the adjusted values subtract it layer by layer
    words = sum(len(line.split()) for line in LINES)
    assert got["anisotropy_pairs"] == min(40, words // 2)
    assert all(-1 <= a <= 1 for a in got["anisotropy"])
    for name in ("self_similarity", "intra_sentence_similarity"):
        adjusted = [raw - base for raw, base in zip(got[name], got["anisotropy"])]
        assert_close(got[f"{name}_adjusted"], adjusted, JSON_DECIMALS, what=f"{name}_adjusted")
    assert got["min_count"] == 2 and got["max_occurrences"] == 100 and got["seed"] == 7
    assert got["sentences"] == 8 and got["tokens"] == sum(len(line.split()) for line in LINES)


@pytest.mark.slow
def test_batch_size_and_seed(model_dir, tmp_path):
    """The measures do not depend on the batch size; the seed decides the baseline's pairs."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES * 3) + "\n")
    model = ElmoModel.from_pretrained(model_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    options = dict(min_count=2, anisotropy_pairs=30, quiet=True)
    one = analysis.analyze(model, tokenizer, corpus, batch_size=1, seed=1, **options)
    many = analysis.analyze(model, tokenizer, corpus, batch_size=64, seed=1, **options)
    other_seed = analysis.analyze(model, tokenizer, corpus, batch_size=64, seed=2, **options)
    for name in ("self_similarity", "intra_sentence_similarity", "max_explainable_variance", "anisotropy"):
        assert_close(one[name], many[name], STATISTIC, what=f"{name}: batches of 1 against batches of 64")
    assert other_seed["anisotropy"] != many["anisotropy"]
    assert_close(other_seed["self_similarity"], many["self_similarity"], STATISTIC, what="self-similarity, seed 2")


def test_occurrences_are_capped(model_dir, tmp_path):
    """Memory is bounded by the cap: a frequent word keeps --max_occurrences vectors, a uniform sample."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the cat number {i} saw the dog ." for i in range(60)) + "\n")
    model = ElmoModel.from_pretrained(model_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    results = analysis.analyze(model, tokenizer, corpus, min_count=5, max_occurrences=7, max_words=2,
                               anisotropy_pairs=10, quiet=True)
    assert list(results["words"]) == ["the", "cat"]  # the two most frequent types (120 and 60 occurrences)
    assert results["words"]["the"] == {**results["words"]["the"], "count": 120, "used": 7}
    assert results["words"]["cat"]["used"] == 7 and results["words_analysed"] == 2

    chosen = analysis.choose_occurrences(1000, 100, analysis.random.Random(0))
    assert len(chosen) == 100 and sorted(chosen.values()) == list(range(100))
    assert max(chosen) > 900 and min(chosen) < 100  # spread over the whole corpus, not the first 100
    assert analysis.choose_occurrences(5, 100, analysis.random.Random(0)) == {i: i for i in range(5)}


BAD_INPUTS = {  # case -> the error line names
    "missing_file": "not found", "empty_file": "has no words", "bad_model": "cannot load",
    "rare_words": "no word occurs 50 times", "bad_option": "--max_occurrences",
}


def _bad_input(case: str, model_dir: Path, tmp_path: Path) -> list[str]:
    """The command's arguments for one of BAD_INPUTS."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n")
    model = str(model_dir)
    extra: list[str] = []
    if case == "missing_file":
        corpus = tmp_path / "absent.txt"
    elif case == "empty_file":
        corpus.write_text("\n  \n\n")
    elif case == "bad_model":
        model = str(tmp_path)  # a folder without config.json
    elif case == "rare_words":
        extra = ["--min_count", "50"]
    else:
        extra = ["--max_occurrences", "1"]
    return [str(corpus), "--model", model, "--output_dir", str(tmp_path / "out"), *extra]


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, model_dir, tmp_path, caplog):
    """Through `main` in this process; test_the_command_refuses_in_one_line runs the real command on one of them."""
    assert cli("elmo-analyze", [*_bad_input(case, model_dir, tmp_path), "--quiet"]) == 2
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 1 and BAD_INPUTS[case] in errors[0] and "\n" not in errors[0], errors
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_command_refuses_in_one_line(model_dir, tmp_path):
    """The real command on a corpus whose words are too rare: the model loaded and the text read, then one ERROR line,
    exit 2, no traceback, nothing written."""
    result = run_analyze(*_bad_input("rare_words", model_dir, tmp_path))
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and BAD_INPUTS["rare_words"] in errors[0], result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_existing_outputs_need_overwrite(tmp_path, caplog):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "contextuality.json").write_text("{}")
    assert cli("elmo-analyze",
               [str(corpus), "--model", "tiny", "--output_dir", str(out), "--min_count", "2", "--quiet"]) == 2
    assert "--overwrite" in caplog.text
    assert (out / "contextuality.json").read_text() == "{}"


def test_a_registered_word_split_reaches_the_command_and_a_missing_package_is_one_line(model_dir, tmp_path, caplog,
                                                                                        monkeypatch):
    from elmo_hf.tokenization import WORD_SPLITTERS

    def missing():
        raise ImportError("the split 'needs_pkg' needs a package: pip install it")

    for registry in ("_functions", "_requirements"):  # the registrations below end with the test
        monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
    WORD_SPLITTERS.register("by_comma", lambda text: text.replace(" ", ",").split(","))
    WORD_SPLITTERS.register("needs_pkg", str.split, requires=missing)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n")
    assert cli("elmo-analyze", [str(corpus), "--model", str(model_dir), "--output_dir", str(tmp_path / "out"),
                          "--split", "by_comma", "--quiet", "--min_count", "2"]) == 0
    saved = json.loads((tmp_path / "out" / analysis.JSON_NAME).read_text())
    assert saved["split"] == "by_comma"
    assert saved["words"]["the"]["count"] == sum(line.split().count("the") for line in LINES)
    caplog.clear()
    assert cli("elmo-analyze", [str(corpus), "--model", str(model_dir), "--output_dir", str(tmp_path / "none"),
                          "--split", "needs_pkg", "--quiet"]) == 2
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 1 and "pip install" in errors[0] and "\n" not in errors[0], errors
    assert not (tmp_path / "none").exists()


def bar_words(text: str) -> list[str]:
    return text.split("|")


def test_default_split_is_the_tokenizers_and_undecodable_text_is_one_line(model_dir, tmp_path, caplog, monkeypatch):
    """Raw text is split as the model's tokenizer splits it (punctuation here), `--split` chooses another (an import
    path too); a GBK file is refused as UTF-8, in one line, nothing written, and read with --encoding gb18030."""
    from elmo_hf.tokenization import WORD_SPLITTERS

    for registry in ("_functions", "_requirements"):  # the registrations below end with the test
        monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
    raw = ["The bank, the river.", "The bank lent; the bank rose.", "银行 的 bank."]
    corpus = tmp_path / "raw.txt"
    corpus.write_bytes("\n".join(raw).encode("gb18030"))
    options = ["--model", str(model_dir), "--quiet", "--min_count", "2"]
    caplog.set_level("INFO")
    assert cli("elmo-analyze", [str(corpus), "--output_dir", str(tmp_path / "none"), *options]) == 2
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 1 and "\n" not in errors[0], errors  # the hint after it: text_files' tests
    assert errors[0].startswith(f"{corpus}: line 3, byte 1 of the line (0xd2) is not valid utf-8; ") and \
        "--encoding" in errors[0], errors
    assert not (tmp_path / "none").exists()

    assert cli("elmo-analyze",
               [str(corpus), "--output_dir", str(tmp_path / "own"), "--encoding", "gb18030", *options]) == 0
    own = json.loads((tmp_path / "own" / analysis.JSON_NAME).read_text())
    assert own["split"] == "punctuation" and own["encoding"] == "gb18030"
    assert own["tokens"] == 19 and own["words"]["bank"]["count"] == 4 and own["words"]["."]["count"] == 3

    corpus.write_text("\n".join(raw), encoding="utf-8")
    assert cli("elmo-analyze",
               [str(corpus), "--output_dir", str(tmp_path / "ws"), "--split", "whitespace", *options]) == 0
    spaces = json.loads((tmp_path / "ws" / analysis.JSON_NAME).read_text())
    # on whitespace, "bank," and "river." are words of their own
    assert spaces["split"] == "whitespace" and spaces["tokens"] == 13 and spaces["words"]["bank"]["count"] == 2

    corpus.write_text("the|bank|of the river\nthe|bank\n", encoding="utf-8")
    assert cli("elmo-analyze",
               [str(corpus), "--output_dir", str(tmp_path / "bars"), "--split", "test_analysis:bar_words",
                          *options]) == 0
    bars = json.loads((tmp_path / "bars" / analysis.JSON_NAME).read_text())
    assert bars["split"] == "test_analysis:bar_words" and bars["tokens"] == 5 and bars["words"]["bank"]["count"] == 2


def test_a_signal_mid_run_and_a_bad_device_are_one_line_and_write_nothing(model_dir, tmp_path, caplog, monkeypatch):
    """Ctrl-C while the vectors are collected: one line, exit 130, no output folder; `--device gpu` (no such
    name) and `--device cuda` on a machine without one: one line each, exit 2, as elmo-embed answers them."""
    import os
    import signal

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n")
    out = tmp_path / "out"
    options = [str(corpus), "--model", str(model_dir), "--output_dir", str(out), "--quiet", "--min_count", "2"]

    def signalled(self, sentences, hidden):
        os.kill(os.getpid(), signal.SIGINT)

    with monkeypatch.context() as patch:
        patch.setattr(analysis.Collector, "add_batch", signalled)
        assert cli("elmo-analyze", options) == 130
    said = [record.getMessage() for record in caplog.records if record.levelname in ("WARNING", "ERROR")]
    assert said == ["interrupted by SIGINT: nothing was written"] and not out.exists()
    real_plot = analysis.plot

    def plot_signalled(*args, **kwargs):  # the signal lands while the outputs are written: they are finished
        os.kill(os.getpid(), signal.SIGTERM)
        real_plot(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(analysis, "plot", plot_signalled)
        caplog.clear()
        assert cli("elmo-analyze", [*options, "--output_dir", str(tmp_path / "written")]) == 143
    assert "interrupted by SIGTERM: the outputs were written first" in caplog.text
    assert json.loads((tmp_path / "written" / analysis.JSON_NAME).read_text())["layers"] == [0, 1, 2]
    assert sorted(path.name for path in (tmp_path / "written").iterdir()) == [analysis.JSON_NAME, analysis.PLOT_NAME]
    devices = {"gpu": "--device 'gpu' is not a device name"}
    if not torch.cuda.is_available():
        devices["cuda"] = "--device cuda: "
    for device, expected in devices.items():
        caplog.clear()
        assert cli("elmo-analyze", [*options, "--device", device]) == 2
        errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
        assert len(errors) == 1 and errors[0].startswith(expected), errors
        assert not out.exists()
