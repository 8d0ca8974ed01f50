"""The project as the check scripts of this folder see it, in an environment where it is not installed: hidden (what a
user without it has), or imported from a checkout (what an installed project gives: the `elmo_hf` namespace, whose
packages are the checkout's top-level folders, pyproject.toml's package-dir)."""

from __future__ import annotations

import importlib.abc
import sys
import types
from pathlib import Path

NAMESPACE = "elmo_hf"


class NoProject(importlib.abc.MetaPathFinder):
    """Makes the project's packages unimportable: put first on `sys.meta_path`."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == NAMESPACE:
            raise ModuleNotFoundError(f"No module named {name!r} (the project is hidden from this process)")


def import_project_from(repo: Path) -> None:
    """Make `elmo_hf.<folder>` import `repo/<folder>`, as the installed project's packages."""
    package = types.ModuleType(NAMESPACE)
    package.__path__ = [str(Path(repo).resolve())]
    sys.modules[NAMESPACE] = package
