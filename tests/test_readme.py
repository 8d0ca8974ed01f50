"""The README and the reference pages in docs/ run as pasted.

Every fenced `python` and `bash` block of a page runs, in the page's order, in one fresh Python process of its own in
an empty temporary folder: Python blocks share one namespace (a reader pastes them in order, later blocks use earlier
variables) and each bash block runs with `bash -e`, with this environment's scripts first on PATH and no network. In
a bash block whose lines keep no shell state for the next (no cd, export or variable), each line of the project's
commands (`elmo-embed ...`, without shell syntax) runs through its own frame in that Python (`elmo_hf.cli.run`: what the
script runs, without starting a Python for each) and every other line with bash, in order; each must end with status
0, as `bash -e` requires.
A block that cannot run here (it downloads, needs a GPU or several processes, or is the set-up itself) carries a
one-line HTML comment just before its fence, `<!-- not run: the reason -->`; exactly those are skipped.

The page processes are forked from one Python that has imported torch, transformers and the project's commands
(`PAGE_PROCESSES`): each starts as a fresh interpreter would be after those imports, with its own folder first on
`sys.path`, without paying 8-12 s of CPU for them again (fifteen pages: a minute of the suite on two cores).

Blocks that use "the demo's model" find what `make demo` writes (`outputs/demo/model` and the corpus in
`outputs/demo/corpus/`), made here in seconds by a few steps of `elmo-pretrain` on the demo's generated corpus.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# The pages whose blocks run here, in addition to the README.
DOC_PAGES = ["models", "tokenizer", "converting", "pretraining", "finetuning", "embedding", "analysis", "sharing",
             "tests", "app", "scaling", "deployment", "ecosystem", "chinese"]
RUN_LANGUAGES = {"python", "bash"}
FENCE = re.compile(r"^(`{3,})(\S*)\s*$")  # a fence of three or more backticks, then the language
NOT_RUN = re.compile(r"^<!-- not run: (.*\S) -->$")
MAX_README_LINES = 350


def code_blocks(path: Path) -> list[dict]:
    """The fenced blocks of a markdown file: language, code, first line number and the not-run reason (or None)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start = i
        ticks = match.group(1)  # the block ends at the same fence: a longer one can show a fenced block inside
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == ticks), None)
        if end is None:
            raise AssertionError(f"{path.name}:{start + 1}: a code fence that is never closed")
        previous = lines[start - 1].strip() if start > 0 else ""
        marked = NOT_RUN.match(previous)
        if previous.startswith("<!-- not run") and not marked:
            raise AssertionError(f"{path.name}:{start}: a not-run marker without a reason: {previous!r}")
        blocks.append({"language": match.group(2), "code": "\n".join(lines[start + 1:end]) + "\n",
                       "line": start + 2, "not_run": marked.group(1) if marked else None})
        i = end + 1
    return blocks


