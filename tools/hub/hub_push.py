"""Pushing a saved ELMo folder to the Hugging Face Hub: `push_folder(folder, repo_id, ...)` uploads a folder written
by `save_pretrained` (model, tokenizer, remote code, and its model card: `model_card.py`) as one commit, creating the
repository if needed. Used by the pretraining and conversion commands' `--push_to_hub`, and by `model.push_to_hub`
of the Elmo classes (which save the model to a temporary folder first: `push_to_hub_elmo.py` finds `push_folder`
by its entry point, at call time, where the project is installed); `tokenizer.push_to_hub(repo_id)` is transformers'
own.

This module never travels to the Hub as remote code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import filter_repo_objects
from transformers.utils import logging

from elmo_hf.modeling_elmo.remote_code_elmo import module_with_siblings

from .model_card import render_model_card

logger = logging.get_logger(__name__)

# Files never pushed from a model folder: version control, local caches, training state.
DEFAULT_IGNORE_PATTERNS = (
    ".git/*", "*/.git/*", ".cache/*", "*/.cache/*", "__pycache__/*", "*/__pycache__/*", "*.pyc",
    "checkpoint-*/*", "optimizer.pt", "scheduler.pt", "rng_state*.pth", "trainer_state.json", "training_args.bin",
)


class HubPushError(RuntimeError):
    """A push to the Hub failed; the message says why and what to do. The original error is `__cause__`."""


def _remote_code_files(folder: Path) -> list[str]:
    """Check that every module named in an `auto_map` (config.json, tokenizer_config.json) is in the folder, with
    the siblings it imports (`from .x import`): without them the repository would not open with
    `trust_remote_code=True`. Return the .py files needed."""
    needed: set[str] = set()
    for name in ("config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        auto_map = json.loads(path.read_text(encoding="utf-8")).get("auto_map") or {}
        for value in auto_map.values():
            for reference in value if isinstance(value, list) else [value]:
                if not reference or "--" in reference:  # another repository's code: not needed here
                    continue
                module = reference.rsplit(".", 1)[0]
                files = module_with_siblings(module, [folder])
                if files is None:
                    raise FileNotFoundError(
                        f"{folder} names {reference} in an auto_map but does not hold {module}.py or a file it "
                        "imports: "
                        "the repository would not open with trust_remote_code=True. Save the model with the classes "
                        "registered for auto classes (`import elmo_hf.modeling_elmo` does it) so that save_pretrained "
                        "copies "
                        "the code."
                    )
                needed.update(file.name for file in files)
    return sorted(needed)


def _folder_operations(folder: Path, ignore_patterns: Sequence[str] | None) -> list[CommitOperationAdd]:
    paths = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    kept = filter_repo_objects(paths, ignore_patterns=[*DEFAULT_IGNORE_PATTERNS, *(ignore_patterns or [])])
    return [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(folder / p)) for p in kept]


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    token: str | bool | None = None,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str = "Upload ELMo model",
    commit_description: str | None = None,
    exist_ok: bool = True,
    model_card: bool = True,
    ignore_patterns: Sequence[str] | None = None,
    endpoint: str | None = None,
    create_pr: bool = False,
    tags: Sequence[str] | None = None,
):
    """Upload a saved model folder (weights, config.json, remote code, tokenizer files, README.md) to the Hub.

    The repository is created when it does not exist. The upload is one commit: the repository gets all the files
    or none of them, and a push that fails can simply be run again (LFS files already uploaded are not sent again,
    unchanged files are skipped). The folder is only read: when it has no README.md and the repository has none
    yet, the default model card (`render_model_card` from its config.json) is added to the commit, not written
    into the folder; a card already in the repository is kept.

    Args:
        folder: a folder written by `save_pretrained` (model and/or tokenizer).
        repo_id (`str`): "org/name" (or "name", in the token owner's namespace).
        token (`str`, *optional*): a write token; defaults to `HF_TOKEN` or the token saved by `hf auth login`.
        private (`bool`, *optional*): visibility of a repository created here (ignored when it exists).
        revision (`str`, *optional*): branch to commit to, created from main when absent (default: main).
        commit_message, commit_description (`str`): of the commit.
        exist_ok (`bool`): push to an existing repository (default); False raises if it exists.
        model_card (`bool`): push the default model card as README.md when neither the folder nor the repository
            has one (write your own with `write_model_card` to give training facts and results).
        ignore_patterns (`list[str]`, *optional*): more glob patterns of files to leave out (training state,
            `.git`, caches and `checkpoint-*` folders are always left out).
        endpoint (`str`, *optional*): the Hub's URL; defaults to `HF_ENDPOINT` or https://huggingface.co.
        create_pr (`bool`): open a pull request with the files instead of committing to the branch.
        tags (`list[str]`, *optional*): tags for the metadata of a default model card.

    Returns:
        `huggingface_hub.CommitInfo`: `commit_url`, `oid` (the commit id: pin it with `revision=` when loading),
        `repo_url`.

    Raises:
        FileNotFoundError: the folder does not exist, is empty, or lacks a remote-code file its auto_map names.
        HubPushError: the Hub refused or could not be reached (authentication, existing repository, network);
            the message says what to do, the original error is its `__cause__`.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot push {folder}: no such folder")
    code = _remote_code_files(folder)
    if (folder / "config.json").is_file() and not code:
        logger.warning("%s/config.json has no auto_map: the repository will only open where this project is installed",
                       folder)
    # A pretraining folder also holds its run (elmo-pretrain's checkpoints/ with optimizer and RNG state, its
    # logs): the Hub gets the model, tokenizer, card and code only.
    run_state = ("checkpoints/*", "logs/*", "runs/*", "train_log.jsonl")
    operations = _folder_operations(folder, [*run_state, *(ignore_patterns or [])])
    if not operations:
        raise FileNotFoundError(f"cannot push {folder}: it holds no files to upload")

    api = HfApi(endpoint=endpoint, token=token)
    where = f"{repo_id} on {api.endpoint}"
    stage = "creating the repository"
    try:
        repo_id = api.create_repo(repo_id, private=private, exist_ok=exist_ok, repo_type="model").repo_id
        if revision is not None and revision != "main":
            stage = f"creating the branch {revision!r}"
            api.create_branch(repo_id, branch=revision, exist_ok=True)
    except Exception as err:
        raise HubPushError(_explain(err, stage, where)) from err

    if model_card and (folder / "config.json").is_file() and not (folder / "README.md").exists():
        try:
            stage = "looking for the repository's model card"
            has_card = api.file_exists(repo_id, "README.md", revision=revision)
        except Exception as err:
            raise HubPushError(_explain(err, stage, where)) from err
        try:
            card = None if has_card else render_model_card(folder, model_id=repo_id, tags=tags)
        except Exception as err:  # a card is not worth failing the push for
            logger.warning("Pushing %s without a model card: it could not be rendered (%s)", folder, err)
        else:
            if card is not None:
                operations.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")))

    stage = "uploading"
    try:
        info = api.create_commit(
            repo_id,
            operations=operations,
            commit_message=commit_message,
            commit_description=commit_description,
            revision=revision,
            create_pr=create_pr,
        )
    except Exception as err:  # HTTP errors, and the network errors of the HTTP client that huggingface_hub lets through
        raise HubPushError(_explain(err, stage, where)) from err
    logger.info("Pushed %s to %s: %s (%d files)", folder, where, info.commit_url, len(operations))
    return info


def _explain(err: Exception, stage: str, where: str) -> str:
    status = None
    if isinstance(err, HfHubHTTPError) and err.response is not None:
        status = err.response.status_code
    if status in (401, 403):
        return (
            f"authentication failed while {stage} ({where}, HTTP {status}): the token is missing, invalid, or has no "
            "write access to this namespace. Pass token=, set HF_TOKEN, or run `hf auth login` with a write token."
        )
    if status == 409 and stage == "creating the repository":
        return f"the repository {where} already exists; push with exist_ok=True to add a commit to it"
    return _failure(stage, where, err)


def _failure(stage: str, where: str, err: Exception) -> str:
    detail = str(err).strip().splitlines()
    detail = " ".join(line.strip() for line in detail if line.strip())[:500].rstrip(".") or type(err).__name__
    return (
        f"push to {where} failed while {stage}: {type(err).__name__}: {detail}. "
        "A push is a single commit, so the repository keeps either all of the new files or none of them; "
        "the local folder is unchanged. Run the same push again to retry."
    )


__all__ = ["DEFAULT_IGNORE_PATTERNS", "HubPushError", "push_folder"]
