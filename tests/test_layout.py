"""The shape of the house, checked from the source: the layers, what travels to the Hub as remote code, file sizes,
import circles, the places that build a command-line parser. Nothing is imported or run: every module is read with
`ast`, so an import hidden inside a function counts as much as one at the top of a file.

* The packages are layers, each above the ones before it (`LAYERS`, docs/architecture.md "Package layout"): a module
  imports its own layer and those below, never one above, and names none above in a string (a "module:function" or
  "package.module" a caller would import).

* The files flat in `modeling_elmo/` and in `tokenization/` (not their `__init__.py`) are what `save_pretrained`
  copies next to a saved model: they import only the standard library, torch, numpy, transformers and each other.
  The tools in `tools/` and the commands in `train/` never travel, and no travelling file imports them.
* The runtime core, `tools/core/` (what the command layer imports before torch), imports the standard library and
  itself only, with the two light packages `CORE_MAY_IMPORT` names.
* No file of the packages is above 800 lines: a concept that outgrows them is split by its parts (the tokenizer's
  alignment, row cache and padding are files of their own).
* The project's modules import each other without a circle.
* ruff passes on the whole tree with the configuration in pyproject.toml, its line length (120) included: the one
  check here that runs a program.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The layers, bottom first: the tokenizer, the model (remote code), the tools on the model and what every run needs,
# the tasks and training, the command layer. Each is a folder at the top of the repository, installed as
# `elmo_hf.<folder>` (pyproject.toml), so that no file of a user's (`train.py`, `tokenization.py`) shadows it.
NAMESPACE = "elmo_hf"
LAYERS = ("tokenization", "modeling_elmo", "tools", "train", "cli")
PACKAGES = LAYERS

# What remote code may import besides its siblings: what transformers itself needs to run.
REMOTE_CODE_MAY_IMPORT = {"torch", "transformers", "tokenizers", "numpy", "safetensors", "huggingface_hub",
                          "__future__"}
# Travelling files that reach outside, each for a reason written at the import:
EXCEPTIONS = {
    # Triton, for the optional fused step of the "graph" LSTM kernel: imported in a try block (transformers' import
    # check skips those), and the torch ops run where it is absent.
    ("elmo_hf.modeling_elmo.lstm_triton_elmo", "triton"),
    # The sentence-transformers module copied into saved folders: it is loaded only by sentence-transformers.
    ("elmo_hf.modeling_elmo.elmo_sentence_pooling", "sentence_transformers"),
    # Grapheme clusters (`\X`) for the word splits: `regex` is a dependency of transformers, so it is wherever
    # remote code can load.
    ("elmo_hf.tokenization.word_splits_elmo", "regex"),
}


def _module_name(path: Path) -> str:
    parts = [NAMESPACE, *path.relative_to(REPO).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            modules[_module_name(path)] = path
    return modules


def _imports(name: str, path: Path) -> set[str]:
    """The absolute names of every module `path` imports, at any depth of its code (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    return found


def _graph() -> dict[str, set[str]]:
    modules = _project_modules()
    return {name: {m for m in _imports(name, path) if m in modules and m != name} for name, path in modules.items()}


def _travelling_files() -> list[Path]:
    return [
        path for package in ("modeling_elmo", "tokenization")
        for path in sorted((REPO / package).glob("*.py")) if path.name != "__init__.py"
    ]


def test_remote_code_imports_only_its_dependencies_and_siblings():
    siblings = {_module_name(path) for path in _travelling_files()}
    wrong = []
    for path in _travelling_files():
        name = _module_name(path)
        for module in _imports(name, path):
            top = module.split(".")[0]
            if module in siblings or top in REMOTE_CODE_MAY_IMPORT or top in sys.stdlib_module_names:
                continue
            if (name, top) in EXCEPTIONS or (name.startswith("elmo_hf.tokenization."), top) == (True, "jieba"):
                continue  # jieba: the optional word split "jieba", imported when a tokenizer first uses it
            if any(module.startswith(s + ".") for s in siblings):
                continue
            wrong.append(f"{path.relative_to(REPO)} imports {module}")
    assert not wrong, "remote code must import only torch, transformers and its siblings:\n" + "\n".join(wrong)


def test_travelling_file_names_do_not_collide():
    """Model and tokenizer files are copied into one flat folder: two different files of one name would overwrite
    each other (`character_ids.py` is in both packages, the same bytes)."""
    names = {}
    for path in _travelling_files():
        names.setdefault(path.name, set()).add(path.read_bytes())
    assert {name for name, contents in names.items() if len(contents) > 1} == set()
    assert ((REPO / "tokenization" / "character_ids.py").is_file()
            and (REPO / "modeling_elmo" / "character_ids.py").is_file())


def test_the_tree_holds_no_links():
    """A checkout without symbolic links (Windows, some archives) has every file: git records none."""
    staged = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True)
    if staged.returncode != 0:
        pytest.skip("not a git checkout: " + staged.stderr.strip())
    links = [line.split("\t", 1)[1] for line in staged.stdout.splitlines() if line.startswith("120000 ")]
    assert links == []


