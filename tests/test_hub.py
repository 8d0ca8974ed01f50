"""Sharing on the Hub, end to end against a local server that speaks the Hub API (tests/hub_server.py).

* round trip: `model.push_to_hub` / `tokenizer.push_to_hub` in a subprocess pointed at the server (HF_ENDPOINT),
  then loading by repository id with `trust_remote_code=True` in a fresh interpreter where this project cannot be
  imported (AutoModel, AutoModelForPreTraining, AutoTokenizer, the task heads), outputs equal to the in-process
  models; a `revision` pinned to an earlier commit loads that commit; an interrupted push leaves the repository
  as it was;
* offline: loading from the cache that download filled, and from a cache built by hand, with HF_HUB_OFFLINE=1
  and the server gone;
* failures of `push_folder`: server down, wrong token, existing repository, a connection dropped or an error
  during the commit or the LFS upload (no partial commit, folder untouched, the retry succeeds);
* the model card: facts from the configuration and the run, metadata that parses and validates, code that runs.

What a process loads from the Hub is compared with the in-process model to REORDERED (tests/tolerances.py): the same
float32 arithmetic in another process.

Nothing here reaches the real Hub, except `test_real_hub_round_trip`, which runs only when asked to (see there).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
import huggingface_hub.errors
import pytest
import torch
import yaml
from conftest import _NO_PROJECT, REPO, clean_env, record_sleeps, tiny_config
from hub_server import HubServer, split_front_matter
from huggingface_hub import ModelCard
from tolerances import REORDERED, assert_close

from elmo_hf import modeling_elmo
from elmo_hf.modeling_elmo import ElmoConfig, ElmoForPreTraining
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.tools.hub import model_card
from elmo_hf.tools.hub.hub_push import HubPushError, push_folder
from elmo_hf.tools.hub.model_card import render_model_card, write_model_card

TOKEN = "hf_test_token_for_the_local_hub"
REPO_ID = "elmo-org/elmo-tiny"
CLS_REPO_ID = "elmo-org/elmo-tiny-cls"
SENTENCES = ["The cat sat on the mat .", "ELMo reads characters", "Short"]
HEADS = [
    name for name in ("ElmoForSequenceClassification", "ElmoForTokenClassification") if hasattr(modeling_elmo, name)
]
# What a saved model and its ElmoTokenizer carry as remote code: every model file, and the tokenizer's module with the
# siblings it imports (tests/test_layout.py proves the saving side of it).
REMOTE_CODE = sorted(
    {path.name for path in (REPO / "modeling_elmo").glob("*.py")} - {"__init__.py"}
    | {"tokenization_elmo.py", "batch_encoding_elmo.py", "character_ids.py", "padding_elmo.py", "row_cache_elmo.py",
       "text_inputs_elmo.py", "truncation_elmo.py", "word_splits_elmo.py", "word_vocab_elmo.py"}
)


def _tiny_config(**overrides) -> ElmoConfig:
    return tiny_config(vocab_size=40, dropout=0.0, **overrides)


def _dead_endpoint() -> str:
    """The URL of a port that was just closed: nothing answers there."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _hub_env(endpoint: str, hf_home: Path, token: str | None = None, offline: bool = False) -> dict[str, str]:
    """The environment of a client of the local hub: its own HF_HOME, no Xet, short timeouts, no other HF_*."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and k not in ("PYTHONPATH", "PYTHONSTARTUP")
    }
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(hf_home),
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_HUB_ETAG_TIMEOUT="3",
        HF_HUB_DOWNLOAD_TIMEOUT="10",
        PYTHONNOUSERSITE="1",
    )
    if token is not None:
        env["HF_TOKEN"] = token
    if offline:
        env.update(HF_HUB_OFFLINE="1")
    return env


def _run(code: str, env: dict[str, str], cwd: Path, isolated: bool, timeout: int = 240) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON line last, which is returned."""
    prologue = _NO_PROJECT if isolated else ""
    result = subprocess.run(
        [sys.executable, "-c", prologue + code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stdout}\n{result.stderr[-6000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(autouse=True)
def _no_xet(monkeypatch):
    # In this process: classic LFS uploads, as the local hub has no Xet
    # (docs/transformers_traps.md, "Hub without internet").
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = HubServer(tmp_path_factory.mktemp("hub-storage"), token=TOKEN).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Two versions of a tiny pretraining model (+ tokenizer) and a classification head, saved, with the inputs
    and the reference outputs computed here."""
    root = tmp_path_factory.mktemp("saved")
    tokenizer = ElmoTokenizer()
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    labels = torch.randint(0, 40, batch["attention_mask"].shape, generator=torch.Generator().manual_seed(1))
    labels = labels.masked_fill(batch["attention_mask"] == 0, -100)
    reference = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "labels": labels}
    for version, seed in (("v1", 1), ("v2", 2)):
        torch.manual_seed(seed)
        model = ElmoForPreTraining(_tiny_config()).eval()
        model.save_pretrained(root / version)
        tokenizer.save_pretrained(root / version)
        with torch.no_grad():
            out = model(**batch, labels=labels, output_hidden_states=True)
        reference[f"{version}_hidden"] = torch.stack(out.hidden_states)
        reference[f"{version}_loss"] = out.loss
    if "ElmoForSequenceClassification" in HEADS:
        torch.manual_seed(3)
        head = modeling_elmo.ElmoForSequenceClassification(_tiny_config(num_labels=3)).eval()
        head.save_pretrained(root / "cls")
        tokenizer.save_pretrained(root / "cls")
        with torch.no_grad():
            reference["cls_logits"] = head(**batch).logits
    torch.save(reference, root / "reference.pt")
    return root


# --------------------------------------------------------------------------------------------------
# Round trip: push with transformers, load by repository id where only torch and transformers exist
# --------------------------------------------------------------------------------------------------

PUSH = """
import json, os, urllib.request
# registers the classes for auto classes, so save_pretrained copies the code
from elmo_hf import modeling_elmo, tokenization
from transformers import AutoModelForPreTraining, AutoModelForSequenceClassification
from elmo_hf.tokenization import ElmoTokenizer

root, repo, cls_repo = __ROOT__, __REPO__, __CLS__

def fail_next(stage, action):
    body = json.dumps({"stage": stage, "action": action}).encode()
    request = urllib.request.Request(os.environ["HF_ENDPOINT"] + "/_control/fail", data=body, method="POST")
    urllib.request.urlopen(request).read()

import hashlib
from pathlib import Path
from elmo_hf.modeling_elmo import remote_code_elmo
from elmo_hf import tokenization
files = [*remote_code_elmo.model_code_files(),  # the files a saved model and its ElmoTokenizer carry as remote code
         *remote_code_elmo.module_with_siblings("tokenization_elmo", [Path(tokenization.__file__).parent])]
out = {"sources": {file.name: hashlib.sha256(file.read_bytes()).hexdigest() for file in files}}
tokenizer = ElmoTokenizer.from_pretrained(f"{root}/v1")
out["v1_model"] = AutoModelForPreTraining.from_pretrained(f"{root}/v1").push_to_hub(repo).oid
out["v1_tokenizer"] = tokenizer.push_to_hub(repo).oid
model2 = AutoModelForPreTraining.from_pretrained(f"{root}/v2")
out["v2_model"] = model2.push_to_hub(repo, commit_message="second version").oid
if os.path.isdir(f"{root}/cls"):
    AutoModelForSequenceClassification.from_pretrained(f"{root}/cls").push_to_hub(cls_repo)
    tokenizer.push_to_hub(cls_repo)

# Interrupted pushes of another version: the LFS upload refused, then the connection dropped during the commit.
model3 = AutoModelForPreTraining.from_pretrained(f"{root}/v1")
with __import__("torch").no_grad():
    for p in model3.parameters():
        p.add_(1.0)
out["interrupted"] = []
for stage, action in (("lfs_upload", 403), ("commit", "drop")):
    fail_next(stage, action)
    try:
        model3.push_to_hub(repo, commit_message="must not land")
    except Exception as exc:
        out["interrupted"].append(f"{type(exc).__name__}: {exc}")
    else:
        out["interrupted"].append(None)
print(json.dumps(out))
"""

LOAD = """
import json, sys, torch, transformers
from transformers import AutoModel, AutoModelForPreTraining, AutoTokenizer
root, repo, cls_repo, v1_commit, heads = __ARGS__

out, classes = {}, {}
tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
batch = tokenizer(__SENTENCES__, padding=True, return_tensors="pt")
out["input_ids"], out["attention_mask"] = batch["input_ids"], batch["attention_mask"]
labels = torch.load(f"{root}/reference.pt")["labels"]

model = AutoModel.from_pretrained(repo, trust_remote_code=True).eval()
with torch.no_grad():
    out["main_hidden"] = torch.stack(model(**batch, output_hidden_states=True).hidden_states)
pretraining = AutoModelForPreTraining.from_pretrained(repo, trust_remote_code=True).eval()
with torch.no_grad():
    result = pretraining(**batch, labels=labels, output_hidden_states=True)
out["main_pretraining_hidden"], out["main_loss"] = torch.stack(result.hidden_states), result.loss
pinned = AutoModel.from_pretrained(repo, trust_remote_code=True, revision=v1_commit).eval()
with torch.no_grad():
    out["pinned_hidden"] = torch.stack(pinned(**batch, output_hidden_states=True).hidden_states)
for name, obj in (("tokenizer", tokenizer), ("model", model), ("pretraining", pretraining), ("pinned", pinned)):
    classes[name] = f"{type(obj).__module__}.{type(obj).__name__}"

for head in heads:
    auto = getattr(transformers, head.replace("Elmo", "AutoModel"))
    kwargs = {"num_labels": 3} if head.endswith("SequenceClassification") else {"num_labels": 5}
    model = auto.from_pretrained(repo, trust_remote_code=True, **kwargs).eval()
    with torch.no_grad():
        out[head + "_hidden"] = torch.stack(model.elmo(**batch, output_hidden_states=True).hidden_states)
    classes[head] = f"{type(model).__module__}.{type(model).__name__}"
if "ElmoForSequenceClassification" in heads:
    model = transformers.AutoModelForSequenceClassification.from_pretrained(cls_repo, trust_remote_code=True).eval()
    with torch.no_grad():
        out["cls_logits"] = model(**batch).logits
torch.save(out, f"{root}/loaded.pt")
print(json.dumps({"classes": classes, "transformers": transformers.__version__}))
"""


@pytest.fixture(scope="module")
def round_trip(hub, saved, tmp_path_factory):
    """Push (subprocess with the project), then load (subprocess without it); the HF_HOME the load filled."""
    work = tmp_path_factory.mktemp("round-trip")
    push = PUSH.replace("__ROOT__", repr(str(saved))).replace("__REPO__", repr(REPO_ID)).replace("__CLS__",
                                                                                                 repr(CLS_REPO_ID))
    started = time.monotonic()
    pushed = _run(push, _hub_env(hub.url, work / "push-home", token=TOKEN), cwd=REPO, isolated=False)
    push_seconds = time.monotonic() - started
    args = (str(saved), REPO_ID, CLS_REPO_ID, pushed["v1_model"], HEADS)
    load = LOAD.replace("__ARGS__", repr(args)).replace("__SENTENCES__", repr(SENTENCES))
    requests_before = len(hub.requests)
    loaded = _run(load, _hub_env(hub.url, work / "home"), cwd=work, isolated=True)
    return {
        "pushed": pushed,
        "loaded": loaded,
        "outputs": torch.load(saved / "loaded.pt"),
        "reference": torch.load(saved / "reference.pt"),
        "home": work / "home",
        "work": work,
        "load_requests": hub.requests[requests_before:],
        "push_seconds": push_seconds,
    }


@pytest.mark.slow
def test_push_uploads_weights_config_code_and_tokenizer(hub, round_trip):
    pushed = round_trip["pushed"]
    files = hub.files(REPO_ID)
    for name in ["config.json", "model.safetensors", "tokenizer_config.json", "README.md", *REMOTE_CODE]:
        assert name in files, f"{name} was not pushed: {files}"
    assert not [name for name in files if name.endswith(".py") and name not in REMOTE_CODE], files  # nothing else
    # The remote code is the package's own source, byte for byte (as the pushing process imported it).
    assert sorted(pushed["sources"]) == REMOTE_CODE
    for name, digest in pushed["sources"].items():
        assert hashlib.sha256(hub.read(REPO_ID, name)).hexdigest() == digest, name
    config = json.loads(hub.read(REPO_ID, "config.json"))
    assert config["auto_map"]["AutoModel"] == "modeling_elmo.ElmoModel"
    assert config["auto_map"]["AutoModelForPreTraining"] == "modeling_elmo.ElmoForPreTraining"
    for head in HEADS:  # the heads live in their own file
        assert config["auto_map"][head.replace("Elmo", "AutoModel")] == f"modeling_elmo_heads.{head}"
    # model.push_to_hub gives the ELMo model card (model_card.md filled from the config), and the tokenizer's
    # push after it keeps that card.
    for repo in (REPO_ID, CLS_REPO_ID) if "ElmoForSequenceClassification" in HEADS else (REPO_ID,):
        card = ModelCard(hub.read(repo, "README.md").decode("utf-8"))
        assert card.data.library_name == "transformers" and card.data.pipeline_tag == "feature-extraction", repo
        assert "elmo" in card.data.tags and "@inproceedings{peters-etal-2018-deep" in card.text, repo
    tokenizer_config = json.loads(hub.read(REPO_ID, "tokenizer_config.json"))
    assert tokenizer_config["auto_map"]["AutoTokenizer"][0] == "tokenization_elmo.ElmoTokenizer"
    # The weights went through LFS; the history is the three pushes, newest first, on top of the initial commit.
    head_commit = hub.commits(REPO_ID)[0]
    assert head_commit["files"]["model.safetensors"]["lfs"] is not None
    ids = [c["id"] for c in hub.commits(REPO_ID)]
    assert ids[:3] == [pushed["v2_model"], pushed["v1_tokenizer"], pushed["v1_model"]]
    assert len(ids) == 4


@pytest.mark.slow
def test_interrupted_push_leaves_the_repository_as_it_was(hub, round_trip):
    pushed = round_trip["pushed"]
    refused, dropped = pushed["interrupted"]
    assert refused is not None and "uploading 'model.safetensors'" in refused, refused  # huggingface_hub's words
    assert dropped is not None and "disconnected" in dropped.lower(), dropped
    assert hub.head(REPO_ID) == pushed["v2_model"]  # no partial commit: main is the second version
    assert all(c["message"] != "must not land" for c in hub.commits(REPO_ID))


@pytest.mark.slow
def test_load_by_repo_id_with_remote_code_only(round_trip):
    out, ref = round_trip["outputs"], round_trip["reference"]
    classes = round_trip["loaded"]["classes"]
    for name, qualified in classes.items():
        assert qualified.startswith("transformers_modules."), f"{name} was not loaded from the Hub's code: {qualified}"
    assert torch.equal(out["input_ids"], ref["input_ids"])  # the Hub tokenizer encodes as the local one
    assert torch.equal(out["attention_mask"], ref["attention_mask"])
    assert_close(out["main_hidden"], ref["v2_hidden"], REORDERED, what="AutoModel from the Hub")
    assert_close(out["main_pretraining_hidden"], ref["v2_hidden"], REORDERED, what="AutoModelForPreTraining")
    assert_close(out["main_loss"], ref["v2_loss"], REORDERED, what="AutoModelForPreTraining's loss")
    for head in HEADS:  # the heads load from the pretraining checkpoint, with its biLM
        assert_close(out[head + "_hidden"], ref["v2_hidden"], REORDERED, what=head)
    if "ElmoForSequenceClassification" in HEADS:  # and a head pushed whole comes back whole
        assert_close(out["cls_logits"], ref["cls_logits"], REORDERED, what="a classifier pushed whole")


REMOTE_PUSH = """
import json
from transformers import AutoModel
model = AutoModel.from_pretrained(__SOURCE__, trust_remote_code=True)
info = model.push_to_hub(__TARGET__)
print(json.dumps({"oid": info.oid, "module": type(model).__module__}))
"""


@pytest.mark.slow
def test_model_loaded_as_remote_code_pushes_again(hub, round_trip):
    """Where the project is not installed, the remote code's push_to_hub falls back to transformers' own. The push
    carries every file its config.json names: those transformers did not fetch to load an AutoModel (the heads',
    the pipelines') come from the repository it was loaded from, at the commit loaded."""
    target = "elmo-org/pushed-from-remote-code"
    code = REMOTE_PUSH.replace("__SOURCE__", repr(REPO_ID)).replace("__TARGET__", repr(target))
    work = round_trip["work"]
    out = _run(code, _hub_env(hub.url, work / "remote-push-home", token=TOKEN), cwd=work, isolated=True)
    assert out["module"].startswith("transformers_modules.") and hub.head(target) == out["oid"]
    files = hub.files(target)
    assert {"config.json", "model.safetensors", "README.md", "modeling_elmo.py", "configuration_elmo.py"} <= set(files)
    config = json.loads(hub.read(target, "config.json"))
    assert config["auto_map"]["AutoModel"].endswith("modeling_elmo.ElmoModel")
    named = [*config["auto_map"].values(), *(entry["impl"] for entry in config["custom_pipelines"].values())]
    assert set(config["auto_map"]) >= {"AutoModelForTokenClassification", "AutoModelForQuestionAnswering"}
    assert {"token-classification", "question-answering"} <= set(config["custom_pipelines"])
    assert {reference.rsplit(".", 1)[0] + ".py" for reference in named} <= set(files)
    assert "elmo_sentence_pooling.py" in files


@pytest.mark.slow
def test_pinned_revision_loads_that_commit(round_trip):
    out, ref = round_trip["outputs"], round_trip["reference"]
    assert_close(out["pinned_hidden"], ref["v1_hidden"], REORDERED, what="revision pinned to the first commit")
    assert (out["pinned_hidden"] - out["main_hidden"]).abs().max() > 1e-3  # the two versions differ


@pytest.mark.slow
def test_load_touches_only_read_endpoints(round_trip):
    methods = {(method, status) for method, _, status in round_trip["load_requests"]}
    assert all(method in ("GET", "HEAD", "POST") for method, _ in methods)
    assert not any(path.endswith(("/commit/main", "/preupload/main")) for _, path, _ in round_trip["load_requests"])
    assert not any(status >= 500 for _, status in methods), round_trip["load_requests"]


OFFLINE = """
import json, os, time, torch
from transformers import AutoModel, AutoTokenizer
repo, hand_cache, hand_repo = __ARGS__
tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
batch = tokenizer(__SENTENCES__, padding=True, return_tensors="pt")
out = {}
with torch.no_grad():
    model = AutoModel.from_pretrained(repo, trust_remote_code=True).eval()
    out["cache"] = torch.stack(model(**batch, output_hidden_states=True).hidden_states)
    model = AutoModel.from_pretrained(hand_repo, trust_remote_code=True, cache_dir=hand_cache).eval()
    out["hand"] = torch.stack(model(**batch, output_hidden_states=True).hidden_states)
torch.save(out, os.path.join(hand_cache, "offline.pt"))
started = time.monotonic()
try:
    AutoModel.from_pretrained("elmo-org/never-downloaded", trust_remote_code=True)
except OSError as exc:
    print(json.dumps({"error": str(exc), "seconds": time.monotonic() - started}))
"""


@pytest.mark.slow
def test_offline_load_from_cache_with_the_server_gone(hub, saved, round_trip):
    work = round_trip["work"]
    # A cache built by hand: refs/main holds a commit id, snapshots/<commit>/ the files
    # (docs/transformers_traps.md, "Offline cache").
    hand_cache = work / "hand-cache"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = hand_cache / "models--someone--elmo-by-hand" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in (saved / "v1").iterdir():
        shutil.copy(path, snapshot / path.name)
    (hand_cache / "models--someone--elmo-by-hand" / "refs").mkdir()
    (hand_cache / "models--someone--elmo-by-hand" / "refs" / "main").write_text(commit)

    requests_before = len(hub.requests)
    env = _hub_env(_dead_endpoint(), round_trip["home"], offline=True)
    code = OFFLINE.replace("__ARGS__", repr((REPO_ID, str(hand_cache), "someone/elmo-by-hand")))
    code = code.replace("__SENTENCES__", repr(SENTENCES))
    missing = _run(code, env, cwd=work, isolated=True)
    assert len(hub.requests) == requests_before
    assert "offline" in missing["error"].lower() and missing["seconds"] < 5, missing
    out, ref = torch.load(hand_cache / "offline.pt"), round_trip["reference"]
    assert_close(out["cache"], ref["v2_hidden"], REORDERED, what="offline, from the download cache")
    assert_close(out["hand"], ref["v1_hidden"], REORDERED, what="offline, from a cache built by hand")


SERVER_DOWN = """
import json, time, torch
import huggingface_hub.utils._http
from transformers import AutoModel

class RecordedWaits:
    # huggingface_hub's waits between two attempts of a request (1, 2, 4, 8, 8 s), recorded instead of slept: it
    # has no setting for them. Everything else of `time` is the module's own.
    waits = []

    def sleep(self, seconds):
        self.waits.append(seconds)

    def __getattr__(self, name):
        return getattr(time, name)

huggingface_hub.utils._http.time = RecordedWaits()
out = {}
started = time.monotonic()
model = AutoModel.from_pretrained(__REPO__, trust_remote_code=True).eval()  # cached: falls back to the cache
out["cached_seconds"], out["cached_waits"] = time.monotonic() - started, list(RecordedWaits.waits)
started = time.monotonic()
try:
    AutoModel.from_pretrained("elmo-org/never-downloaded", trust_remote_code=True)
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
else:
    out["error"] = None
out["missing_seconds"], out["missing_waits"] = (time.monotonic() - started,
                                                RecordedWaits.waits[len(out["cached_waits"]):])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_load_with_the_server_down(round_trip, tmp_path):
    """Not offline and nothing answers: a cached model loads from the cache at once; one never downloaded fails with
    transformers' "couldn't connect" error after huggingface_hub's fixed retries (about 25 s of waiting, recorded
    here instead of slept; HF_HUB_OFFLINE=1 makes both immediate). AutoTokenizer is slower here: it retries each
    optional tokenizer file (minutes), so users without a network should set HF_HUB_OFFLINE=1."""
    home = tmp_path / "home"
    shutil.copytree(round_trip["home"], home)
    out = _run(SERVER_DOWN.replace("__REPO__", repr(REPO_ID)), _hub_env(_dead_endpoint(), home),
               cwd=tmp_path, isolated=True, timeout=180)
    assert out["cached_waits"] == [], out  # at once: no retry, no wait (the seconds it took depend on the load)
    assert out["error"] is not None and out["error"].startswith("OSError"), out
    assert "couldn't connect" in out["error"] and "127.0.0.1" in out["error"], out["error"]
    assert out["missing_waits"], out  # it retried: the waits a user sits through, recorded
    assert out["missing_seconds"] + sum(out["missing_waits"]) < 60, out


# --------------------------------------------------------------------------------------------------
# push_folder: the function behind the commands' --push_to_hub
# --------------------------------------------------------------------------------------------------


def _copy(saved: Path, tmp_path: Path, version: str = "v1") -> Path:
    folder = tmp_path / f"model-{version}"
    shutil.copytree(saved / version, folder)
    return folder


def test_push_folder_pushes_everything_with_the_model_card(hub, saved, tmp_path):
    folder = _copy(saved, tmp_path)
    info = push_folder(folder, "elmo-org/pushed-folder", token=TOKEN, endpoint=hub.url, private=True)
    assert info.oid == hub.head("elmo-org/pushed-folder")
    assert info.commit_url.endswith(info.oid)
    files = hub.files("elmo-org/pushed-folder")
    assert {"README.md", "config.json", "model.safetensors", "tokenizer_config.json", *REMOTE_CODE} <= set(files)
    card = ModelCard(hub.read("elmo-org/pushed-folder", "README.md").decode())
    assert card.data.library_name == "transformers" and "elmo" in card.data.tags
    assert 'from_pretrained("elmo-org/pushed-folder"' in card.text
    assert not (folder / "README.md").exists()  # the card went into the commit, the folder is only read
    # Pushing the same folder again adds nothing; a branch gets its own commit and main stays.
    assert push_folder(folder, "elmo-org/pushed-folder", token=TOKEN, endpoint=hub.url).oid == info.oid
    (folder / "extra.txt").write_text("on a branch")
    branch = push_folder(folder, "elmo-org/pushed-folder", token=TOKEN, endpoint=hub.url, revision="dev")
    assert hub.head("elmo-org/pushed-folder", "dev") == branch.oid != info.oid
    assert hub.head("elmo-org/pushed-folder") == info.oid


def test_push_folder_keeps_the_card_a_repository_has(hub, saved, tmp_path):
    api = huggingface_hub.HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("elmo-org/own-card")
    api.upload_file(path_or_fileobj=b"---\nlicense: mit\n---\n# My own card\n", path_in_repo="README.md",
                    repo_id="elmo-org/own-card")
    push_folder(_copy(saved, tmp_path), "elmo-org/own-card", token=TOKEN, endpoint=hub.url)
    assert "model.safetensors" in hub.files("elmo-org/own-card")
    assert hub.read("elmo-org/own-card", "README.md").decode() == "---\nlicense: mit\n---\n# My own card\n"


def test_push_folder_to_the_token_owner_namespace(hub, saved, tmp_path):
    info = push_folder(_copy(saved, tmp_path), "bare-name", token=TOKEN, endpoint=hub.url)
    assert info.repo_url.repo_id == f"{hub.user}/bare-name" and hub.head(f"{hub.user}/bare-name") == info.oid
    assert f'from_pretrained("{hub.user}/bare-name"' in hub.read(f"{hub.user}/bare-name", "README.md").decode()


def test_push_folder_repository_exists(hub, saved, tmp_path):
    folder = _copy(saved, tmp_path)
    hub.create_repo("elmo-org/taken")
    with pytest.raises(HubPushError, match="already exists.*exist_ok=True"):
        push_folder(folder, "elmo-org/taken", token=TOKEN, endpoint=hub.url, exist_ok=False)
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError, match="409"):  # the plain client says 409
        huggingface_hub.HfApi(endpoint=hub.url, token=TOKEN).create_repo("elmo-org/taken")
    info = push_folder(folder, "elmo-org/taken", token=TOKEN, endpoint=hub.url)  # exist_ok=True by default
    assert hub.head("elmo-org/taken") == info.oid


def test_push_folder_wrong_token(hub, saved, tmp_path):
    folder = _copy(saved, tmp_path)
    with pytest.raises(HubPushError, match=r"(?s)authentication failed.*401.*token") as caught:
        push_folder(folder, "elmo-org/bad-token", token="hf_wrong", endpoint=hub.url)
    assert "Invalid credentials" in str(caught.value.__cause__)
    assert not hub.repo_exists("elmo-org/bad-token")


def test_push_folder_server_down(saved, tmp_path, monkeypatch):
    """Nothing answers: the push fails at its first request, in one error naming the endpoint, without the Hub
    client's retries (its waits recorded, not slept)."""
    folder = _copy(saved, tmp_path)
    endpoint = _dead_endpoint()
    waits = record_sleeps(monkeypatch, huggingface_hub.utils._http)
    with pytest.raises(HubPushError, match="failed while creating the repository") as caught:
        push_folder(folder, "elmo-org/nowhere", token=TOKEN, endpoint=endpoint)
    assert endpoint in str(caught.value)
    assert waits == []


@pytest.mark.parametrize("stage, action", [("commit", "drop"), ("commit", 500), ("lfs_upload", 403)])
def test_push_folder_interrupted_then_retried(hub, saved, tmp_path, stage, action):
    repo_id = f"elmo-org/interrupted-{stage}-{action}".replace("_", "-")
    first = push_folder(_copy(saved, tmp_path, "v1"), repo_id, token=TOKEN, endpoint=hub.url)
    folder = _copy(saved, tmp_path, "v2")
    before = _digest(folder)
    hub.fail(stage, action)  # huggingface_hub retries neither (it would retry a 5xx or a dropped LFS upload)
    try:
        with pytest.raises(HubPushError, match="Run the same push again"):
            push_folder(folder, repo_id, token=TOKEN, endpoint=hub.url)
    finally:
        hub._faults.clear()
    assert hub.head(repo_id) == first.oid  # nothing half-committed
    assert _digest(folder) == before  # the local folder is untouched
    retried = push_folder(folder, repo_id, token=TOKEN, endpoint=hub.url)
    assert hub.head(repo_id) == retried.oid != first.oid
    assert hub.read(repo_id, "model.safetensors") == (folder / "model.safetensors").read_bytes()


@pytest.mark.parametrize("action", [500, "drop"])
def test_push_folder_survives_a_transient_lfs_error(hub, saved, tmp_path, action):
    hub.fail("lfs_upload", action)  # huggingface_hub retries the upload to the storage (1 s later)
    repo_id = f"elmo-org/transient-{action}"
    info = push_folder(_copy(saved, tmp_path), repo_id, token=TOKEN, endpoint=hub.url)
    assert hub.head(repo_id) == info.oid
    assert [status for method, path, status in hub.requests if method == "PUT" and repo_id in path] == [
        0 if action == "drop" else 500,
        200,
    ]


def test_push_folder_checks_the_remote_code_is_there(hub, saved, tmp_path):
    folder = _copy(saved, tmp_path)
    (folder / "modeling_elmo.py").unlink()
    requests_before = len(hub.requests)
    with pytest.raises(FileNotFoundError, match="modeling_elmo.py.*trust_remote_code"):
        push_folder(folder, "elmo-org/no-code", token=TOKEN, endpoint=hub.url)
    assert len(hub.requests) == requests_before  # refused before contacting the Hub
    with pytest.raises(FileNotFoundError, match="no such folder"):
        push_folder(tmp_path / "missing", "elmo-org/no-code", token=TOKEN, endpoint=hub.url)


# --------------------------------------------------------------------------------------------------
# The model card
# --------------------------------------------------------------------------------------------------

RESULTS = {"dataset": "wikitext-103", "split": "test", "perplexity": 41.25, "forward_perplexity": 40.5,
           "backward_perplexity": 42.0}
PARITY = {"reference": "bilm-tf outputs", "max_abs_diff_top_layer": 1.19e-6, "max_abs_diff_token_embeddings": 7.2e-7}


def test_model_card_fills_config_facts_results_and_parity():
    config = ElmoConfig.from_preset("original")
    card = render_model_card(
        config,
        model_id="someone/elmo-original",
        base_model="allenai/elmo-original",
        datasets=["wikitext-103"],
        training={"steps": 1200, "batch_size": 128, "description": "Continued pretraining."},
        results=RESULTS,
        parity=PARITY,
        num_parameters=93_600_864,
        language="en",
    )
    data = ModelCard(card).data
    assert data.library_name == "transformers" and data.pipeline_tag == "feature-extraction"
    assert data.license == "apache-2.0" and data.base_model == "allenai/elmo-original"
    assert data.datasets == ["wikitext-103"] and {"elmo", "custom_code"} <= set(data.tags)
    assert data.model_name == "someone/elmo-original"
    results = {r.metric_name: r for r in data.eval_results}
    assert results["Perplexity"].metric_value == 41.25 and results["Perplexity"].metric_type == "perplexity"
    assert results["Forward perplexity"].dataset_split == "test"
    assert results["Backward perplexity"].dataset_name == "wikitext-103"
    # config facts: the published original size, 93.6M parameters (docs/original_model.md, "The 5.5B model")
    for fact in ("`original`", "cell size 4096", "projection 512", "2 layers per direction", "| Highway layers | 2 |",
                 "F = 2048", "93.6M (93,600,864)", "1024 (2P)", "skip connections yes"):
        assert fact in card, fact
    for fact in ("41.25", "40.5", "1.19e-06", "7.20e-07", "bilm-tf outputs", "| Steps | 1,200 |",
                 "Continued pretraining."):
        assert fact in card, fact
    assert "@inproceedings{peters-etal-2018-deep" in card and "trust_remote_code=True" in card
    assert "{{" not in card


def test_model_card_without_results_and_the_fallback_template(monkeypatch, caplog):
    card = render_model_card(_tiny_config())
    assert "No evaluation results were recorded" in card and "model-index" not in card
    assert ModelCard(card).data.eval_results is None
    monkeypatch.setattr(model_card, "TEMPLATE_LOCATIONS", (Path("/nonexistent/model_card.md"),))
    with caplog.at_level("WARNING"):
        fallback = render_model_card(_tiny_config(), model_id="a/b", results={"perplexity": 12.0})
    assert "model_card.md was not found" in caplog.text
    assert ModelCard(fallback).data.eval_results[0].metric_value == 12.0
    assert 'from_pretrained("a/b"' in fallback


def test_model_card_of_a_pretraining_run(tmp_path, hub, monkeypatch):
    """What elmo-pretrain gives: run facts, perplexities with a token count, a local folder as starting point."""
    local_start = tmp_path / "previous-run"
    local_start.mkdir()
    card = render_model_card(
        _tiny_config(),
        base_model=str(local_start),
        training={"steps": 20, "tokens_seen": 12800, "train_seconds": 3.51, "corpus": ["a.txt", "b.txt"]},
        results={"forward_perplexity": 35.2, "backward_perplexity": 36.8, "average_perplexity": 36.0,
                 "eval_tokens": 4096},
    )
    data = ModelCard(card).data
    assert data.base_model is None and f"`{local_start}`" in card  # a folder is named, not put in the metadata
    assert sorted(r.metric_name for r in data.eval_results) == [
        "Average perplexity", "Backward perplexity", "Forward perplexity"]
    assert "| Eval tokens | 4,096 |" in card and "| Corpus | a.txt, b.txt |" in card
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    ModelCard(card).validate()


def test_model_card_template_is_the_repository_file():
    template = REPO / "model_card.md"
    found = model_card.find_model_card_template()
    assert found is not None and found.resolve() == template.resolve()
    assert found.read_text() == template.read_text()


@pytest.mark.slow
def test_the_wheel_carries_the_model_card_template_and_the_installed_project_finds_it(tmp_path):
    """model_card.md stays at the top of the repository and travels in the wheel as a data file: the wheel pip builds,
    installed into a fresh environment (its dependencies seen from this one), finds it under its own prefix."""
    wheels, env, source = tmp_path / "wheels", tmp_path / "env", tmp_path / "source"
    # a copy of the checkout to build from: the build writes its build/ and egg-info beside the sources
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__",
                                                                "outputs"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels),
                    str(source)], check=True, capture_output=True, timeout=300)
    # the environment's own pip: this one's, even with --prefix, would uninstall the project from this environment
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    python = str(env / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-compile",
                    *map(str, wheels.glob("elmo_hf-*.whl"))], check=True, capture_output=True, timeout=300)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    dependencies = [path for path in sys.path if path.endswith("site-packages")]
    Path(site, "dependencies.pth").write_text("\n".join(dependencies) + "\n")  # torch, transformers: this environment's
    found = subprocess.run(
        [python, "-c",
         "from elmo_hf.tools.hub import model_card; print(model_card.__file__); "
         "print(model_card.find_model_card_template())"],
        cwd=tmp_path, env=clean_env(), check=True, capture_output=True, text=True, timeout=300).stdout.split()
    assert found[0].startswith(site), found  # the installed wheel's module, not this checkout's
    assert Path(found[1]) == env / "share" / "elmo-hf" / "model_card.md"
    assert Path(found[1]).read_text(encoding="utf-8") == (REPO / "model_card.md").read_text(encoding="utf-8")


