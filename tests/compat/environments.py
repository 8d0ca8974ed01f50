"""The virtual environments of the compatibility matrix: one per file of tests/compat/requirements/, built with pip from
the package registry and cached outside the checkout, so that only a changed file (or a changed dependency list of
the project) builds again.

    python tests/compat/environments.py build [NAME ...]    # all by default; prints where each is, and its time
                                                             # (two builds at a time: pip waits on files a lot)
    python tests/compat/environments.py list                 # the names, and whether each is built

An environment is `$ELMO_COMPAT_CACHE` (default `~/.cache/elmo-hf/compat`) / `NAME-KEY`, KEY a hash of its
requirements file, of the project's dependencies (`pyproject.toml`), of the Python version and of the torch it shares.
It holds what the file names and the project's own dependencies, installed together, so that pip proves they resolve
(the project itself is not installed: the tests import it from the checkout, or hide it). A build that fails leaves
nothing that counts as built.

torch is not installed again: every file pins the torch of the calling interpreter (the pinned stack's), and the
environment sees that installation through links to its packages alone (`torch`, `torchgen`, `functorch` and its
metadata) on a path after its own. pip counts it as installed and resolves torch's own dependencies into the
environment; none of the pinned stack's other packages is visible. That makes a build seconds of pip instead of
minutes of unpacking torch, and the vectors of every stack come from the very same torch. Standard library only (it
reads torch's metadata, never imports it): run it with the interpreter of the project's environment.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUIREMENTS = HERE / "requirements"
BUILT = ".built"  # written last: an environment without it is not built
AT_ONCE = 2  # builds at a time


def names() -> list[str]:
    return sorted(path.stem for path in REQUIREMENTS.glob("*.txt"))


def project_dependencies() -> list[str]:
    """The `dependencies` of pyproject.toml's [project] table (read without tomllib, absent before Python 3.11)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, flags=re.S | re.M)
    return re.findall(r'^\s*"([^"]+)"', block.group(1), flags=re.M) if block else []


def cache_root() -> Path:
    return Path(os.environ.get("ELMO_COMPAT_CACHE", Path.home() / ".cache" / "elmo-hf" / "compat"))


def shared_torch() -> list[Path]:
    """The top-level files and folders of the torch distribution this interpreter imports (its packages, its
    metadata): what an environment links to instead of installing torch."""
    try:
        torch = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(f"{sys.executable} has no torch to share: run this with the project's environment "
                         "(.venv/bin/python, after make test's set-up)") from None
    tops = {Path(str(file)).parts[0] for file in torch.files or ()} - {".."}  # ".." : scripts in bin/
    return sorted(Path(torch.locate_file(top)) for top in tops)


def location(name: str) -> Path:
    key = hashlib.sha256()
    key.update((REQUIREMENTS / f"{name}.txt").read_bytes())
    key.update("\n".join(project_dependencies()).encode())
    key.update(sys.version.split()[0].encode())
    key.update("\n".join(map(str, shared_torch())).encode())  # another torch (or the pinned stack moved): rebuilt
    return cache_root() / f"{name}-{key.hexdigest()[:12]}"


def python_of(name: str) -> Path | None:
    """The interpreter of the environment `name`, or None where it is not built (or its shared torch is gone)."""
    folder = location(name)
    links = list((folder / "shared-torch").glob("*"))
    whole = (folder / BUILT).is_file() and links and all(link.exists() for link in links)
    return folder / "bin" / "python" if whole else None


def link_torch(folder: Path, python: Path) -> None:
    """Make this interpreter's torch visible to the environment at `folder`, after its own site-packages."""
    shared = folder / "shared-torch"
    shared.mkdir()
    for path in shared_torch():
        (shared / path.name).symlink_to(path)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "shared_torch.pth").write_text(f"{shared}\n", encoding="utf-8")


def build(name: str) -> Path:
    """Build the environment `name` unless it is built; returns its interpreter. pip's output goes to build.log in
    it."""
    python = python_of(name)
    if python is not None:
        return python
    folder = location(name)
    shutil.rmtree(folder, ignore_errors=True)  # a build that did not finish
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    python = folder / "bin" / "python"
    link_torch(folder, python)
    log = folder / "build.log"
    with open(log, "w", encoding="utf-8") as out:
        command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
                   "-r", str(REQUIREMENTS / f"{name}.txt"), *project_dependencies()]
        if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            raise SystemExit(f"building the environment {name} failed: see {log}")
    (folder / BUILT).write_text("\n".join(project_dependencies()) + "\n", encoding="utf-8")
    return python


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["build", "list"])
    parser.add_argument("names", nargs="*", help=f"default: all of {names()}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(names()))
    if unknown:
        parser.error(f"no environment named {unknown}: choose among {names()}")
    chosen = args.names or names()
    if args.action == "list":
        for name in chosen:
            print(f"{name}: {python_of(name) or 'not built'}")
        return
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:  # each build is a pip process of its own
        for line in pool.map(build_timed, chosen):
            print(line, flush=True)


def build_timed(name: str) -> str:
    """Build `name` (or find it built); the line that says where it is and how long it took."""
    start = time.monotonic()
    was_built = python_of(name) is not None
    python = build(name)
    took = "cached" if was_built else f"built in {time.monotonic() - start:.0f} s"
    return f"{name}: {python} ({took})"


if __name__ == "__main__":
    main()
