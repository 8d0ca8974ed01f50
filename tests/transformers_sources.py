"""transformers' own common tests, from the source distribution of the installed version: fetched once, imported as a
package (`import_transformers_tests`). Used by test_transformers_common.py (`ModelTesterMixin`, `ConfigTester`) and
test_tokenizer_common.py (`TokenizerTesterMixin`).

The test files ship in the source distribution on the package index, not in the wheel: the first run fetches them
for the installed version with pip into `~/.cache/elmo-hf/` (`$XDG_CACHE_HOME` is honoured), later runs read them
from there; `fetch_reason()` says why they could not be fetched (no index), for the module to skip. The source
distribution lacks a few modules and files they import (the export and generation mixins, a dict of config kwargs,
the sample text of the tokenizer tests): stand-ins take their place, which is what they are for a model that neither
exports through those paths nor generates (the sample text is our own). Where `parameterized` (a test dependency of
transformers) is not installed, a stand-in gives its one use here, `parameterized.expand`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import types
import warnings
from pathlib import Path

import pytest
import transformers

SOURCE_FILES = ("test_modeling_common.py", "test_configuration_common.py", "test_tokenization_common.py",
                "test_sentencepiece_backend_mixin.py", "test_tokenizers_backend_mixin.py")
PACKAGE = "elmo_hf_transformers_tests"  # the name the fetched files are imported under (they import relatively)
# The tokenizer tests read `fixtures/sample_text.txt` (not in the source distribution): a few lines of our own.
SAMPLE_TEXT = ("The bank raised its rates this spring .\nWe sat on the river bank and watched the boats .\n"
               "A bat flew over the plant at night .\n")


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    # a folder named "tests", as in transformers' tree: its `get_tests_dir()` climbs up to one (forever, without)
    return root / "elmo-hf" / f"transformers-{transformers.__version__}" / "tests"


def _fetch(folder: Path) -> str | None:
    """Put the test files of the installed transformers in `folder`; None, or why they could not be."""
    if all((folder / name).is_file() for name in SOURCE_FILES):
        return None
    version = transformers.__version__
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
                   "--timeout", "15", "--retries", "0", "-d", download, f"transformers=={version}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        archives = list(Path(download).glob(f"transformers-{version}.tar.gz"))
        if done.returncode != 0 or not archives:
            last = (done.stderr.strip().splitlines() or ["no archive"])[-1]
            return f"pip could not download the source distribution of transformers=={version}: {last}"
        # Written beside the cache folder, then renamed into place: a run cut short leaves no half-written cache.
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", dir=folder.parent))
        with tarfile.open(archives[0]) as archive:
            for name in SOURCE_FILES:
                (partial / name).write_bytes(archive.extractfile(f"transformers-{version}/tests/{name}").read())
        (partial / "__init__.py").touch()
        (partial / "fixtures").mkdir()
        (partial / "fixtures" / "sample_text.txt").write_text(SAMPLE_TEXT, encoding="utf-8")
        if not folder.is_dir():
            partial.rename(folder)
    return None


def fetch_reason() -> str | None:
    """Fetch the files if needed: None when they are there, else why not (the caller skips with it)."""
    return _fetch(cache_dir())


def import_transformers_tests(*modules: str) -> tuple[types.ModuleType, ...]:
    """Import fetched files (`"test_modeling_common"`, ...) as a package, with the stand-ins (module docstring)."""
    folder = cache_dir()
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
    stand_ins = {
        "exporters.test_export": {"ExportTesterMixin": type("ExportTesterMixin", (), {})},
        "generation.test_utils": {"GenerationTesterMixin": type("GenerationTesterMixin", (), {})},
        "utils.test_configuration_utils": {"config_common_kwargs": {}},
    }
    for dotted, names in stand_ins.items():
        parent = dotted.split(".")[0]
        for name in (f"{PACKAGE}.{parent}", f"{PACKAGE}.{dotted}"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules[f"{PACKAGE}.{dotted}"].__dict__.update(names)
    if "parameterized" not in sys.modules and importlib.util.find_spec("parameterized") is None:
        sys.modules["parameterized"] = _parameterized_stand_in()
    with warnings.catch_warnings():  # marks of transformers' own pytest configuration (flash_attn_test, ...)
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        return tuple(importlib.import_module(f"{PACKAGE}.{name}") for name in modules)


def _parameterized_stand_in() -> types.ModuleType:
    """`parameterized.expand` (the one use the common tests make of the package, a test dependency of transformers,
    not of this project): one test method per case, named `<test>_<index>`, in the class being defined."""

    def expand(cases):
        def decorate(function):
            namespace = sys._getframe(1).f_locals
            for index, case in enumerate(cases):
                args = case if isinstance(case, tuple) else (case,)

                def test(self, _args=args):
                    return function(self, *_args)

                test.__name__ = f"{function.__name__}_{index}"
                namespace[test.__name__] = test
            function.__test__ = False
            return None

        return decorate

    module = types.ModuleType("parameterized")
    module.parameterized = types.SimpleNamespace(expand=expand)
    return module
