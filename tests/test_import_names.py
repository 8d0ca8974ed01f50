"""The installed names cannot be shadowed: the project is the namespace `elmo_hf` (pyproject.toml's package-dir), so a
user's folder holding `train.py`, `tokenization.py`, `utils.py`, `tools.py`, `cli.py` or `app.py` (the commonest
script names, and BERT's classic `tokenization.py`) changes nothing of the documented imports, `python -m
elmo_hf.cli`, the console scripts or remote-code loading, all run from that folder."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import clean_env, run_command, tiny_model

USERS_FILES = ("train.py", "tokenization.py", "utils.py", "tools.py", "cli.py", "app.py", "modeling_elmo.py")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def users_folder(tmp_path_factory) -> Path:
    """A folder of a user's scripts, each failing loudly when imported, beside a saved model."""
    folder = tmp_path_factory.mktemp("users-scripts")
    for name in USERS_FILES:
        (folder / name).write_text(f"raise ImportError('the user\\'s own {name} was imported')\n", encoding="utf-8")
    from elmo_hf.tokenization import ElmoTokenizer

    tiny_model().save_pretrained(folder / "model")
    ElmoTokenizer().save_pretrained(folder / "model")
    return folder


def _run(args: list[str], folder: Path):
    result = run_command(args, cwd=folder, env=clean_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_documented_imports_work_beside_a_users_files(users_folder):
    code = ("import sys\n"
            "from elmo_hf import modeling_elmo\n"
            "from elmo_hf.tokenization import WORD_SPLITTERS, ElmoTokenizer\n"
            "from elmo_hf.tools.loading import load_elmo\n"
            "from elmo_hf.train.tasks import TASKS\n"
            "model, tokenizer = load_elmo('model')\n"
            "assert sys.path[0] == '' and 'train' not in sys.modules and 'tokenization' not in sys.modules\n"
            "print(type(model).__module__)")
    assert _run([sys.executable, "-c", code], users_folder).stdout.strip() == "elmo_hf.modeling_elmo.modeling_elmo"


def test_the_command_layer_runs_as_a_module_and_as_scripts_beside_a_users_files(users_folder):
    """`python -m elmo_hf.cli NAME` (the way under torchrun) puts the folder first on sys.path, as `-c` does."""
    assert "--crf_constraints" in _run([sys.executable, "-m", "elmo_hf.cli", "finetune-ner", "--help"],
                                    users_folder).stdout
    script = shutil.which("elmo-embed", path=str(Path(sys.executable).parent))
    assert script is not None, "the console scripts are not installed beside this interpreter"
    _run([script, "--help"], users_folder)
    out = users_folder / "vectors.hdf5"
    (users_folder / "corpus.txt").write_text("the bank raised rates\n", encoding="utf-8")
    _run([sys.executable, "-m", "elmo_hf.cli", "embed", "corpus.txt", str(out), "--model", "model", "--top"],
         users_folder)
    assert out.is_file()


def test_remote_code_loads_beside_a_users_files(users_folder):
    """Remote code imports its siblings relatively: a user's `tokenization.py` or `modeling_elmo.py` is not one."""
    code = ("from transformers import AutoModel, AutoTokenizer\n"
            "tokenizer = AutoTokenizer.from_pretrained('model', trust_remote_code=True)\n"
            "model = AutoModel.from_pretrained('model', trust_remote_code=True)\n"
            "out = model(**tokenizer(['the bank'], return_tensors='pt'))\n"
            "print(type(model).__module__.split('.')[0], tuple(out.last_hidden_state.shape))")
    env = {**clean_env(), "HF_MODULES_CACHE": str(users_folder / "modules")}
    result = run_command([sys.executable, "-c", code], cwd=users_folder, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[0] == "transformers_modules"


def test_app_py_runs_from_a_checkout_where_the_project_is_not_installed(tmp_path):
    """A Hugging Face Space runs `python app.py` from the checkout without installing it: the interpreter this
    environment was made from (no project, no torch) still answers `--help`, the folders taken as `elmo_hf`."""
    base = getattr(sys, "_base_executable", None)
    if not base or sys.prefix == sys.base_prefix:
        pytest.skip("this interpreter is not a virtual environment's: no interpreter without the project to run")
    probe = run_command([base, "-c", "import elmo_hf"], cwd=tmp_path, env=clean_env(), timeout=60)
    if probe.returncode == 0:
        pytest.skip(f"{base} has the project installed: it cannot show the checkout's own import")
    from conftest import REPO

    result = run_command([base, str(REPO / "app.py"), "--help"], cwd=tmp_path, env=clean_env(), timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: elmo-app")
