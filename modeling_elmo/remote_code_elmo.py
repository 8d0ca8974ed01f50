"""Which files travel to the Hub as remote code, and their copying into a saved folder: the one answer to both.

Every file of this folder but `__init__.py` travels: `save_pretrained` of an Elmo model copies them all next to the
weights (transformers alone copies only the file of the class saved and what it imports), so that a folder saved
from any one class opens with every Auto class of its `auto_map` and every pipeline of its `custom_pipelines`
through `trust_remote_code=True`, and with sentence-transformers' pooling module (`elmo_sentence_pooling.py`). The
Hub push (`elmo_hf.tools.hub.hub_push`) and the sentence-transformers export
(`elmo_hf.tools.embedding.sentence_vectors`) take their lists from here too.

A model that was itself loaded as remote code (a notebook without the project: load, fine-tune, `save_pretrained`,
`Trainer.save_model`, `push_to_hub`) has only the files transformers fetched for the class loaded, in a folder of its
own per class; the pipelines' files, the other heads' and the pooling module are not among them. `code_folders` says
where the files are looked for first; a file found in none of them is taken from where the model came from
(`config._name_or_path`: the folder, or the Hub repository at the revision loaded, through the Hub cache).
`copy_model_code` reports the files it found nowhere (their Auto classes and pipelines are left out of the saved
config.json, with a warning), so that a saved config never names a file its folder lacks.

This file travels too: it imports only the standard library and transformers.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from transformers.dynamic_module_utils import get_relative_import_files, get_relative_imports
from transformers.utils import TRANSFORMERS_DYNAMIC_MODULE_NAME, cached_file, logging

logger = logging.get_logger(__name__)

HERE = Path(__file__).resolve().parent
# Travelling files that nothing in config.json names, carried on where they are found (a folder saved by the project
# holds them): sentence-transformers' pooling module, which `save_for_sentence_transformers` names in modules.json.
UNNAMED_MODULES = ("elmo_sentence_pooling",)


def is_remote_code(cls: type) -> bool:
    """Whether `cls` was loaded as remote code (from the module transformers makes of a folder's files)."""
    return cls.__module__.startswith(TRANSFORMERS_DYNAMIC_MODULE_NAME + ".")


def model_code_files(folder: Path = HERE) -> list[Path]:
    """The files of `folder` that travel: every `.py` but the package's `__init__.py`, sorted by name."""
    return sorted(path for path in folder.glob("*.py") if path.name != "__init__.py")


def module_with_siblings(module: str, folders: Iterable[Path]) -> list[Path] | None:
    """`module`'s file and the siblings it imports (`from .x import`, transitively), from the first of `folders`
    that holds them all; None where none does."""
    for folder in folders:
        source = Path(folder) / f"{module}.py"
        try:  # reads every file it follows: fails on the first one absent
            return [source, *map(Path, get_relative_import_files(str(source)))]
        except OSError:
            continue
    return None


def code_folders(origin: str | os.PathLike | None = None) -> list[Path]:
    """Where the model's files may be, first found first: this file's folder (the package, or the folder remote code
    was loaded into); the folders of the other modules loaded as the same remote code (transformers puts the files
    of each class loaded from a local folder into a folder of its own); `origin` (the folder a model was loaded
    from), when it holds this very file."""
    folders = [HERE]
    package = __name__.rsplit(".", 2)[0] + "."  # transformers_modules.<repository>. where loaded as remote code
    for name, module in reversed(list(sys.modules.items())):  # the latest loaded first
        file = getattr(module, "__file__", None)
        if name.startswith(package) and file:
            folders.append(Path(file).resolve().parent)
    mine = Path(str(origin or "/nonexistent")) / Path(__file__).name
    if mine.is_file() and mine.read_bytes() == Path(__file__).read_bytes():
        folders.append(mine.parent.resolve())
    return list(dict.fromkeys(folders))


def copy_code(files: Iterable[Path], target: Path) -> None:
    """Copy `files` into the folder `target` (a file already there, the same one, is left alone)."""
    target.mkdir(parents=True, exist_ok=True)
    for file in files:
        destination = target / file.name
        if not (destination.exists() and os.path.samefile(file, destination)):
            shutil.copyfile(file, destination)


def fetched_module(module: str, origin: str | os.PathLike | None, revision: str | None = None) -> list[Path] | None:
    """`module`'s file and the siblings it imports (transitively) from `origin`, the folder or Hub repository a model
    was loaded from, at `revision` (the commit loaded): through the Hub cache, downloading what it lacks unless
    offline. None where `origin` lacks one of them or cannot be reached."""
    if not origin:
        return None
    found: dict[str, Path] = {}
    wanted = [module]
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        try:
            path = cached_file(str(origin), f"{name}.py", revision=revision,
                               _raise_exceptions_for_missing_entries=False,
                               _raise_exceptions_for_connection_errors=False)
        except (OSError, ValueError):  # not a folder nor a repository id, a repository gone, a revision unknown
            return None
        if path is None:
            return None
        found[name] = Path(path)
        wanted.extend(get_relative_imports(path))
    return list(found.values())


def sentence_transformers_modules(origin: str | os.PathLike | None) -> list[str]:
    """The modules of the folder `origin` that its sentence-transformers `modules.json` names as its own
    (`elmo_sentence_pooling.ElmoSentencePooling`): a model loaded from an exported folder carries its pooling
    module on. sentence-transformers' own modules are not files of the folder."""
    try:
        path = cached_file(str(origin), "modules.json", local_files_only=True,
                           _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False) if origin else None
        modules = json.loads(Path(path).read_text()) if path else []
    except (OSError, ValueError):
        return []
    types = [entry.get("type", "") for entry in modules if isinstance(entry, dict)] if isinstance(modules, list) else []
    return [t.rsplit(".", 1)[0] for t in types if isinstance(t, str) and t.count(".") == 1]


def named_modules(auto_map: Mapping[str, str], custom_pipelines: Mapping[str, Mapping] | None,
                  origin: str | os.PathLike | None) -> dict[str, list[str]]:
    """Every module a saved folder's files name, with what names it: the Auto classes of `auto_map` (but those of
    another repository's code, `owner/repo--module.Class`, which need no file here), the tasks of
    `custom_pipelines` (`"pipeline token-classification"`), and the modules of `origin`'s `modules.json`."""
    named: dict[str, list[str]] = {}
    for auto, reference in auto_map.items():
        if "--" not in str(reference):
            named.setdefault(str(reference).rsplit(".", 1)[0], []).append(auto)
    for task, entry in (custom_pipelines or {}).items():
        impl = entry.get("impl") if isinstance(entry, Mapping) else None
        if isinstance(impl, str) and "--" not in impl:
            named.setdefault(impl.rsplit(".", 1)[0], []).append(f"pipeline {task}")
    for module in sentence_transformers_modules(origin):
        named.setdefault(module, []).append("modules.json")
    return named


def copy_model_code(target: Path, auto_map: Mapping[str, str], origin: str | os.PathLike | None = None,
                    custom_pipelines: Mapping[str, Mapping] | None = None, revision: str | None = None) -> set[str]:
    """Copy every travelling file into `target`, and the file of every module the saved files name (`named_modules`)
    with the siblings it imports: from the first of `code_folders` that holds them, else from `origin` at `revision`
    (`fetched_module`). Returns what names a file found nowhere (Auto classes, and `"pipeline <task>"` for a
    pipeline), after one warning naming them and their files."""
    folders = code_folders(origin)
    copy_code(model_code_files(), target)
    named = named_modules(auto_map, custom_pipelines, origin)
    missing: dict[str, list[str]] = {}  # module's file -> what names it
    for module in [*named, *(module for module in UNNAMED_MODULES if module not in named)]:
        files = module_with_siblings(module, [*folders, target]) or fetched_module(module, origin, revision)
        if files is not None:
            copy_code(files, target)
        elif module in named:
            missing[f"{module}.py"] = named[module]
    if missing:
        logger.warning(
            f"{target} lacks {sorted(missing)} (or a file they import), found in none of {[str(f) for f in folders]} "
            f"nor in {str(origin)!r}: left out of its config.json (auto_map, custom_pipelines): "
            f"{sorted(name for names in missing.values() for name in names)}"
        )
    return {name for names in missing.values() for name in names}
