"""The README's main job, `elmo-demo`, run for real on a small budget: through its own frame in this process, and
as the installed script in a fresh process where a signal is what is tested."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, clean_env, run_cli
from tolerances import STATISTIC, assert_close

from elmo_hf.train.sense_corpus import SENSES, generate_corpus, generate_probes


def test_generated_corpus_uses_every_sense_and_is_reproducible():
    corpus = generate_corpus(400, seed=3)
    assert corpus == generate_corpus(400, seed=3) and corpus != generate_corpus(400, seed=4)
    for word in SENSES:
        assert any(f" {word} " in f" {line} " for line in corpus), word
    probes = generate_probes(3)
    assert {(w, s) for w, s, _ in probes} == {(w, s) for w, senses in SENSES.items() for s in senses}
    assert all(word in sentence.split() for word, _, sentence in probes)


def test_generated_text_splits_the_same_with_the_default_rule():
    """The demo model's tokenizer uses the default rule, `punctuation`; the generated text is tokenized already."""
    from elmo_hf.tokenization import split_words

    lines = generate_corpus(2000, seed=5) + [sentence for _, _, sentence in generate_probes(20)]
    assert all(split_words(line) == line.split() for line in lines)


def run_demo(*args) -> subprocess.CompletedProcess:
    """`elmo-demo ARGS --disable_tqdm` in this process; its output captured."""
    return run_cli("elmo-demo", [*args, "--disable_tqdm"], cwd=REPO)