def test_model_card_validates_against_the_hub_api(hub, monkeypatch):
    card = ModelCard(render_model_card(_tiny_config(), model_id="a/b", results=RESULTS, parity=PARITY))
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    card.validate()  # POST /api/validate-yaml
    assert hub.requests[-1][:2] == ("POST", "/api/validate-yaml") and hub.requests[-1][2] == 200
    broken = ModelCard(str(card).replace("license: apache-2.0", "license: not-a-license"))
    with pytest.raises(ValueError, match="license"):
        broken.validate()
    yaml_text, _ = split_front_matter(str(card))
    metadata = yaml.safe_load(yaml_text)
    index = metadata["model-index"][0]["results"][0]
    assert index["task"]["type"] == "text-generation" and index["dataset"]["name"] == "wikitext-103"


def test_model_card_code_runs(tmp_path, saved):
    """The card's first example, run against a saved folder in place of the repository id."""
    folder = _copy(saved, tmp_path)
    path = write_model_card(folder)  # the config comes from the folder
    card = path.read_text()
    code = re.findall(r"```python\n(.*?)```", card, re.DOTALL)[0].replace('"path/to/model"', repr(str(folder)))
    namespace: dict = {}
    exec(compile(code, "model_card_example", "exec"), namespace)
    assert namespace["elmo"].shape == (len(namespace["batch"]["input_ids"]), namespace["batch"]["input_ids"].shape[1],
                                       32)