# Runs a page's blocks in order in one interpreter: Python blocks by exec in one namespace, bash blocks with bash -e,
# or, when they are only the project's commands, each through its frame in this interpreter.
DRIVER = r"""
import json, re, shlex, subprocess, sys
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}

def whole_words(line):
    try:
        shlex.split(line, comments=True)
    except ValueError:  # a quote that closes on a later line
        return False
    return True

def with_variables(lines):
    # `name=value` lines (a plain value) put in place of $name and ${name} in the lines after them, as bash would.
    values, out = {}, []
    for line in lines:
        assigned = re.fullmatch(r"(\w+)=([\w./:@%+-]+)", line)
        if assigned:
            values[assigned.group(1)] = assigned.group(2)
            continue
        for name, value in values.items():
            line = re.sub(r"\$(%s\b|\{%s\})" % (name, name), value, line)
        out.append(line)
    return out

def only_assignments(line):
    # `name=value ...` with no command after it sets shell variables; `NAME=value command` sets them for the command
    return all(re.match(r"\w+=", word) for word in shlex.split(line, comments=True))

def steps(code):
    # The block's lines, each a project command run through its frame here, or a shell line for bash; None (the
    # whole block to bash) where a line keeps shell state for the next (cd, export, a loop, a variable other than
    # a plain `name=value`) or a command spans lines (a here-document, a quoted string over several lines).
    lines = [line.strip() for line in code.replace("\\\n", " ").splitlines()]
    lines = with_variables([line for line in lines if line and not line.startswith("#")])
    if "<<" in code or not all(whole_words(line) for line in lines):
        return None
    if any(re.match(r"(cd|export|source|for|while|if|function)\b", line) or "$" in line or only_assignments(line)
           for line in lines):
        return None
    return [("cli", shlex.split(line, comments=True))
            if re.match(r"elmo-[a-z-]+( |$)", line) and not re.search(r"[|&;<>`*?\[\]{}~]", line.split(" #")[0])
            else ("bash", line) for line in lines]

for block in blocks:
    where = f"{block['page']}:{block['line']}"
    print(f"\n=== {where} ({block['language']})", flush=True)
    if block["language"] == "python":
        exec(compile(block["code"], where, "exec"), namespace)
        continue
    sys.stdout.flush()
    lines = steps(block["code"])
    if lines is None:
        done = subprocess.run(["bash", "-e", "-c", block["code"]])
        if done.returncode:
            sys.exit(f"the bash block at {where} exited with status {done.returncode}")
        continue
    from elmo_hf.cli import run
    for kind, step in lines:
        status = run(step[0], step[1:]) if kind == "cli" else subprocess.run(["bash", "-e", "-c", step]).returncode
        sys.stdout.flush()
        if status:
            sys.exit(f"{step if kind == 'bash' else step[0]} in the bash block at {where} exited with status {status}")
"""


# Forks a process for each page (two at a time) from one Python that imported the heavy modules once; each runs
# DRIVER in its page's folder, its output in stdout.txt and stderr.txt there, its exit status in status.txt.
PAGE_PROCESSES = r"""
import atexit, json, os, sys, traceback
import torch, transformers, datasets  # what every page's commands import, once
from transformers import Trainer
import elmo_hf.cli, elmo_hf.modeling_elmo
from elmo_hf.tools import loading

DRIVER = open(sys.argv[1], encoding="utf-8").read()
folders = json.load(open(sys.argv[2], encoding="utf-8"))

def page(folder):
    os.chdir(folder)
    sys.path[0] = folder  # as for `python driver.py` started there
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.argv = ["driver.py", "blocks.json"]
    try:
        exec(compile(DRIVER, "driver.py", "exec"), {"__name__": "__main__"})
        status = 0
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return status

def reap(pid, wait_status):
    with open(os.path.join(running.pop(pid), "status.txt"), "w") as handle:
        handle.write(str(os.waitstatus_to_exitcode(wait_status)))

running = {}
for folder in folders:
    if len(running) == 2:
        reap(*os.wait())
    pid = os.fork()
    if pid == 0:
        os._exit(page(folder))
    running[pid] = folder
while running:
    reap(*os.wait())
"""


def prepare_page(path: Path, workdir: Path, demo: Path) -> bool:
    """Lay out the page's folder (its blocks, a copy of the demo's outputs); False when it has no block to run."""
    blocks = [dict(b, page=path.name) for b in code_blocks(path) if b["language"] in RUN_LANGUAGES and not b["not_run"]]
    if not blocks:
        return False
    shutil.copytree(demo, workdir / "outputs" / "demo")  # a fresh copy: blocks may write into it
    (workdir / "blocks.json").write_text(json.dumps(blocks), encoding="utf-8")
    return True


