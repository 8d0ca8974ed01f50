"""`elmo-convert --model NAME` and URL inputs: downloads from a local HTTP server serving random weights of the
original layout (`original_layout.py`) under the published file names (the base URL is overridden with --base_url).

(a) a published name downloads, verifies and converts, exactly like a conversion of the local files; a second
    run reuses the cache without a request;
(b) a connection dropped mid-file is resumed with a Range request; a server that keeps failing leaves a clear
    error and a partial file that the next run resumes;
(c) a truncated or wrong file is never converted: one-line error, exit 2, nothing written, nothing cached;
(d) bad names, HTTP errors and no connection at all: one line, exit 2, at once, nothing left in the cache;
(e) SIGINT during a download: one line, exit 130, the bytes received kept and resumed by the next run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock

import pytest
import torch
from conftest import REPO, record_sleeps, run_cli
from original_layout import FIXTURE_SIZED, write_original_layout

pytest.importorskip("h5py", reason="the converter needs h5py: pip install 'elmo-hf[convert]'")

from safetensors.torch import load_file  # noqa: E402

from elmo_hf.modeling_elmo.configuration_elmo import PRESETS  # noqa: E402
from elmo_hf.tools.conversion import download  # noqa: E402
from elmo_hf.tools.conversion.convert_allennlp_elmo import convert  # noqa: E402

ORIGINAL = download.PUBLISHED_MODELS["original"]


class FileServer:
    """Serves `files` ({url path: bytes}) on 127.0.0.1 with byte ranges, and faults to test downloads.

    Faults, per path: `drop_after[path] = (n, times)` sends the full Content-Length but only the first n bytes
    of the body, then closes, for the next `times` GETs; `cut_at[path] = n` is a server whose copy ends at byte
    n while it announces the full length (every GET, ranges included, stops there); `truncate[path] = n`
    serves the first n bytes as if they were the whole file (a consistent Content-Length); `pause_at[path] = n`
    sends the first n bytes, then waits (a slow server) until `resume` is set.
    Every request is recorded as (method, path, Range header or None).
    """

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.drop_after: dict[str, tuple[int, int]] = {}
        self.cut_at: dict[str, int] = {}
        self.truncate: dict[str, int] = {}
        self.pause_at: dict[str, int] = {}
        self.resume = threading.Event()
        self.requests: list[tuple[str, str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002 (the base class's name)
                pass

            def do_HEAD(self):
                server._answer(self, body=False)

            def do_GET(self):
                server._answer(self, body=True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def gets(self, suffix: str) -> list[str | None]:
        """The Range headers of the GETs of paths ending with `suffix` (None: the whole file)."""
        return [rng for method, path, rng in self.requests if method == "GET" and path.endswith(suffix)]

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path, rng = handler.path, handler.headers.get("Range")
        self.requests.append((handler.command, path, rng))
        if path not in self.files:
            handler.send_error(404, "Not Found")
            return
        data = self.files[path][: self.truncate.get(path)]
        start = 0
        if rng:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data) - start))
        handler.end_headers()
        if not body:
            return
        end = len(data)
        if path in self.cut_at:
            end = min(end, self.cut_at[path])
        if path in self.drop_after and handler.command == "GET":
            n, times = self.drop_after[path]
            if times > 0:
                end = min(end, start + n)
                self.drop_after[path] = (n, times - 1)
        pause = self.pause_at.get(path)  # read once: the test may take the pause away while this answer waits
        if pause is not None and start < pause < end:
            handler.wfile.write(data[start:pause])
            handler.wfile.flush()
            self.resume.wait(timeout=120)
            start = pause
        handler.wfile.write(data[start:end])
        handler.wfile.flush()
        handler.close_connection = True  # a short body then ends with the connection

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.resume.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def fixture_files(tmp_path_factory) -> dict[str, Path]:
    """An options file and random weights of the original layout, at the bilm-tf fixture's size."""
    options, weights = write_original_layout(tmp_path_factory.mktemp("original"), FIXTURE_SIZED, seed=1)
    return {"options": options, "weights": weights}


