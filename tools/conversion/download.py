"""Download the published English ELMo files (AllenNLP's options/weights/vocabulary) into a verified local cache.

`elmo-convert --model NAME` uses this module; `--options_file`/`--weight_file`/`--vocab_file` given as URLs too.
The HTTP client is huggingface_hub's session (`get_session`: proxies, user agent, HF_HUB_OFFLINE) with its tqdm
progress bar. On top of it: every byte is written as it arrives and a dropped connection is resumed with a Range
request, within the run and by the next run; the bytes received are checked against the size the server
announced (and the published size, where known); a file enters the cache only once complete and verified (JSON
for options, an HDF5 file that h5py opens for weights), so a second run reuses it without any request and a
partial or damaged file is never handed to the converter. An interrupted run (SIGINT/SIGTERM: `Interrupted`) keeps
the bytes received for the next run and says so (`Interrupted.kept`); one that received nothing leaves the cache
as it found it.

Not remote code: nothing of `modeling_elmo` imports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from filelock import FileLock
from huggingface_hub import constants
from huggingface_hub.utils import get_session
from huggingface_hub.utils import tqdm as hf_tqdm

from ..core.errors import InputError
from ..core.interrupts import Interrupted
from ..core.published_models import (
    BASE_URL_ENV,
    CACHE_ENV,
    DEFAULT_BASE_URL,
    HDF5_SIGNATURE,
    PUBLISHED_MODELS,
    VOCAB_PATH,
    PublishedModel,
)

logger = logging.getLogger(__name__)


class DownloadError(InputError):
    """A file could not be downloaded or is not what it should be; the message names the URL or the file."""


def model_names() -> list[str]:
    return list(PUBLISHED_MODELS)


def get_published_model(name: str) -> PublishedModel:
    """The model called `name` (case and `_`/`-` do not matter: `original_5.5B` is `original-5.5b`)."""
    key = name.strip().lower().replace("_", "-")
    if key not in PUBLISHED_MODELS:
        raise DownloadError(f"unknown --model {name!r}; valid names: {', '.join(PUBLISHED_MODELS)}")
    return PUBLISHED_MODELS[key]


def base_url(override: str | None = None) -> str:
    """The URL the published files are under: `override`, else $ELMO_HF_BASE_URL, else AllenNLP's bucket."""
    return (override or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")


def default_cache_dir() -> Path:
    """$ELMO_HF_CACHE, else $XDG_CACHE_HOME/elmo-hf, else ~/.cache/elmo-hf."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root).expanduser() / "elmo-hf"


def is_url(location: str | os.PathLike | None) -> bool:
    return isinstance(location, str) and location.lower().startswith(("http://", "https://"))


def model_urls(model: PublishedModel, base: str | None = None) -> dict[str, str]:
    """`{"options": url, "weights": url[, "vocab": url]}` of a published model."""
    root = base_url(base)
    urls = {"options": f"{root}/{model.options_path}", "weights": f"{root}/{model.weights_path}"}
    if model.has_vocab:
        urls["vocab"] = f"{root}/{VOCAB_PATH}"
    return urls


# --------------------------------------------------------------------------------------------------
# Verification: a file enters the cache only when it passes
# --------------------------------------------------------------------------------------------------


def verify_options(path: Path, name: str | None = None) -> None:
    name = name or path.name
    try:
        options = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DownloadError(f"{name} is not a JSON options file ({error})") from error
    if not isinstance(options, dict) or "lstm" not in options or "char_cnn" not in options:
        raise DownloadError(f"{name} is JSON but not an ELMo options file (no 'lstm' and 'char_cnn')")


def verify_hdf5(path: Path, name: str | None = None) -> None:
    """The file opens with h5py, which compares its length with the end-of-file address its superblock records:
    a truncated file fails here, before any conversion."""
    name = name or path.name
    try:
        import h5py
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise DownloadError("checking the weights needs h5py: pip install 'elmo-hf[convert]'") from error
    try:
        with h5py.File(path, "r") as handle:
            if "char_embed" not in handle:
                raise DownloadError(f"{name} is HDF5 but holds no ELMo weights (no 'char_embed' dataset)")
    except OSError as error:
        with open(path, "rb") as handle:
            head = handle.read(len(HDF5_SIGNATURE))
        if head != HDF5_SIGNATURE:  # e.g. an error page saved under the weight file's name
            raise DownloadError(f"{name} is not an HDF5 file (it starts with {head[:16]!r})") from error
        raise DownloadError(f"{name} is incomplete or damaged ({_one_line(error)})") from error


def verify_text(path: Path, name: str | None = None) -> None:
    name = name or path.name
    try:
        with open(path, encoding="utf-8") as handle:
            for _ in handle:
                pass
    except UnicodeDecodeError as error:
        raise DownloadError(f"{name} is not a UTF-8 text file ({error})") from error


VERIFIERS = {"options": verify_options, "weights": verify_hdf5, "vocab": verify_text}


# --------------------------------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------------------------------


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def cache_path(url: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where `url` is kept: CACHE/<16 hex digits of its sha256>/<its file name>. The hash keeps files of the
    same name from different servers (a mirror, a test server) apart."""
    name = Path(unquote(urlsplit(url).path)).name
    if name in ("", ".", ".."):
        name = "download"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return Path(cache_dir if cache_dir is not None else default_cache_dir()) / key / name


def download(
    url: str,
    kind: str,
    cache_dir: str | os.PathLike | None = None,
    expected_size: int | None = None,
) -> Path:
    """The verified local copy of `url`, downloaded into the cache unless it is already there.

    Args:
        url: an http(s) URL.
        kind: "options", "weights" or "vocab": how the file is verified.
        cache_dir: the cache folder (default: `default_cache_dir()`).
        expected_size: the exact size in bytes, when known; else the server's Content-Length is checked.

    Returns:
        The path of the complete, verified file in the cache.

    Raises:
        DownloadError: the server failed or the file is not what `kind` says (truncated HDF5, HTML page...).
            A partial download stays as `NAME.incomplete` and the next call resumes it; a complete but bad
            file is deleted.
    """
    target = cache_path(url, cache_dir)
    if target.is_file():
        logger.info("using %s from the cache (%s)", target.name, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(str(target) + ".lock")
    with FileLock(str(lock)):  # two conversions of one model share one download
        if target.is_file():
            return target
        partial = target.with_name(target.name + ".incomplete")
        try:
            _fetch(url, partial)
            try:
                if expected_size is not None and partial.stat().st_size != expected_size:
                    raise DownloadError(
                        f"{target.name} has {partial.stat().st_size} bytes, the published file {expected_size}"
                    )
                VERIFIERS[kind](partial, target.name)
            except DownloadError:
                partial.unlink(missing_ok=True)  # complete but wrong: the next run downloads it again
                raise
        except DownloadError:
            if not partial.exists():
                _forget(lock)
            raise
        except Interrupted as stop:
            _keep_for_next_run(stop, partial, lock, target.name)
            raise
        os.replace(partial, target)
    logger.info("downloaded %s (%s bytes) to %s", target.name, f"{target.stat().st_size:,}", target)
    return target


def _keep_for_next_run(stop: Interrupted, partial: Path, lock: Path, name: str) -> None:
    """An interrupted download: the bytes received stay for the next run (`stop.kept` says so for the command's
    one line); a download that received nothing leaves the cache as it found it."""
    size = partial.stat().st_size if partial.is_file() else 0
    if size:
        stop.kept = f"{size:,} bytes of {name} are kept in {partial.parent}: the same command resumes the download"
        return
    partial.unlink(missing_ok=True)
    _forget(lock)


def _forget(lock: Path) -> None:
    """Remove the lock file and the file's cache folder of a download that received nothing (no host, refused), so
    that a failed run leaves the cache as it found it. Done while the lock is held: a second process waiting on it
    would then hold an orphan lock, which costs at worst one duplicate download of a file that one of them fails
    to get anyway."""
    lock.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: other files of the cache live there
        lock.parent.rmdir()


# A download stalls out after this many attempts in a row that receive nothing; any progress resets the count.
MAX_STALLED_ATTEMPTS = 5
RETRY_WAIT_S = 1.0


class _Interrupted(Exception):
    """The body ended before the size the server announced (the connection was closed early)."""


def _is_client_error(error: BaseException) -> bool:
    """What a request through huggingface_hub's session raises when the network or the server fails: OSError (the
    socket, the file being written), a body cut short, and its HTTP client's errors (httpx's `HTTPError`, requests'
    `RequestException`), matched by name as the client changes with huggingface_hub (requests, httpx, httpx2).
    Anything else out of a request is a bug, reported with its traceback."""
    return isinstance(error, (OSError, _Interrupted)) or any(
        cls.__name__ in ("HTTPError", "RequestException") for cls in type(error).__mro__)


def _is_connect_error(error: BaseException) -> bool:
    """No connection at all: the host name does not resolve (offline, a typo) or nothing listens on the port.
    Waiting a second does not change that, so it is reported at once instead of retried."""
    return any(cls.__name__ == "ConnectError" for cls in type(error).__mro__)


def _is_transport_error(error: BaseException) -> bool:
    """A dropped connection, a timeout, a protocol error: worth another attempt from where the file stands.
    Matched by name so that it holds for the client huggingface_hub uses (httpx, or its successor)."""
    return isinstance(error, _Interrupted) or any(
        cls.__name__ in ("TransportError", "StreamError") for cls in type(error).__mro__
    )


def _total_size(response, done: int) -> int | None:
    """The full size of the file from Content-Range (a resumed request) or Content-Length (a whole one)."""
    if response.headers.get("Content-Encoding", "identity").lower() != "identity":
        return None  # a compressed body: its length is not the file's
    content_range = response.headers.get("Content-Range")
    if content_range and "/" in content_range and not content_range.endswith("*"):
        return int(content_range.rsplit("/", 1)[1])
    length = response.headers.get("Content-Length")
    return None if length is None else done + int(length)


def _fetch(url: str, partial: Path) -> None:
    """Download `url` into `partial`, continuing from the bytes already there (a Range request).

    The HTTP client is huggingface_hub's session (proxies, user agent and HF_HUB_OFFLINE honoured). Every byte
    received is written at once, so a dropped connection loses nothing: the next attempt, or the next run,
    asks for the rest. The bytes received are checked against the size the server announced.
    """
    if constants.is_offline_mode():
        raise DownloadError(f"cannot download {url}: HF_HUB_OFFLINE is set (unset it, or pass local files)")
    progress = _Progress(partial.name.removesuffix(".incomplete"))
    stalled = 0
    try:
        while True:
            before = partial.stat().st_size if partial.is_file() else 0
            try:
                _attempt(get_session(), url, partial, before, constants.HF_HUB_DOWNLOAD_TIMEOUT, progress)
                return
            except (DownloadError, Interrupted):
                raise
            except Exception as error:  # noqa: BLE001 - sorted here: a bug goes on, only transport errors are retried
                if not _is_client_error(error):
                    raise
                done = partial.stat().st_size if partial.is_file() else 0
                kept = f"; {done:,} bytes kept, the next run resumes" if done else ""
                if _is_connect_error(error):
                    host = urlsplit(url).netloc
                    raise DownloadError(f"cannot download {url}: cannot connect to {host} ({_one_line(error)}); "
                                        f"offline? pass local files{kept}") from error
                if not _is_transport_error(error):
                    raise DownloadError(f"cannot download {url}: {_one_line(error)}") from error
                stalled = 0 if done > before else stalled + 1
                if stalled >= MAX_STALLED_ATTEMPTS:
                    raise DownloadError(f"cannot download {url}: {_one_line(error)}{kept}") from error
                logger.warning("download of %s interrupted after %s bytes (%s); resuming", progress.name,
                               f"{done:,}", _one_line(error))
                time.sleep(RETRY_WAIT_S)
    finally:
        progress.close()


class _Progress:
    """One progress bar across the attempts of a download (huggingface_hub's tqdm: HF_HUB_DISABLE_PROGRESS_BARS
    turns it off)."""

    def __init__(self, name: str):
        self.name = name
        self.bar = None

    def start(self, total: int | None, done: int):
        if self.bar is None:
            self.bar = hf_tqdm(total=total, initial=done, unit="B", unit_scale=True, desc=self.name)
        elif self.bar.n != done:  # the server restarted the file
            self.bar.reset(total=total)
            self.bar.update(done)
        return self.bar

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _attempt(session, url: str, partial: Path, done: int, timeout: float, progress: _Progress) -> None:
    """One GET from byte `done`, written to `partial` as it arrives; raises on a failed or short answer."""
    headers = {"Range": f"bytes={done}-"} if done else {}
    with session.stream("GET", url, headers=headers, follow_redirects=True, timeout=timeout) as response:
        status = response.status_code
        if status == 416 and done:  # "Range Not Satisfiable": the partial file already holds every byte
            return
        if status >= 400:
            raise DownloadError(f"cannot download {url}: HTTP {status}")
        if done and status != 206:  # the server ignored the Range: it sends the whole file again
            logger.info("%s does not resume downloads; starting again", url)
            done = 0
        total = _total_size(response, done)
        bar = progress.start(total, done)
        with open(partial, "r+b" if partial.is_file() else "wb") as handle:
            handle.seek(done)
            handle.truncate()
            for chunk in response.iter_bytes():
                handle.write(chunk)
                bar.update(len(chunk))
    size = partial.stat().st_size
    if total is not None and size != total:
        raise _Interrupted(f"the server announced {total:,} bytes and sent {size:,}")


def resolve(
    location: str | os.PathLike,
    kind: str,
    cache_dir: str | os.PathLike | None = None,
    expected_size: int | None = None,
) -> Path:
    """A local path for `location`: itself when it is a path, the verified cached download when it is a URL."""
    if is_url(location):
        return download(str(location), kind, cache_dir, expected_size)
    return Path(location)


def fetch_published(
    name: str,
    cache_dir: str | os.PathLike | None = None,
    base: str | None = None,
    with_vocab: bool = False,
) -> dict[str, Path]:
    """Download (or find in the cache) the files of a published model: `{"options", "weights"[, "vocab"]}`.

    The published sizes are checked only against AllenNLP's own server; a mirror (`base`) is checked against
    its Content-Length and the file formats.
    """
    model = get_published_model(name)
    if with_vocab and not model.has_vocab:
        raise DownloadError(f"no vocabulary was published for --model {model.name}")
    urls = model_urls(model, base)
    official = base_url(base) == DEFAULT_BASE_URL
    sizes = {"options": model.options_bytes, "weights": model.weights_bytes} if official else {}
    files = {}
    for kind in ("options", "weights", "vocab") if with_vocab else ("options", "weights"):
        files[kind] = download(urls[kind], kind, cache_dir, sizes.get(kind))
    return files