def run_pages(workdirs: list[Path], scratch: Path) -> dict[Path, subprocess.CompletedProcess]:
    """Run the prepared pages' blocks, each in its folder in a process forked from `PAGE_PROCESSES`."""
    (scratch / "driver.py").write_text(DRIVER, encoding="utf-8")
    (scratch / "pages.py").write_text(PAGE_PROCESSES, encoding="utf-8")
    (scratch / "folders.json").write_text(json.dumps([str(folder) for folder in workdirs]), encoding="utf-8")
    done = subprocess.run([sys.executable, "pages.py", "driver.py", "folders.json"], cwd=scratch, env=block_env(),
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"the page processes failed\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    runs = {}
    for folder in workdirs:
        status = folder / "status.txt"
        output = {name: (folder / f"{name}.txt").read_text(encoding="utf-8", errors="replace")
                  if (folder / f"{name}.txt").exists() else "" for name in ("stdout", "stderr")}
        runs[folder] = subprocess.CompletedProcess(["driver.py", "blocks.json"],
                                                   int(status.read_text()) if status.exists() else -1,
                                                   output["stdout"], output["stderr"])
    return runs


def page_path(page: str) -> Path:
    return README if page == "README" else ROOT / "docs" / f"{page}.md"


def block_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               MPLBACKEND="Agg")
    return env


@pytest.fixture(scope="module")
def demo_outputs(tmp_path_factory) -> Path:
    """What `make demo` leaves in outputs/demo that the pages use: the corpus and a trained model folder."""
    from elmo_hf.train.sense_corpus import generate_corpus

    demo = tmp_path_factory.mktemp("outputs") / "demo"
    corpus = demo / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "train.txt").write_text("\n".join(generate_corpus(400, seed=0)) + "\n", encoding="utf-8")
    (corpus / "valid.txt").write_text("\n".join(generate_corpus(200, seed=1000)) + "\n", encoding="utf-8")
    done = run_cli("elmo-pretrain", [
        "--train_file", corpus / "train.txt", "--validation_file", corpus / "valid.txt", "--output_dir",
        demo / "model", "--preset", "tiny", "--word_split", "punctuation", "--max_steps", "3",
        "--per_device_batch_size", "8", "--max_eval_batches", "2", "--use_cpu", "--disable_tqdm", "--report_to",
        "none"])
    assert done.returncode == 0, done.stderr[-4000:]
    return demo


def test_readme_is_short_and_dateless():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    assert not re.search(r"20\d\d-\d\d-\d\d", text), "a date in the README goes stale: put it in benchmarks/"
    assert not re.search(r"issue \d+", text, flags=re.IGNORECASE)
    assert "../shared" not in text


@pytest.mark.parametrize("page", ["README", *DOC_PAGES])
def test_skipped_blocks_say_why(page):
    path = README if page == "README" else ROOT / "docs" / f"{page}.md"
    if not path.exists():
        pytest.skip(f"{path.relative_to(ROOT)} does not exist")
    blocks = code_blocks(path)
    assert blocks, f"{path.name} has no code block"
    for block in blocks:
        if block["not_run"] is not None:
            assert len(block["not_run"]) > 10, f"{path.name}:{block['line']}: say why the block is not run"
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text
    assert not re.search(r"issue \d+", text, flags=re.IGNORECASE)


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory, demo_outputs) -> dict:
    """Every page's blocks run, two pages at a time (independent folders; a page is a chain of short commands that
    mostly wait on files, so two overlap well on two cores): page -> its run, or None (no block to run)."""
    pages = [page for page in ["README", *DOC_PAGES] if page_path(page).exists()]
    folders = {page: tmp_path_factory.mktemp(page) for page in pages}
    to_run = {page: folder for page, folder in folders.items() if prepare_page(page_path(page), folder, demo_outputs)}
    runs = run_pages(list(to_run.values()), tmp_path_factory.mktemp("pages"))
    return {page: runs.get(folders[page]) for page in pages}


@pytest.mark.slow
@pytest.mark.timeout(1800)  # its fixture runs every page (about 5 minutes on two idle cores): room for a busy machine
@pytest.mark.parametrize("page", ["README", *DOC_PAGES])
def test_page_blocks_run(page, page_runs):
    if page not in page_runs:
        pytest.skip(f"{page_path(page).relative_to(ROOT)} does not exist")
    done = page_runs[page]
    assert done is None or done.returncode == 0, (
        f"{page_path(page).name}: a block failed\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    )