# --------------------------------------------------------------------------------------------------
# The real Hub: only on request
# --------------------------------------------------------------------------------------------------


def test_real_hub_round_trip(saved, tmp_path):
    """Push to and load from huggingface.co. Runs only with HF_TOKEN (a write token), ELMO_TEST_HUB_REPO (a
    repository id to push to, e.g. "you/elmo-hub-test", created if needed) and network access."""
    token, repo_id = os.environ.get("HF_TOKEN"), os.environ.get("ELMO_TEST_HUB_REPO")
    if not token:
        pytest.skip("real Hub test: HF_TOKEN is not set (needs a write token, ELMO_TEST_HUB_REPO and network)")
    if not repo_id:
        pytest.skip("real Hub test: set ELMO_TEST_HUB_REPO to the repository id it may push to")
    try:
        socket.create_connection(("huggingface.co", 443), timeout=5).close()
    except OSError as exc:
        pytest.skip(f"real Hub test: huggingface.co is not reachable ({exc})")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", False)
    try:
        info = push_folder(_copy(saved, tmp_path), repo_id, token=token, private=True, commit_message="test push")
    finally:
        monkeypatch.undo()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HOME"] = str(tmp_path / "home")
    code = f"""
import json, torch
from transformers import AutoModel, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained({repo_id!r}, trust_remote_code=True, revision={info.oid!r})
model = AutoModel.from_pretrained({repo_id!r}, trust_remote_code=True, revision={info.oid!r}).eval()
batch = tokenizer({SENTENCES!r}, padding=True, return_tensors="pt")
with torch.no_grad():
    torch.save(torch.stack(model(**batch, output_hidden_states=True).hidden_states), {str(tmp_path / "real.pt")!r})
print(json.dumps({{"ok": True}}))
"""
    _run(code, env, cwd=tmp_path, isolated=True, timeout=600)
    reference = torch.load(saved / "reference.pt")
    assert_close(torch.load(tmp_path / "real.pt"), reference["v1_hidden"], REORDERED, what="the real Hub")


