"""A small stand-in for the Hugging Face Hub HTTP API, for tests: 127.0.0.1 only, repositories in a folder.

It speaks what `huggingface_hub` 2.4 and transformers 5.x use to push and to download a model
(docs/transformers_traps.md, "Hub without internet"), with the formats of the real Hub:

* account: `GET /api/whoami-v2`, `GET /api/agent-harnesses` (an empty registry);
* repositories: `POST /api/repos/create` (409 when it exists), `DELETE /api/repos/delete`,
  `GET /api/models/{id}[/revision/{rev}]`, `GET .../refs`, `GET .../commits/{rev}`,
  `POST .../branch/{branch}`;
* model cards: `POST /api/validate-yaml` (a basic check of the YAML metadata, see `validate_card_metadata`);
* commits: `POST .../preupload/{rev}` (which files go through LFS), `POST .../commit/{rev}` (NDJSON: `header`,
  `file`, `lfsFile`, `deletedFile`, `deletedFolder` lines, applied atomically: all of a commit or nothing);
* LFS: `POST /{id}.git/info/lfs/objects/batch` answering plain PUT upload actions to `/_lfs/{id}/{oid}` (the
  content is checked against its sha256 and stored atomically; objects belong to a repository) and a verify action;
* listing: `GET .../tree/{rev}[/{path}]`, `POST .../paths-info/{rev}`;
* files: `HEAD`/`GET /{id}/resolve/{rev}/{path}` with `X-Repo-Commit`, `ETag` (git blob sha1, or the sha256 of
  an LFS file, also in `X-Linked-Etag`/`X-Linked-Size`), byte ranges, and 404 + `X-Error-Code`
  (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`) like the Hub.

There is no Xet: clients must run with `HF_HUB_DISABLE_XET=1` (the Xet token endpoints answer 501 saying so), or
the server can be told to answer "regular" to every preupload (`lfs=False`).

Authentication: with `token=None` any token (or none) is accepted. With a token set, a request carrying another
token gets 401 "Invalid credentials in Authorization header" (as the Hub), and writes without a token get 401.

Faults, to test interrupted pushes: `fail(stage, action, times)` makes the next `times` requests of a stage
("create", "preupload", "lfs_batch", "lfs_upload", "commit", "resolve", "model_info") answer `action`: an HTTP
status code, or "drop" to read the request and close the connection without any answer. A failed request
changes nothing on the server. A client in another process can ask for the same with
`POST /_control/fail` and the JSON `{"stage": ..., "action": ..., "times": ...}`.

Every request is recorded in `requests` (method, path, status); requests no route matched go to `unhandled`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

logger = logging.getLogger(__name__)

# Paths stored through LFS, as in the .gitattributes the Hub writes into every new model repository.
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".hdf5", ".msgpack", ".onnx", ".npz", ".pkl")
LFS_MIN_SIZE = 10 * 1024 * 1024

GITATTRIBUTES = "".join(f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in LFS_SUFFIXES)

# A subset of the licenses the Hub accepts in `license:` (https://huggingface.co/docs/hub/repositories-licenses).
KNOWN_LICENSES = {
    "apache-2.0", "mit", "bsd-3-clause", "bsd-2-clause", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0",
    "cc-by-nc-sa-4.0", "cc0-1.0", "gpl-3.0", "lgpl-3.0", "agpl-3.0", "openrail", "llama2", "other", "unknown",
}
KNOWN_PIPELINE_TAGS = {
    "feature-extraction", "text-classification", "token-classification", "fill-mask", "text-generation",
    "question-answering", "sentence-similarity", "zero-shot-classification",
}
STAGES = ("create", "preupload", "lfs_batch", "lfs_upload", "commit", "resolve", "model_info")

_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_REPO = r"(?P<repo>[^/]+/[^/]+)"
_API = r"^/api/models/" + _REPO


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def split_front_matter(content: str) -> tuple[str | None, str]:
    """(`yaml text` or None, body) of a model card."""
    match = re.match(r"^---\s*\n(.*?)\n---\s*(?:\n|$)", content, re.DOTALL)
    if match is None:
        return None, content
    return match.group(1), content[match.end() :]


def validate_card_metadata(content: str) -> tuple[list[str], list[str]]:
    """Errors and warnings of a model card's YAML metadata: a basic version of the Hub's own check."""
    text, _ = split_front_matter(content)
    if text is None or not text.strip():
        return [], ["empty or missing yaml metadata in repo card"]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [f"YAML could not be parsed: {exc}"], []
    if not isinstance(data, dict):
        return [f"metadata must be a YAML mapping, got {type(data).__name__}"], []
    errors = []
    license_ = data.get("license")
    if license_ is not None and license_ not in KNOWN_LICENSES:
        errors.append(f'"license" must be one of the Hub licenses, got {license_!r}')
    if "pipeline_tag" in data and data["pipeline_tag"] not in KNOWN_PIPELINE_TAGS:
        errors.append(f'"pipeline_tag" is not a known task: {data["pipeline_tag"]!r}')
    for key in ("tags", "datasets", "language"):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            errors.append(f'"{key}" must be a string or a list of strings, got {value!r}')
    base_model = data.get("base_model")
    if base_model is not None and not (
        (isinstance(base_model, str) and "/" in base_model)
        or (isinstance(base_model, list) and all(isinstance(v, str) and "/" in v for v in base_model))
    ):
        errors.append(f'"base_model" must be a model id "org/name" (or a list of them), got {base_model!r}')
    if "library_name" in data and not isinstance(data["library_name"], str):
        errors.append('"library_name" must be a string')
    if "model-index" in data:
        errors.extend(_model_index_errors(data["model-index"]))
    return errors, []


def _model_index_errors(index) -> list[str]:
    if not isinstance(index, list) or not index:
        return ['"model-index" must be a non-empty list']
    errors = []
    for model in index:
        if not isinstance(model, dict) or not isinstance(model.get("name"), str):
            errors.append('"model-index" entries need a "name"')
            continue
        results = model.get("results")
        if not isinstance(results, list) or not results:
            errors.append(f'"model-index" entry {model.get("name")!r} needs a non-empty "results" list')
            continue
        for result in results:
            task, dataset, metrics = result.get("task"), result.get("dataset"), result.get("metrics")
            if not isinstance(task, dict) or not isinstance(task.get("type"), str):
                errors.append('every model-index result needs "task.type"')
            if not isinstance(dataset, dict) or not all(isinstance(dataset.get(k), str) for k in ("type", "name")):
                errors.append('every model-index result needs "dataset.type" and "dataset.name"')
            if not isinstance(metrics, list) or not metrics:
                errors.append('every model-index result needs a non-empty "metrics" list')
                continue
            for metric in metrics:
                if not isinstance(metric, dict) or not isinstance(metric.get("type"), str) or "value" not in metric:
                    errors.append(f'every metric needs "type" and "value", got {metric!r}')
    return errors


class HubError(Exception):
    """An error answer: status, message, and the Hub's `X-Error-Code` when it has one."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class HubServer:
    """The Hub API on 127.0.0.1 (port chosen by the system), storing repositories under `root`.

    Args:
        root: folder for the stored objects and the repositories' state.
        token: the only token accepted, or None to accept any token (and anonymous writes).
        user: the account name `whoami` answers, and the namespace of repository ids given without one.
        lfs: whether binary files go through LFS (else every file is committed inline, "regular").
    """

    def __init__(self, root: str | os.PathLike, *, token: str | None = None, user: str = "tester", lfs: bool = True):
        self.root = Path(root)
        (self.root / "lfs").mkdir(parents=True, exist_ok=True)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        (self.root / "repos").mkdir(parents=True, exist_ok=True)
        self.token = token
        self.user = user
        self.lfs = lfs
        self.requests: list[tuple[str, str, int]] = []
        self.unhandled: list[tuple[str, str]] = []
        self._faults: dict[str, list] = {}
        self._repos: dict[str, dict] = {}
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # ----- life cycle -------------------------------------------------------------------------------------------
    def start(self) -> HubServer:
        hub = self

        class Handler(_Handler):
            server_hub = hub

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=10)
            self._httpd = None

    def __enter__(self) -> HubServer:
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the hub server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # ----- test controls and inspection ----------------------------------------------------------------------------
    def fail(self, stage: str, action: int | str = 500, times: int = 1) -> None:
        """Make the next `times` requests of `stage` answer `action` (an HTTP status, or "drop")."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; choose one of {STAGES}")
        with self._lock:
            self._faults.setdefault(stage, []).extend([action] * times)

    def create_repo(self, repo_id: str, private: bool = False) -> None:
        with self._lock:
            if repo_id in self._repos:
                raise HubError(409, f"You already created this model repo: {repo_id}")
            repo = {"private": private, "refs": {}, "commits": {}, "lfs_objects": []}
            self._repos[repo_id] = repo
            first = self._new_commit(repo, None, "initial commit", {})
            gitattributes = GITATTRIBUTES.encode()
            first["files"][".gitattributes"] = self._store_regular(gitattributes)
            repo["refs"]["main"] = first["id"]
            self._save(repo_id)

    def repo_exists(self, repo_id: str) -> bool:
        with self._lock:
            return repo_id in self._repos

    def commits(self, repo_id: str, revision: str = "main") -> list[dict]:
        """The history of a branch, newest first: dicts with `id`, `parent`, `message`, `files`."""
        with self._lock:
            repo = self._repo(repo_id)
            commit = repo["commits"][self._resolve_revision(repo, revision)]
            out = []
            while commit is not None:
                out.append(json.loads(json.dumps(commit)))
                commit = repo["commits"].get(commit["parent"]) if commit["parent"] else None
            return out

    def head(self, repo_id: str, revision: str = "main") -> str:
        with self._lock:
            repo = self._repo(repo_id)
            return self._resolve_revision(repo, revision)

    def read(self, repo_id: str, path: str, revision: str = "main") -> bytes:
        with self._lock:
            repo = self._repo(repo_id)
            files = repo["commits"][self._resolve_revision(repo, revision)]["files"]
            if path not in files:
                raise KeyError(f"{path} is not in {repo_id}@{revision}")
            return self._content_path(files[path]).read_bytes()

    def files(self, repo_id: str, revision: str = "main") -> list[str]:
        with self._lock:
            repo = self._repo(repo_id)
            return sorted(repo["commits"][self._resolve_revision(repo, revision)]["files"])

    # ----- storage ------------------------------------------------------------------------------------------------
    def _repo(self, repo_id: str) -> dict:
        repo = self._repos.get(repo_id)
        if repo is None:
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return repo

    def _resolve_revision(self, repo: dict, revision: str) -> str:
        if revision in repo["refs"]:
            return repo["refs"][revision]
        if _COMMIT_RE.match(revision) and revision in repo["commits"]:
            return revision
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def _new_commit(self, repo: dict, parent: str | None, message: str, files: dict) -> dict:
        self._counter += 1
        seed = json.dumps([parent, message, sorted(files.items()), time.time(), self._counter], default=str)
        commit = {
            "id": hashlib.sha1(seed.encode()).hexdigest(),
            "parent": parent,
            "message": message,
            "files": dict(files),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        }
        repo["commits"][commit["id"]] = commit
        return commit

    def _store_regular(self, data: bytes) -> dict:
        oid = git_blob_sha1(data)
        path = self.root / "blobs" / oid
        if not path.exists():
            _atomic_write(path, data)
        return {"oid": oid, "size": len(data), "lfs": None}

    def _has_lfs(self, repo_id: str, oid: str, size) -> bool:
        """Whether the LFS object `oid` of `size` bytes was uploaded to this repository."""
        with self._lock:
            stored = self.root / "lfs" / oid
            return (
                oid in self._repo(repo_id)["lfs_objects"] and stored.is_file() and stored.stat().st_size == size
            )

    def _content_path(self, entry: dict) -> Path:
        if entry["lfs"] is not None:
            return self.root / "lfs" / entry["lfs"]
        return self.root / "blobs" / entry["oid"]

    def _save(self, repo_id: str) -> None:
        path = self.root / "repos" / f"{repo_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, json.dumps(self._repos[repo_id], indent=1).encode())

    def _take_fault(self, stage: str):
        with self._lock:
            queue = self._faults.get(stage)
            return queue.pop(0) if queue else None

    # ----- entries as the API shows them ------------------------------------------------------------------------------
    @staticmethod
    def _tree_entry(path: str, entry: dict) -> dict:
        info = {"type": "file", "oid": entry["oid"], "size": entry["size"], "path": path}
        if entry["lfs"] is not None:
            pointer = lfs_pointer(entry["lfs"], entry["size"])
            info["lfs"] = {"oid": entry["lfs"], "size": entry["size"], "pointerSize": len(pointer)}
        return info

    def _model_info(self, repo_id: str, repo: dict, commit_id: str) -> dict:
        commit = repo["commits"][commit_id]
        siblings = []
        for path, entry in sorted(commit["files"].items()):
            sibling = {"rfilename": path, "size": entry["size"], "blobId": entry["oid"]}
            if entry["lfs"] is not None:
                pointer = lfs_pointer(entry["lfs"], entry["size"])
                sibling["lfs"] = {"sha256": entry["lfs"], "size": entry["size"], "pointerSize": len(pointer)}
            siblings.append(sibling)
        card_data, tags = None, []
        if "README.md" in commit["files"]:
            text, _ = split_front_matter(self._content_path(commit["files"]["README.md"]).read_text(errors="replace"))
            try:
                card_data = yaml.safe_load(text) if text else None
            except yaml.YAMLError:
                card_data = None
            if isinstance(card_data, dict) and isinstance(card_data.get("tags"), list):
                tags = [t for t in card_data["tags"] if isinstance(t, str)]
        info = {
            "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0],
            "sha": commit_id,
            "lastModified": commit["date"],
            "createdAt": self.commits(repo_id, commit_id)[-1]["date"],
            "private": repo["private"],
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": tags,
            "siblings": siblings,
        }
        if isinstance(card_data, dict):
            info["cardData"] = card_data
            for key in ("library_name", "pipeline_tag"):
                if key in card_data:
                    info[key] = card_data[key]
        return info


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Drop(Exception):
    """Close the connection without answering."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_hub: HubServer

    # quiet: the test output stays readable; failures show `requests` instead
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        logger.debug("hub server: " + format, *args)

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    # ----- plumbing ---------------------------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        hub = self.server_hub
        parts = urlsplit(self.path)
        self.query = parse_qs(parts.query)
        self.body = self._read_body()  # always read it, even to answer an error (keep-alive)
        status = 500
        try:
            for route_method, pattern, handler in ROUTES:
                if method != route_method and not (route_method == "GET" and method == "HEAD"):
                    continue
                match = re.match(pattern, parts.path)
                if match:
                    groups = {k: unquote(v) if v is not None else None for k, v in match.groupdict().items()}
                    status = handler(self, **groups)
                    break
            else:
                with hub._lock:
                    hub.unhandled.append((method, self.path))
                raise HubError(404, f"no such endpoint on the test hub: {method} {parts.path}")
        except _Drop:
            status = 0
            self.close_connection = True
        except HubError as exc:
            status = exc.status
            self._send_json(exc.status, {"error": exc.message}, error=exc)
        except Exception as exc:  # a bug in the test server: answer 500 and keep serving
            logger.exception("hub server error")
            status = 500
            self._send_json(500, {"error": f"test hub server error: {exc!r}"})
        with hub._lock:
            hub.requests.append((method, parts.path, status))

    def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, payload, headers: dict | None = None, error: HubError | None = None) -> None:
        headers = dict(headers or {})
        if error is not None:
            headers["X-Error-Message"] = error.message
            if error.code:
                headers["X-Error-Code"] = error.code
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _fault(self, stage: str) -> None:
        action = self.server_hub._take_fault(stage)
        if action is None:
            return
        if action == "drop":
            raise _Drop()
        raise HubError(int(action), f"injected failure of {stage} (HTTP {action})")

    def _json(self) -> dict:
        try:
            return json.loads(self.body or b"{}")
        except json.JSONDecodeError as exc:
            raise HubError(400, f"request body is not JSON: {exc}") from exc

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer ") :].strip() if auth.startswith("Bearer ") else None

    def _auth(self, write: bool) -> bool:
        """Whether the request is authenticated; raise 401 for a wrong token, or a write without one."""
        hub, token = self.server_hub, self._token()
        if hub.token is None:
            return True
        if token is not None and token != hub.token:
            raise HubError(401, "Invalid credentials in Authorization header")
        if token is None and write:
            raise HubError(401, "You must be authenticated to access this resource (no token given)")
        return token is not None

    def _readable_repo(self, repo_id: str) -> dict:
        authenticated = self._auth(write=False)
        repo = self.server_hub._repo(repo_id)
        if repo["private"] and not authenticated:
            raise HubError(401, f"Repository {repo_id} not found", "RepoNotFound")
        return repo

    # ----- account ----------------------------------------------------------------------------------------------------
    def whoami(self) -> int:
        hub = self.server_hub
        if hub.token is not None and self._token() is None:
            raise HubError(401, "You must be authenticated: no token given")
        self._auth(write=False)
        self._send_json(200, {
            "type": "user", "id": "0" * 24, "name": hub.user, "fullname": "Test User", "email": None,
            "emailVerified": True, "isPro": False, "orgs": [],
            "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}},
        })
        return 200

    def agent_harnesses(self) -> int:
        self._send_json(200, {})
        return 200

    # ----- repositories -----------------------------------------------------------------------------------------------
    def create(self) -> int:
        hub = self.server_hub
        self._auth(write=True)
        self._fault("create")
        payload = self._json()
        if payload.get("type", "model") != "model":
            raise HubError(400, f"the test hub stores model repositories only, got type={payload.get('type')!r}")
        name = payload.get("name")
        if not name or "/" in name:
            raise HubError(400, f"invalid repository name {name!r}")
        repo_id = f"{payload.get('organization') or hub.user}/{name}"
        private = bool(payload.get("private")) or payload.get("visibility") == "private"
        url = f"{hub.url}/{repo_id}"
        try:
            hub.create_repo(repo_id, private=private)
        except HubError:
            self._send_json(409, {"error": "You already created this model repo", "url": url},
                            headers={"X-Error-Message": "You already created this model repo"})
            return 409
        self._send_json(200, {"url": url, "name": repo_id, "id": hashlib.md5(repo_id.encode()).hexdigest()[:24]})
        return 200

    def delete(self) -> int:
        hub = self.server_hub
        self._auth(write=True)
        payload = self._json()
        repo_id = f"{payload.get('organization') or hub.user}/{payload.get('name')}"
        with hub._lock:
            hub._repo(repo_id)
            del hub._repos[repo_id]
            (hub.root / "repos" / f"{repo_id}.json").unlink(missing_ok=True)
        self._send_json(200, {})
        return 200

    def model_info(self, repo: str, rev: str = "main") -> int:
        hub = self.server_hub
        self._fault("model_info")
        with hub._lock:
            state = self._readable_repo(repo)
            info = hub._model_info(repo, state, hub._resolve_revision(state, rev))
        self._send_json(200, info)
        return 200

    def refs(self, repo: str) -> int:
        hub = self.server_hub
        with hub._lock:
            state = self._readable_repo(repo)
            branches = [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": c} for n, c in state["refs"].items()]
        self._send_json(200, {"branches": branches, "converts": [], "tags": []})
        return 200

    def list_commits(self, repo: str, rev: str) -> int:
        hub = self.server_hub
        with hub._lock:
            self._readable_repo(repo)
            history = hub.commits(repo, rev)
        self._send_json(200, [
            {"id": c["id"], "title": c["message"], "message": "", "authors": [{"user": hub.user}], "date": c["date"]}
            for c in history
        ])
        return 200

    def create_branch(self, repo: str, branch: str) -> int:
        hub = self.server_hub
        self._auth(write=True)
        payload = self._json() if self.body else {}
        with hub._lock:
            state = hub._repo(repo)
            if branch in state["refs"]:
                raise HubError(409, f"Reference refs/heads/{branch} already exists")
            state["refs"][branch] = hub._resolve_revision(state, payload.get("startingPoint") or "main")
            hub._save(repo)
        self._send_json(200, {})
        return 200

    def validate_yaml(self) -> int:
        payload = self._json()
        errors, warnings = validate_card_metadata(payload.get("content", ""))
        body = {"errors": [{"message": m} for m in errors], "warnings": [{"message": m} for m in warnings]}
        status = 400 if errors else 200
        self._send_json(status, body)
        return status

    # ----- commits ----------------------------------------------------------------------------------------------------
    def preupload(self, repo: str, rev: str) -> int:
        hub = self.server_hub
        self._auth(write=True)
        self._fault("preupload")
        payload = self._json()
        with hub._lock:
            state = hub._repo(repo)
            commit_id = hub._resolve_revision(state, rev) if "create_pr" not in self.query else state["refs"]["main"]
            existing = state["commits"][commit_id]["files"]
            answer = []
            for item in payload.get("files", []):
                path, size = item["path"], int(item["size"])
                is_lfs = hub.lfs and (path.endswith(LFS_SUFFIXES) or size >= LFS_MIN_SIZE)
                entry = existing.get(path)
                oid = None if entry is None else (entry["lfs"] or entry["oid"])
                answer.append({"path": path, "uploadMode": "lfs" if is_lfs else "regular",
                               "shouldIgnore": False, "oid": oid})
        self._send_json(200, {"files": answer, "commitOid": commit_id})
        return 200

    def commit(self, repo: str, rev: str) -> int:
        hub = self.server_hub
        self._auth(write=True)
        self._fault("commit")
        try:
            lines = [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HubError(400, f"commit body is not NDJSON: {exc}") from exc
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "the first NDJSON line of a commit must be the header")
        header = lines[0]["value"]
        with hub._lock:
            state = hub._repo(repo)
            if rev not in state["refs"]:
                raise HubError(404, f"Invalid rev id: {rev} (commits go to a branch)", "RevisionNotFound")
            parent = state["refs"][rev]
            if header.get("parentCommit") and header["parentCommit"] != parent:
                raise HubError(412, f"parentCommit {header['parentCommit']} is not the head of {rev} ({parent})")
            files = dict(state["commits"][parent]["files"])
            staged = []  # regular contents to store only once the whole commit is known to be valid
            for line in lines[1:]:
                key, value = line.get("key"), line.get("value", {})
                path = value.get("path", "")
                if not path or path.startswith("/") or ".." in path.split("/"):
                    raise HubError(400, f"invalid path in commit: {path!r}")
                if key == "file":
                    if value.get("encoding") != "base64":
                        raise HubError(400, f"unsupported encoding {value.get('encoding')!r} for {path}")
                    data = base64.b64decode(value["content"])
                    staged.append(data)
                    files[path] = {"oid": git_blob_sha1(data), "size": len(data), "lfs": None}
                elif key == "lfsFile":
                    oid, size = value.get("oid"), value.get("size")
                    if value.get("algo") != "sha256" or not hub._has_lfs(repo, str(oid), size):
                        raise HubError(422, f"LFS object {oid} of {path} was not uploaded (size {size})")
                    files[path] = {"oid": git_blob_sha1(lfs_pointer(oid, size)), "size": size, "lfs": oid}
                elif key == "deletedFile":
                    if path not in files:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                    del files[path]
                elif key == "deletedFolder":
                    prefix = path.rstrip("/") + "/"
                    files = {p: e for p, e in files.items() if not p.startswith(prefix)}
                else:
                    raise HubError(400, f"unsupported commit operation {key!r}")
            for data in staged:
                hub._store_regular(data)
            message = header.get("summary") or "update"
            commit = hub._new_commit(state, parent, message, files)
            state["refs"][rev] = commit["id"]
            hub._save(repo)
        self._send_json(200, {
            "success": True, "commitOid": commit["id"], "commitUrl": f"{hub.url}/{repo}/commit/{commit['id']}",
            "hookOutput": "", "pullRequestUrl": None,
        })
        return 200

    # ----- LFS --------------------------------------------------------------------------------------------------------
    def lfs_batch(self, repo: str) -> int:
        hub = self.server_hub
        self._auth(write=True)
        self._fault("lfs_batch")
        payload = self._json()
        if payload.get("operation") != "upload":
            raise HubError(400, "the test hub only accepts LFS uploads (downloads go through /resolve)")
        with hub._lock:
            hub._repo(repo)
        objects = []
        for obj in payload.get("objects", []):
            oid, size = obj["oid"], int(obj["size"])
            entry = {"oid": oid, "size": size, "authenticated": True}
            if not hub._has_lfs(repo, oid, size):  # objects belong to a repository, as on the Hub
                entry["actions"] = {
                    "upload": {"href": f"{hub.url}/_lfs/{repo}/{oid}", "header": {}},
                    "verify": {"href": f"{hub.url}/_lfs/{repo}/{oid}/verify", "header": {}},
                }
            objects.append(entry)
        self._send(200, json.dumps({"transfer": "basic", "objects": objects}).encode(),
                   "application/vnd.git-lfs+json")
        return 200

    def lfs_put(self, repo: str, oid: str) -> int:
        hub = self.server_hub
        self._fault("lfs_upload")
        if hashlib.sha256(self.body).hexdigest() != oid:
            raise HubError(400, f"uploaded content does not match its sha256 {oid}")
        with hub._lock:
            state = hub._repo(repo)
            _atomic_write(hub.root / "lfs" / oid, self.body)
            if oid not in state["lfs_objects"]:
                state["lfs_objects"].append(oid)
            hub._save(repo)
        self._send(200, b"", "text/plain")
        return 200

    def lfs_verify(self, repo: str, oid: str) -> int:
        payload = self._json()
        if not self.server_hub._has_lfs(repo, oid, payload.get("size")):
            raise HubError(404, f"LFS object {oid} not found in {repo}")
        self._send_json(200, {})
        return 200

    def control_fail(self) -> int:
        payload = self._json()
        try:
            self.server_hub.fail(payload["stage"], payload.get("action", 500), int(payload.get("times", 1)))
        except (KeyError, ValueError) as exc:
            raise HubError(400, f"bad fault request {payload!r}: {exc}") from exc
        self._send_json(200, {})
        return 200

    def xet_token(self, repo: str, rev: str, kind: str) -> int:
        raise HubError(501, "the test hub has no Xet storage: run the client with HF_HUB_DISABLE_XET=1")

    # ----- listing and files ----------------------------------------------------------------------------------------
    def tree(self, repo: str, rev: str, path: str | None = None) -> int:
        hub = self.server_hub
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        prefix = (path or "").strip("/")
        with hub._lock:
            state = self._readable_repo(repo)
            files = state["commits"][hub._resolve_revision(state, rev)]["files"]
            under = {p: e for p, e in files.items() if not prefix or p.startswith(prefix + "/")}
            if prefix and not under:
                raise HubError(404, f"{prefix} does not exist on {rev}", "EntryNotFound")
            entries, folders = [], set()
            for p, entry in sorted(under.items()):
                rest = p[len(prefix) + 1 :] if prefix else p
                if "/" in rest:
                    parts = rest.split("/")
                    depth = len(parts) - 1 if recursive else 1
                    for i in range(1, depth + 1):
                        folders.add("/".join(([prefix] if prefix else []) + parts[:i]))
                    if not recursive:
                        continue
                entries.append(HubServer._tree_entry(p, entry))
        entries += [{"type": "directory", "oid": hashlib.sha1(f.encode()).hexdigest(), "size": 0, "path": f}
                    for f in sorted(folders)]
        self._send_json(200, entries)
        return 200

    def paths_info(self, repo: str, rev: str) -> int:
        hub = self.server_hub
        content_type = self.headers.get("Content-Type", "")
        if "json" in content_type:
            paths = self._json().get("paths", [])
        else:
            paths = parse_qs(self.body.decode()).get("paths", [])
        with hub._lock:
            state = self._readable_repo(repo)
            files = state["commits"][hub._resolve_revision(state, rev)]["files"]
            answer = []
            for path in paths:
                path = path.strip("/")
                if path in files:
                    answer.append(HubServer._tree_entry(path, files[path]))
                elif any(p.startswith(path + "/") for p in files):
                    answer.append({"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "path": path})
        self._send_json(200, answer)
        return 200

    def resolve(self, repo: str, rev: str, path: str) -> int:
        hub = self.server_hub
        self._fault("resolve")
        with hub._lock:
            state = self._readable_repo(repo)
            commit_id = hub._resolve_revision(state, rev)
            entry = state["commits"][commit_id]["files"].get(path)
            if entry is None:
                raise HubError(404, f"Entry not found: {path} at {rev}", "EntryNotFound")
            data = hub._content_path(entry).read_bytes()
        etag = entry["lfs"] or entry["oid"]
        headers = {"X-Repo-Commit": commit_id, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if entry["lfs"] is not None:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(entry["size"])})
        status = 200
        match = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if match and self.command == "GET":
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(data) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start : end + 1], 206
        self._send(status, data, "application/octet-stream", headers)
        return status


ROUTES: list[tuple[str, str, Callable[..., int]]] = [
    ("GET", r"^/api/whoami-v2$", _Handler.whoami),
    ("GET", r"^/api/agent-harnesses$", _Handler.agent_harnesses),
    ("POST", r"^/api/repos/create$", _Handler.create),
    ("DELETE", r"^/api/repos/delete$", _Handler.delete),
    ("POST", r"^/api/validate-yaml$", _Handler.validate_yaml),
    ("GET", _API + r"$", _Handler.model_info),
    ("GET", _API + r"/revision/(?P<rev>[^/]+)$", _Handler.model_info),
    ("GET", _API + r"/refs$", _Handler.refs),
    ("GET", _API + r"/commits/(?P<rev>[^/]+)$", _Handler.list_commits),
    ("POST", _API + r"/branch/(?P<branch>[^/]+)$", _Handler.create_branch),
    ("POST", _API + r"/preupload/(?P<rev>[^/]+)$", _Handler.preupload),
    ("POST", _API + r"/commit/(?P<rev>[^/]+)$", _Handler.commit),
    ("GET", _API + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?$", _Handler.tree),
    ("POST", _API + r"/paths-info/(?P<rev>[^/]+)$", _Handler.paths_info),
    ("GET", _API + r"/xet-(?P<kind>read|write)-token/(?P<rev>[^/]+)$", _Handler.xet_token),
    ("POST", r"^/(?P<repo>[^/]+/[^/]+?)\.git/info/lfs/objects/batch$", _Handler.lfs_batch),
    ("PUT", r"^/_lfs/" + _REPO + r"/(?P<oid>[0-9a-f]{64})$", _Handler.lfs_put),
    ("POST", r"^/_lfs/" + _REPO + r"/(?P<oid>[0-9a-f]{64})/verify$", _Handler.lfs_verify),
    ("POST", r"^/_control/fail$", _Handler.control_fail),
    ("GET", r"^/" + _REPO + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", _Handler.resolve),
]