@pytest.fixture()
def server(fixture_files):
    """Those files under the names of the original model, below /elmo (the --base_url)."""
    files = {
        f"/elmo/{ORIGINAL.options_path}": fixture_files["options"].read_bytes(),
        f"/elmo/{ORIGINAL.weights_path}": fixture_files["weights"].read_bytes(),
    }
    with FileServer(files) as running:
        running.base = running.url + "/elmo"
        running.options_path = f"/elmo/{ORIGINAL.options_path}"
        running.weights_path = f"/elmo/{ORIGINAL.weights_path}"
        yield running


@pytest.fixture()
def reference(fixture_files, tmp_path_factory) -> dict[str, torch.Tensor]:
    """Those files converted from the local copies."""
    out = convert(fixture_files["options"], fixture_files["weights"], tmp_path_factory.mktemp("ref") / "elmo")
    return load_file(out / "model.safetensors")


def run_convert(*args: str, cache: Path, short_retry_wait: bool = False) -> subprocess.CompletedProcess:
    """`elmo-convert ARGS` in this process, its downloads cached in `cache`, reaching 127.0.0.1 without a proxy. With
    `short_retry_wait`, the wait between two attempts of a download (`download.RETRY_WAIT_S`, 1 s) is 10 ms: the
    attempts and what they leave are the same, without the seconds of waiting."""
    assert download.BASE_URL_ENV not in os.environ
    env = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", "ELMO_HF_CACHE": str(cache)}
    with mock.patch.object(download, "RETRY_WAIT_S", 0.01 if short_retry_wait else download.RETRY_WAIT_S):
        return run_cli("elmo-convert", args, cwd=REPO, env=env)


def assert_same_model(folder: Path, reference: dict[str, torch.Tensor]) -> None:
    converted = load_file(folder / "model.safetensors")
    assert converted.keys() == reference.keys()
    for name, tensor in reference.items():
        assert torch.equal(converted[name], tensor), name


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def cached_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


# --------------------------------------------------------------------------------------------------
# (a) a name to a Hugging Face folder; the cache
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_model_name_downloads_converts_and_reuses_the_cache(server, reference, tmp_path):
    cache = tmp_path / "cache"
    first = run_convert("--model", "original", "--base_url", server.base, "--output_dir", str(tmp_path / "a"),
                        cache=cache)
    assert first.returncode == 0, first.stderr
    assert_same_model(tmp_path / "a", reference)
    assert server.gets(server.weights_path) == [None] and server.gets(server.options_path) == [None]
    assert cached_files(cache) == sorted([Path(ORIGINAL.options_path).name, Path(ORIGINAL.weights_path).name])

    requests = len(server.requests)
    second = run_convert("--model", "original", "--base_url", server.base, "--output_dir", str(tmp_path / "b"),
                         "--verbose", cache=cache)
    assert second.returncode == 0, second.stderr
    assert len(server.requests) == requests  # no second download, not even a HEAD
    assert "from the cache" in second.stderr  # said with --verbose only: the first run is quiet
    assert first.stderr.splitlines()[-1] == f"INFO elmo_hf.tools.conversion.convert: wrote {tmp_path / 'a'}"
    before = "".join(first.stderr.splitlines()[:-1])
    assert "INFO" not in before and Path(ORIGINAL.weights_path).name in before  # the downloads' progress bars only
    assert_same_model(tmp_path / "b", reference)


@pytest.mark.slow
def test_urls_as_options_and_weight_file(server, reference, tmp_path):
    result = run_convert("--options_file", server.url + server.options_path, "--weight_file",
                         server.url + server.weights_path, "--output_dir", str(tmp_path / "out"),
                         "--cache_dir", str(tmp_path / "cache"), cache=tmp_path / "unused")
    assert result.returncode == 0, result.stderr
    assert_same_model(tmp_path / "out", reference)
    assert not (tmp_path / "unused").exists()  # --cache_dir wins over $ELMO_HF_CACHE