# --------------------------------------------------------------------------------------------------
# The commands push too: the converter (--push_to_hub REPO_ID) and pretraining (--push_to_hub --hub_model_id)
# --------------------------------------------------------------------------------------------------


def _command_env(hub: HubServer, tmp_path: Path, token: str = TOKEN) -> dict[str, str]:
    env = _hub_env(hub.url, tmp_path / "hf-home-cmd", token=token)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.slow
def test_converter_pushes_with_its_model_card(hub, tmp_path):
    options = Path(__file__).resolve().parents[2] / "shared" / "data" / "elmo-fixtures" / "allennlp" / "options.json"
    if not options.exists():
        pytest.skip(f"shared data file {options} is absent")
    weights = options.parent / "lm_weights.hdf5"
    out = tmp_path / "converted"
    command = [str(Path(sys.executable).parent / "elmo-convert"), "--options_file", str(options),
               "--weight_file", str(weights), "--output_dir", str(out), "--push_to_hub", "elmo-org/converted-fixture"]
    result = subprocess.run(command, env=_command_env(hub, tmp_path), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "pushed" in result.stderr
    card = (out / "README.md").read_text()
    assert "1.2e-6" in card  # the converter's parity with the original TensorFlow outputs
    files = hub.files("elmo-org/converted-fixture")
    for name in ("README.md", "config.json", "model.safetensors", *REMOTE_CODE, "tokenizer_config.json"):
        assert name in files, (name, files)
    # a bad token: the folder is still written, the push fails with a clear message and exit status 1 (a run that
    # failed after writing, not bad input that wrote nothing)
    again = [*command[:-3], str(tmp_path / "converted-2"), "--push_to_hub", "elmo-org/converted-2"]
    result = subprocess.run(again, env=_command_env(hub, tmp_path, token="hf_wrong"), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1 and "push failed" in result.stderr
    assert (tmp_path / "converted-2" / "model.safetensors").exists()


@pytest.mark.slow
def test_pretraining_pushes_its_output_folder(hub, tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(f"the cat number {i % 7} sat on the mat ." for i in range(120)) + "\n")
    out = tmp_path / "trained"
    command = [str(Path(sys.executable).parent / "elmo-pretrain"), "--train_file", str(corpus), "--output_dir",
               str(out),
               "--preset", "tiny", "--max_steps", "2", "--per_device_batch_size", "4", "--unroll_steps", "8",
               "--report_to", "none", "--disable_tqdm", "--push_to_hub", "--hub_model_id", "elmo-org/pretrained"]
    result = subprocess.run(command, env=_command_env(hub, tmp_path), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    code = f"""
import json, torch
from transformers import AutoModelForPreTraining, AutoTokenizer
model = AutoModelForPreTraining.from_pretrained({"elmo-org/pretrained"!r}, trust_remote_code=True).eval()
tok = AutoTokenizer.from_pretrained({"elmo-org/pretrained"!r}, trust_remote_code=True)
batch = tok(["the cat sat"], return_tensors="pt")
print(json.dumps({{"vocab": tok.word_vocab_size, "out": model(**batch).last_hidden_state.flatten().tolist()}}))
"""
    got = _run(code, _command_env(hub, tmp_path), tmp_path, isolated=True)
    from transformers import AutoModelForPreTraining, AutoTokenizer

    local = AutoModelForPreTraining.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    expected = local(**tokenizer(["the cat sat"], return_tensors="pt")).last_hidden_state.flatten()
    assert got["vocab"] == tokenizer.word_vocab_size
    assert_close(torch.tensor(got["out"]), expected, REORDERED, what="pretrained, pushed, loaded from the Hub")