def interrupt_demo(*args) -> tuple[int, str]:
    """Start the demo with a pretraining it would not finish, and send SIGINT to its process group (as Ctrl-C in a
    terminal does) once its progress bar has counted a step (tqdm's carriage returns read as line ends). Returns
    (exit status, stderr)."""
    env = {**clean_env(), "OMP_NUM_THREADS": "1"}
    script = Path(sys.executable).parent / "elmo-demo"
    process = subprocess.Popen([str(script), *map(str, args), "--max_steps", "100000"],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    seen, deadline = [], time.monotonic() + 240
    while not re.match(r"pretraining:.*\| *[1-9]\d*/100000", seen[-1] if seen else ""):
        assert process.poll() is None and time.monotonic() < deadline, "".join(seen)[-3000:]
        seen.append(process.stderr.readline())
    os.killpg(process.pid, signal.SIGINT)
    return process.wait(timeout=120), "".join(seen) + process.stderr.read()


@pytest.mark.slow
def test_demo_interrupted_resumes_trains_reloads_and_scores(tmp_path):
    """Ctrl-C while the demo pretrains: one line naming the checkpoint kept and the option to go on, exit 130, no
    traceback, nothing half-written; the same command with that option then finishes the demo."""
    common = ["--output_dir", tmp_path, "--num_sentences", "600", "--probes_per_sense", "6",
              "--per_device_batch_size", "8"]
    code, stderr = interrupt_demo(*common)
    assert code == 130 and "Traceback" not in stderr, stderr[-4000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert [line for line in lines if "interrupted (" in line or " WARNING " in line] == lines[-1:], stderr[-4000:]
    checkpoints = sorted((tmp_path / "model" / "checkpoints").iterdir())
    assert checkpoints and all(path.name.startswith("step-") for path in checkpoints), checkpoints  # no .tmp-
    step = int(checkpoints[-1].name.removeprefix("step-"))
    assert f"interrupted (SIGINT): the checkpoint of step {step} is kept in {checkpoints[-1]}" in lines[-1], lines[-1]
    assert lines[-1].endswith("run the same command with --resume_from_checkpoint latest to continue from it")
    assert not (tmp_path / "sense_scores.json").exists()

    steps = max(15, step + 2)
    result = run_demo(*common, "--max_steps", steps, "--resume_from_checkpoint", "latest")
    assert f"at step {step}" in result.stderr, result.stderr[-4000:]  # "resumed from ... at step N"
    assert json.loads((tmp_path / "model" / "train_results.json").read_text())["steps"] == steps
    assert result.returncode == 0, result.stderr[-4000:]
    assert "outputs: model" in result.stderr
    scores = json.loads((tmp_path / "sense_scores.json").read_text())
    assert set(scores["words"]) == set(SENSES)
    # layer 0 is context-free: every occurrence of a word has the same vector, so it can only score chance
    assert all(r["layer0_accuracy"] == 0.5 for r in scores["words"].values())
    assert 0.0 <= scores["summary"]["contextual_accuracy"] <= 1.0
    assert scores["validation"]["average_perplexity"] > 1
    assert (tmp_path / "senses.png").stat().st_size > 10_000
    assert (tmp_path / "model" / "model.safetensors").exists()
    # the tokenizer saved with the demo model follows the default rule
    assert json.loads((tmp_path / "model" / "tokenizer_config.json").read_text())["word_split"] == "punctuation"
    # how contextual each layer is, on the held-out text: layer 0 gives every occurrence of a word one vector
    contextuality = json.loads((tmp_path / "contextuality.json").read_text())
    self_similarity = contextuality["self_similarity"]
    assert len(self_similarity) == 3
    assert_close(self_similarity[0], 1.0, STATISTIC, what="self-similarity of layer 0")
    assert all(value < 0.999 for value in self_similarity[1:]), self_similarity
    assert_close(contextuality["max_explainable_variance"][0], 1.0, STATISTIC, what="explainable variance, layer 0")
    assert "bank" in contextuality["words"] and contextuality["max_occurrences"] >= 100
    assert (tmp_path / "contextuality.png").stat().st_size > 10_000
    assert "how contextual is each layer" in result.stderr

    # The same demo again keeps the trained model and scores it; other settings are refused, the model kept.
    weights = tmp_path / "model" / "model.safetensors"
    trained = weights.stat().st_mtime_ns
    again = run_demo(*common, "--max_steps", steps)
    assert again.returncode == 0 and "scoring it again" in again.stderr, again.stderr[-4000:]
    assert weights.stat().st_mtime_ns == trained and "pretraining" not in again.stderr
    other = run_demo(*common, "--max_steps", steps + 1)
    assert other.returncode == 2 and "Traceback" not in other.stderr, other.stderr[-4000:]
    assert other.stderr.strip().splitlines()[-1].endswith(
        f"{tmp_path / 'model'} holds a model trained with other settings (max_steps): give another --output_dir, or "
        "--overwrite_output_dir true to train it anew")
    assert weights.stat().st_mtime_ns == trained and json.loads((tmp_path / "sense_scores.json").read_text())


def test_a_demo_with_a_missing_corpus_or_no_steps_writes_nothing(tmp_path):
    """Refused in one line, exit 2, before the output folder is made."""
    out = tmp_path / "out"
    for options, message in ((["--train_file", tmp_path / "missing.txt"], "no file matches"),
                             (["--max_steps", "0"], "--max_steps must be at least 1, got 0")):
        result = run_demo("--output_dir", out, *options)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
        assert message in result.stderr.strip().splitlines()[-1] and not out.exists(), result.stderr[-3000:]


def test_chinese_corpus_holds_each_character_once_per_sentence_in_both_senses():
    from elmo_hf.tokenization import split_words
    from elmo_hf.train.sense_corpus_zh import FILLER, SENSES, SLOTS, generate_corpus, generate_probes

    characters = set(SENSES)
    assert all(not characters & set(word) for words in SLOTS.values() for word in words)
    assert all(not characters & set(template) for template in FILLER)
    corpus = generate_corpus(400, seed=3)
    assert corpus == generate_corpus(400, seed=3) and corpus != generate_corpus(400, seed=4)
    assert all(any(character in line for line in corpus) for character in characters)
    probes = generate_probes(4)
    assert {(c, s) for c, s, _ in probes} == {(c, s) for c, senses in SENSES.items() for s in senses}
    for character, _, sentence in probes:
        words = split_words(sentence)  # the default rule: one token per ideograph
        assert words == [c for c in sentence if not c.isspace()], words
        assert words.count(character) == 1 and sum(w in characters for w in words) == 1, sentence


@pytest.mark.slow
def test_chinese_demo_trains_per_character_and_contextual_layers_beat_layer0(tmp_path):
    result = run_demo("--language", "zh", "--output_dir", tmp_path, "--max_steps", "80", "--num_sentences", "1200",
                      "--probes_per_sense", "12", "--per_device_batch_size", "16", "--analysis_lines", "200")
    assert result.returncode == 0, result.stderr[-4000:]
    from elmo_hf.train.sense_corpus_zh import SENSES

    scores = json.loads((tmp_path / "sense_scores.json").read_text(encoding="utf-8"))
    assert set(scores["words"]) == set(SENSES)
    # layer 0 is context-free per character: both senses of 行 get one vector, so it scores chance exactly
    assert all(r["layer0_accuracy"] == 0.5 for r in scores["words"].values())
    # the contextual layers tell the senses apart: 0.73 on this budget (0.68 to 0.77 over seeds), 0.90 after the
    # default 500 steps; 0.62 is over three standard deviations of chance for these 192 occurrences
    assert scores["summary"]["contextual_accuracy"] >= 0.62, scores["summary"]
    # trained per character: the vocabulary holds the characters, never a whole clause
    vocab = (tmp_path / "model" / "vocab.txt").read_text(encoding="utf-8").split()
    assert set(SENSES) <= set(vocab) and "银行" not in vocab
    assert json.loads((tmp_path / "model" / "tokenizer_config.json").read_text())["word_split"] == "punctuation"
    # legible: a CJK font or pinyin labels, never missing-glyph boxes
    assert "missing from" not in result.stderr and (tmp_path / "senses.png").stat().st_size > 10_000
    assert (tmp_path / "contextuality.json").exists()


def test_chinese_plot_labels_use_a_cjk_font_when_installed_else_pinyin(monkeypatch):
    import matplotlib

    from elmo_hf.train import demo_run as demo

    vectors = {"行": {"labels": ["bank", "walk", "bank"]}, "好": {"labels": ["good", "like"]}}
    monkeypatch.setattr(demo, "find_font_for", lambda text: None)
    words, senses, font = demo._labels(vectors, "zh")
    assert font is None and words == {"行": "háng / xíng", "好": "hǎo / hào"}
    assert senses["行", "bank"] == "háng (bank)" and senses["好", "like"] == "hào (like)"
    assert not any("\u4e00" <= c <= "\u9fff" for label in [*words.values(), *senses.values()] for c in label)

    some_font = str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")
    monkeypatch.setattr(demo, "find_font_for", lambda text: some_font)
    words, senses, font = demo._labels(vectors, "zh")
    assert (font.get_file() == some_font and words["行"] == "行 háng / xíng"
            and senses["行", "walk"] == "xíng (walk, 行走)")

def test_a_font_is_found_only_where_it_draws_every_character(monkeypatch):
    """Against a known list of fonts (matplotlib's own, whatever this machine has installed): matplotlib's Last Resort
    font "has" every glyph, drawn as a box, so it never counts; DejaVu Sans draws Latin with tone marks, not Chinese."""
    import matplotlib
    from matplotlib import font_manager

    from elmo_hf.train import demo_run as demo

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    known = [font_manager.FontEntry(fname=str(fonts / file), name=name) for file, name in
             (("LastResortHE-Regular.ttf", "Last Resort High-Efficiency"), ("DejaVuSans.ttf", "DejaVu Sans"))]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", known)
    assert demo.find_font_for("行长花打还好觉乐") is None
    assert demo.find_font_for("hǎo (good)") == str(fonts / "DejaVuSans.ttf")
    # mapped, but to an empty glyph (DejaVu Sans's zero-width space): a font that would draw nothing there
    assert demo.find_font_for("a\u200bb") is None


def test_demo_interrupted_after_pretraining_names_what_it_kept_and_how_to_score_again(tmp_path):
    """Once the model of the steps asked for is written, an interrupt's line lists the outputs kept and says that
    --resume_from_checkpoint latest scores without training; a model of fewer steps is not that model."""
    from elmo_hf.tools.core.interrupts import Interrupted
    from elmo_hf.train.demo_args import DemoArguments
    from elmo_hf.train.demo_run import DemoOutputs

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train_results.json").write_text(json.dumps({"steps": 15}))
    outputs = DemoOutputs(DemoArguments(output_dir=str(tmp_path), max_steps=15))
    outputs.settings_file.write_text(json.dumps(outputs.settings))  # the settings it was trained with
    outputs.written.append(tmp_path / "sense_scores.json")
    assert outputs.interrupted_line(Interrupted(signal.SIGTERM)) == (
        f"interrupted (SIGTERM) after pretraining: kept the model folder {tmp_path / 'model'}, "
        f"{tmp_path / 'sense_scores.json'}; run the same command with --resume_from_checkpoint latest to score the "
        "model without training it again")
    longer = DemoOutputs(DemoArguments(output_dir=str(tmp_path), max_steps=30))
    assert not longer.model_trained() and outputs.model_trained()
    assert longer.interrupted_line(Interrupted(signal.SIGINT)) == (
        f"interrupted (SIGINT) before the first checkpoint of {tmp_path / 'model'}: nothing was kept; run the same "
        "command to start again")