def _find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (circle := visit(nxt)):
                return circle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def test_no_import_circles():
    circle = _find_circle(_graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


@pytest.mark.parametrize("graph, circular", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
    ({"a": {"a.x"}, "a.x": {"a"}}, True),
])
def test_circle_finder_finds_circles(graph, circular):
    assert (_find_circle(graph) is not None) == circular


def test_the_kernel_registry_imports_nothing_of_the_package():
    """`kernels_elmo` is imported by every kernel file and by the model: it imports none of them."""
    graph = _graph()
    assert graph["elmo_hf.modeling_elmo.kernels_elmo"] == set()


def test_the_configuration_imports_nothing_of_the_model():
    """As transformers' configs import nothing of their model, `configuration_elmo` imports no kernel and no model
    file: only the kernel registry, which declares the built-in kernels' names for the check of
    `lstm_implementation`, the table of the choice fields' values (`config_choices_elmo`, which the commands read
    without torch) and what transformers versions name differently (`compat_elmo`); the last two import nothing of the
    package."""
    graph = _graph()
    assert graph["elmo_hf.modeling_elmo.configuration_elmo"] == {"elmo_hf.modeling_elmo.kernels_elmo",
                                                                 "elmo_hf.modeling_elmo.config_choices_elmo",
                                                                 "elmo_hf.modeling_elmo.compat_elmo"}
    assert graph["elmo_hf.modeling_elmo.compat_elmo"] == graph["elmo_hf.modeling_elmo.config_choices_elmo"] == set()


def _loaded_by_name() -> set[str]:
    """The travelling modules transformers loads by name: the configuration's, every class of the model's and the
    tokenizer's `auto_map`, every pipeline of `custom_pipelines`, and sentence-transformers' pooling module."""
    from elmo_hf.modeling_elmo.configuration_elmo import AUTO_MAP, CUSTOM_PIPELINES

    names = {"configuration_elmo", "tokenization_elmo", "tokenization_elmo_manylangs", "elmo_sentence_pooling"}
    names |= {path.split(".")[0] for path in AUTO_MAP.values()}
    names |= {entry["impl"].split(".")[0] for entry in CUSTOM_PIPELINES.values()}
    return names


def test_a_module_loaded_by_name_imports_every_sibling_it_needs_itself():
    """transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it
    loads by name, with the siblings that module imports itself, not those they import in turn (5.x follows them
    all). So each module loaded by name imports, itself, every sibling it needs at any depth."""
    graph = _graph()
    travelling = {_module_name(path).split(".")[-1]: _module_name(path) for path in _travelling_files()}

    def needed(module: str, seen: set[str]) -> set[str]:
        for sibling in graph[module]:
            if sibling not in seen and sibling.split(".")[-1] in travelling:
                seen.add(sibling)
                needed(sibling, seen)
        return seen

    short = {}
    for name in _loaded_by_name():
        module = travelling[name]
        missing = needed(module, set()) - graph[module]
        if missing:
            short[name] = sorted(m.split(".")[-1] for m in missing)
    assert short == {}, (f"modules loaded by name that leave siblings they need to their imports: {short}; name each "
                         "in the module's block under '# isort: split' (`from .x import a_name  # noqa: F401`)")