@pytest.mark.slow
def test_with_vocab_downloads_the_vocabulary_into_the_tokenizer(server, tmp_path):
    words = ["<S>", "</S>", "<UNK>", "the", ",", "bank"]
    server.files[f"/elmo/{download.VOCAB_PATH}"] = ("\n".join(words) + "\n").encode("utf-8")
    out = tmp_path / "out"
    result = run_convert("--model", "original", "--with_vocab", "--base_url", server.base, "--output_dir", str(out),
                         cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    from elmo_hf.tokenization import ElmoTokenizer

    assert ElmoTokenizer.from_pretrained(out).word_vocab_size == len(words)


def test_vocabulary_is_published_for_the_1b_word_models_only(server, tmp_path):
    server.files[f"/elmo/{download.VOCAB_PATH}"] = b"<S>\n</S>\n<UNK>\nthe\n"
    files = download.fetch_published("original", tmp_path, server.base, with_vocab=True)
    assert files["vocab"].read_bytes() == b"<S>\n</S>\n<UNK>\nthe\n"
    assert files["weights"].read_bytes() == server.files[server.weights_path]
    with pytest.raises(download.DownloadError, match="no vocabulary was published for --model original-5.5b"):
        download.fetch_published("original_5.5B", tmp_path, server.base, with_vocab=True)
    assert download.cache_path("http://host/..", tmp_path).name == "download"


# --------------------------------------------------------------------------------------------------
# (b) interrupted downloads
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_connection_dropped_mid_file_resumes_with_a_range_request(server, reference, tmp_path):
    server.drop_after[server.weights_path] = (100_000, 1)
    result = run_convert("--model", "original", "--base_url", server.base, "--output_dir", str(tmp_path / "out"),
                         cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert server.gets(server.weights_path) == [None, "bytes=100000-"]
    assert_same_model(tmp_path / "out", reference)


def empty_folder(path: Path) -> Path:
    """A folder for the command's --output_dir (which must be in a folder that exists: a command makes no parents)."""
    path.mkdir()
    return path


@pytest.mark.slow
def test_a_failing_server_leaves_an_error_and_a_partial_file_the_next_run_resumes(server, tmp_path):
    """The real command gives up after its attempts (waiting 10 ms between them instead of 1 s); the next download
    (in this process: the command's conversion of the files is tested above) asks for the rest only."""
    server.cut_at[server.weights_path] = 200_000  # every answer stops there, retries included
    cache, out = tmp_path / "cache", empty_folder(tmp_path / "outputs") / "elmo"
    failed = run_convert("--model", "original", "--base_url", server.base, "--output_dir", str(out), cache=cache,
                         short_retry_wait=True)
    assert_one_line_error(failed, "cannot download", "200,000 bytes kept, the next run resumes")
    assert server.gets(server.weights_path) == [None] + ["bytes=200000-"] * download.MAX_STALLED_ATTEMPTS
    assert list(out.parent.iterdir()) == []  # nothing written, no temporary folder left either
    weights_name = Path(ORIGINAL.weights_path).name
    partial = download.cache_path(server.url + server.weights_path, cache).with_name(weights_name + ".incomplete")
    assert partial.stat().st_size == 200_000
    assert weights_name not in cached_files(cache)

    del server.cut_at[server.weights_path]
    before = len(server.gets(server.weights_path))
    files = download.fetch_published("original", cache, server.base)
    assert server.gets(server.weights_path)[before:] == ["bytes=200000-"]
    assert files["weights"].read_bytes() == server.files[server.weights_path]
    assert not partial.exists()


# --------------------------------------------------------------------------------------------------
# (c) a file that is not what it should be is never converted
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_truncated_weight_file_is_refused_and_not_cached(server, tmp_path):
    server.truncate[server.weights_path] = len(server.files[server.weights_path]) // 2  # consistent headers
    cache, out = tmp_path / "cache", empty_folder(tmp_path / "outputs") / "elmo"
    result = run_convert("--model", "original", "--base_url", server.base, "--output_dir", str(out), cache=cache)
    assert_one_line_error(result, Path(ORIGINAL.weights_path).name, "incomplete or damaged")
    assert list(out.parent.iterdir()) == []  # nothing written, no temporary folder left either
    assert cached_files(cache) == [Path(ORIGINAL.options_path).name]  # the bad download is gone


def test_download_verifies_the_format_and_the_published_size(server, tmp_path):
    """In-process: an HTML page instead of HDF5, a body cut short of its Content-Length without retries left,
    and a size that differs from the published one: each a DownloadError, and nothing enters the cache."""
    html = "/elmo/page.hdf5"
    server.files[html] = b"<html><body>Access Denied</body></html>"
    with pytest.raises(download.DownloadError, match="page.hdf5 is not an HDF5 file"):
        download.download(server.url + html, "weights", tmp_path)
    url = server.url + server.weights_path
    size = len(server.files[server.weights_path])
    with pytest.raises(download.DownloadError, match=f"has {size} bytes, the published file {size + 1}"):
        download.download(url, "weights", tmp_path, expected_size=size + 1)
    with pytest.raises(download.DownloadError, match="not a JSON options file"):
        download.download(url, "options", tmp_path)
    assert cached_files(tmp_path) == []
    assert download.verify_hdf5(download.download(url, "weights", tmp_path)) is None


# --------------------------------------------------------------------------------------------------
# (d) bad names, HTTP errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_unknown_model_and_http_errors_are_one_line_exit_2(server, tmp_path):
    out = empty_folder(tmp_path / "outputs") / "elmo"
    unknown = run_convert("--model", "huge", "--output_dir", str(out), cache=tmp_path / "cache")
    assert_one_line_error(unknown, "unknown --model 'huge'", "small, medium, original, original-5.5b")
    missing = run_convert("--options_file", server.url + "/elmo/absent_options.json", "--weight_file",
                          server.url + server.weights_path, "--output_dir", str(out), cache=tmp_path / "cache")
    assert_one_line_error(missing, "absent_options.json", "HTTP 404")
    assert list(out.parent.iterdir()) == []  # nothing written, no temporary folder left either
    assert not any(path.endswith(ORIGINAL.weights_path) for _, path, _ in server.requests)  # options come first


def test_published_table():
    """The table the README quotes: names, URLs under AllenNLP's bucket, the sizes of the architecture."""
    assert download.model_names() == ["small", "medium", "original", "original-5.5b"]
    assert download.get_published_model("Original_5.5B").name == "original-5.5b"
    urls = download.model_urls(ORIGINAL)
    assert urls["weights"] == (
        "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"
    )
    assert urls["vocab"].endswith("/vocab-2016-09-10.txt")
    assert "vocab" not in download.model_urls(download.PUBLISHED_MODELS["original-5.5b"])
    # the weight file holds 4 bytes per parameter plus the HDF5 headers
    assert 0 < ORIGINAL.weights_bytes - 4 * ORIGINAL.parameters < 100_000
    sizes = [PRESETS[m.preset] for m in download.PUBLISHED_MODELS.values()]  # each names its architecture's preset
    assert [(s["cell_size"], s["projection_dim"], s["num_highway_layers"]) for s in sizes] == [
        (1024, 128, 1), (2048, 256, 1), (4096, 512, 2), (4096, 512, 2)]


def closed_port_url(path: str) -> str:
    """A URL on 127.0.0.1 where nothing listens (a port just released): every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


def test_no_connection_is_not_retried_and_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    """Connection refused (as a host name that does not resolve): no retry, one error naming the host, and the
    cache as it was: no lock file, no folder."""
    url = closed_port_url("/elmo/options.json")
    waits = record_sleeps(monkeypatch, download)
    with pytest.raises(download.DownloadError, match=r"cannot connect to 127\.0\.0\.1:\d+ .*offline\?") as error:
        download.download(url, "options", tmp_path / "cache")
    assert waits == []  # not a single wait for a retry
    assert "\n" not in str(error.value)
    assert list((tmp_path / "cache").rglob("*")) == []


@pytest.mark.slow
def test_no_connection_is_one_line_within_seconds_from_the_command(tmp_path):
    cache, out = tmp_path / "cache", empty_folder(tmp_path / "outputs") / "elmo"
    result = run_convert("--model", "original", "--base_url", closed_port_url("/elmo"), "--output_dir", str(out),
                         cache=cache)
    line = assert_one_line_error(result, "cannot connect to 127.0.0.1", "offline?")
    assert "resuming" not in result.stderr and "WARNING" not in result.stderr, result.stderr
    assert ORIGINAL.options_path in line
    assert list(out.parent.iterdir()) == []  # nothing written, no temporary folder left either
    assert not cache.exists() or list(cache.rglob("*")) == []


# --------------------------------------------------------------------------------------------------
# (e) interrupted
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigint_during_the_download_keeps_the_bytes_for_the_next_run(server, tmp_path):
    """Ctrl-C while the weights arrive: exit 130, one line saying what is kept, no traceback, nothing written; the
    next run asks for the rest with a Range request."""
    server.pause_at[server.weights_path] = 60_000
    cache, out = tmp_path / "cache", empty_folder(tmp_path / "outputs") / "elmo"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", ELMO_HF_CACHE=str(cache),
               PYTHONNOUSERSITE="1")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "elmo-convert"), "--model", "original", "--base_url", server.base,
         "--output_dir", str(out)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = download.cache_path(server.url + server.weights_path, cache)
    partial = partial.with_name(partial.name + ".incomplete")
    try:
        deadline = time.monotonic() + 240
        while not (partial.is_file() and partial.stat().st_size == 60_000):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the download never reached the pause"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith(("INFO", "WARNING", "ERROR"))]
    assert len(lines) == 1, stderr
    weights_name = Path(ORIGINAL.weights_path).name
    for fragment in ("interrupted (SIGINT)", f"{out} was not written", f"60,000 bytes of {weights_name} are kept",
                     "the same command resumes the download"):
        assert fragment in lines[0], (fragment, lines[0])
    assert list(out.parent.iterdir()) == []  # nothing written, no temporary folder left either
    assert partial.stat().st_size == 60_000

    server.resume.set()
    del server.pause_at[server.weights_path]
    files = download.fetch_published("original", cache, server.base)
    assert server.gets(server.weights_path)[-1] == "bytes=60000-"
    assert files["weights"].read_bytes() == server.files[server.weights_path] and not partial.exists()


def test_a_bug_in_a_request_is_a_traceback_not_a_download_error(tmp_path, monkeypatch):
    """Only the network's and the server's failures are told as a download error (issue 67, item 3): a TypeError
    out of a request is the project's bug, and goes on with its traceback."""
    from elmo_hf.tools.conversion import download

    def attempt(*args, **kwargs):
        raise TypeError("a bug in the request code")

    monkeypatch.setattr(download, "_attempt", attempt)
    monkeypatch.setattr(download.constants, "is_offline_mode", lambda: False)
    with pytest.raises(TypeError, match="a bug in the request code"):
        download._fetch("http://127.0.0.1:9/weights.hdf5", tmp_path / "weights.hdf5.incomplete")
    monkeypatch.setattr(download, "_attempt", lambda *args, **kwargs: (_ for _ in ()).throw(OSError("reset")))
    monkeypatch.setattr(download, "MAX_STALLED_ATTEMPTS", 1)
    with pytest.raises(download.DownloadError, match="cannot download .*: reset"):
        download._fetch("http://127.0.0.1:9/weights.hdf5", tmp_path / "weights.hdf5.incomplete")