def test_the_model_folder_is_exactly_what_a_saved_model_carries(tmp_path):
    """Every file of `modeling_elmo/` but `__init__.py` travels, and nothing else of the project does: a model saved
    with its tokenizer holds the model's files and the tokenizer's module with the siblings it imports."""
    from conftest import tiny_model

    from elmo_hf.modeling_elmo import remote_code_elmo
    from elmo_hf.tokenization import ElmoTokenizer

    model_files = {path.name for path in (REPO / "modeling_elmo").glob("*.py")} - {"__init__.py"}
    assert {path.name for path in remote_code_elmo.model_code_files()} == model_files
    tokenizer_files = {path.name for path in remote_code_elmo.module_with_siblings("tokenization_elmo",
                                                                              [REPO / "tokenization"])}
    tiny_model().save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    assert {path.name for path in tmp_path.glob("*.py")} == model_files | tokenizer_files


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[1])


def _strings(path: Path) -> list[str]:
    """The string constants of `path` that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_module_imports_or_names_a_higher_layer():
    modules = _project_modules()
    upward = []
    for name, targets in _graph().items():
        upward += [f"{name} imports {target}" for target in sorted(targets) if _layer(target) > _layer(name)]
    # "elmo_hf.train.tasks.multiple_choice", "elmo_hf.cli:embed" (a bare "train" is a dataset's split, not a module)
    names_a_module = re.compile(rf"^{NAMESPACE}\.({'|'.join(LAYERS)})((\.\w+)+(:\w+)?|:\w+)$")
    for name, path in modules.items():
        for text in _strings(path):
            match = names_a_module.match(text)
            if match and _layer(text) > _layer(name):
                upward.append(f"{name} names {text!r}")
    assert not upward, "a layer reaches up:\n" + "\n".join(upward)


def test_at_most_two_places_build_a_command_line_parser():
    """The options of every command are dataclasses read by `elmo_hf.tools.core.arguments`; transformers' own parser
    reads its `TrainingArguments`, for the fine-tuning commands only."""
    places = []
    for name, path in _project_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if called in ("ArgumentParser", "HfArgumentParser"):
                    places.append(f"{name}:{node.lineno}")
    assert len(places) <= 2, places


def test_every_entry_point_names_a_function_of_the_project():
    """The entry points other programs load by name (pyproject.toml's, not the console scripts: tests/test_commands.py
    checks those) name a function defined in that module; a spaCy architecture registers itself under its entry's
    name, so that importing the module and the installed entry point give the same."""
    import tomllib

    groups = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    modules = _project_modules()
    assert groups
    for group, entries in groups.items():
        for name, target in entries.items():
            module, function = target.split(":")
            tree = ast.parse(modules[module].read_text(encoding="utf-8"))
            (found,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function]
            if group == "spacy_architectures":
                registered = [ast.literal_eval(decorator.args[0]) for decorator in found.decorator_list
                              if isinstance(decorator, ast.Call) and decorator.args]
                assert registered == [name], (target, registered)


# What the runtime core may import besides the standard library and itself: the encoding guess reads
# charset-normalizer's letter frequencies, the run lock is filelock's (both light, and dependencies of the project).
CORE_MAY_IMPORT = {"charset_normalizer": {"elmo_hf.tools.core.encoding_guess"},
                   "filelock": {"elmo_hf.tools.core.output_folders"}}


CORE = f"{NAMESPACE}.tools.core"


def _outside_the_core(name: str, path: Path) -> list[str]:
    """The modules the core module `name` (read from `path`) imports that are neither the standard library, nor the
    core itself, nor a package `CORE_MAY_IMPORT` allows that module."""
    wrong = []
    for module in sorted(_imports(name, path)):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or name in CORE_MAY_IMPORT.get(top, ()):
            continue
        if module != CORE and not module.startswith(CORE + "."):
            wrong.append(module)
    return wrong


def test_the_runtime_core_imports_only_the_standard_library_and_itself():
    """`tools/core/` is what the command layer imports before torch (`--help`, the early checks, the one-line errors):
    it imports the standard library and its own modules, never a feature of `tools/` (which would bring torch, numpy
    or a backend) nor anything lower (the model's package imports torch when imported)."""
    modules = {name: path for name, path in _project_modules().items() if name == CORE or name.startswith(CORE + ".")}
    assert f"{CORE}.errors" in modules and f"{CORE}.command_options" in modules
    wrong = [f"{path.relative_to(REPO)} imports {module}"
             for name, path in modules.items() for module in _outside_the_core(name, path)]
    assert not wrong, "the runtime core reaches outside the standard library and itself:\n" + "\n".join(wrong)


@pytest.mark.parametrize("source, outside", [
    ("import json\nfrom .errors import InputError\n", []),
    ("from ..loading import load_elmo\n", ["elmo_hf.tools.loading", "elmo_hf.tools.loading.load_elmo"]),
    ("import numpy as np\n", ["numpy"]),
    ("def f():\n    import torch\n", ["torch"]),
    ("from filelock import FileLock\n", ["filelock", "filelock.FileLock"]),  # allowed to output_folders only
])
def test_the_core_check_sees_what_it_must(tmp_path, source, outside):
    """The check above reads imports at any depth and resolves relative ones against the core's package."""
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    assert _outside_the_core(f"{CORE}.probe", path) == outside


def _backend_name_lists(path: Path, names: set[str]) -> list[int]:
    """The lines of `path` where a tuple, list or set literal (or a dict's keys) holds two backend names or more."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) or items is None:
            continue
        strings = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
        if len(strings & names) >= 2:
            found.append(node.lineno)
    return found


def test_only_the_backend_registry_lists_backends(tmp_path):
    """The backends are rows of one table (`tools/core/backend_registry.py`): the command line's choices, the app,
    the automatic choice and the runners read it, and no other module keeps a list of their names to drift from it."""
    from elmo_hf.tools.core.backend_registry import BACKEND_NAMES

    names = set(BACKEND_NAMES)
    registry = f"{CORE}.backend_registry"
    lists = {name: lines for name, path in _project_modules().items()
             if name != registry and (lines := _backend_name_lists(path, names))}
    assert lists == {}, f"modules that list backend names (read them from {registry}): {lists}"
    probe = tmp_path / "probe.py"
    probe.write_text('A = ("torch", "openvino")\nB = {"onnxruntime": 1, "torch": 2}\nC = ("torch", "x")\n')
    assert _backend_name_lists(probe, names) == [1, 2]


# `tools/` is rooms: the runtime core, the tools every feature shares (flat in the folder) and a subpackage a feature.
# Each room names the rooms it may import besides itself; the table has no circle, so no feature reaches one that
# needs it (the export keeps its cache key in `loading`, not in the embedding it serves).
TOOLS = f"{NAMESPACE}.tools"
TOOL_ROOMS = {
    "core": set(),
    "loading": {"core"},
    "hub": {"core"},
    "conversion": {"core", "hub"},
    "export": {"core", "loading", "conversion"},
    "embedding": {"core", "loading", "export"},
    "analysis": {"core", "loading", "embedding"},
    "flair_embeddings": {"core", "loading"},
    "spacy_pipe": {"core", "loading"},
    "app": {"core", "loading", "analysis", "export"},
}
FEATURES = {"embedding", "export", "conversion", "hub", "app"}  # the subpackages of tools/ besides the core


def test_tools_holds_the_core_the_shared_tools_and_a_subpackage_a_feature():
    folders = {path.parent.name for path in (REPO / "tools").glob("*/__init__.py")}
    assert folders == FEATURES | {"core"}
    flat = {path.stem for path in (REPO / "tools").glob("*.py")} - {"__init__"}
    assert flat == set(TOOL_ROOMS) - folders
    assert _find_circle(TOOL_ROOMS) is None


def _room(module: str) -> str | None:
    """The room of `tools/` that `module` is in (`elmo_hf.tools.export.backends` -> "export"), None outside."""
    parts = module.split(".")
    return parts[2] if module.startswith(TOOLS + ".") else None


def test_a_room_of_tools_imports_only_the_rooms_it_names():
    wrong = []
    for name, targets in _graph().items():
        room = _room(name)
        if room is None:
            continue
        for target in sorted(targets):
            other = _room(target)
            if other is not None and other != room and other not in TOOL_ROOMS[room]:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "a room of tools/ reaches one it does not name in TOOL_ROOMS:\n" + "\n".join(wrong)


def test_ruff_passes_on_the_tree():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed in this environment (it is in the dev extra: pip install -e .[dev])")
    # --no-cache: a test writes nothing into the checkout
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check . failed:\n{result.stdout}{result.stderr}"
