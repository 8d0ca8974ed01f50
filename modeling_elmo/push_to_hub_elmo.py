"""`push_to_hub` of the Elmo models: one commit with the ELMo model card where the project is installed.

The push with the card belongs to the project's tools (`elmo_hf.tools.hub.hub_push.push_folder`), which import the
models; this file, which travels to the Hub as remote code, never names them. It finds the push as a plugin, by the
entry point the installed project declares (group "elmo_hf", name "push_folder" in pyproject.toml). Where only the
remote code exists (a model loaded with `trust_remote_code=True` without the project), there is none, and the push
is transformers' own.

This file imports only the standard library.
"""

from __future__ import annotations

import tempfile
from importlib.metadata import entry_points

PLUGIN_GROUP = "elmo_hf"


def project_push_folder():
    """The project's `push_folder(folder, repo_id, ...)` where the project is installed and importable, else None."""
    for entry in entry_points(group=PLUGIN_GROUP, name="push_folder"):
        try:
            return entry.load()
        except ImportError:  # declared by an installed distribution whose modules cannot be imported here
            return None
    return None


class ElmoPushToHubMixin:
    """Mixed into `ElmoPreTrainedModel` before `PreTrainedModel`, whose `push_to_hub` it falls back to."""

    def push_to_hub(
        self,
        repo_id: str,
        commit_message: str | None = None,
        commit_description: str | None = None,
        private: bool | None = None,
        token: bool | str | None = None,
        revision: str | None = None,
        create_pr: bool = False,
        max_shard_size: int | str | None = "50GB",
        tags: list[str] | None = None,
    ):
        """Upload the model (weights, config.json with `auto_map`, the remote code) to the Hub in one commit, with
        the ELMo model card (`model_card.md` filled from the config) as README.md when the repository has no card
        yet. Arguments and return value (a `CommitInfo`) as `PreTrainedModel.push_to_hub`; a failure raises
        `HubPushError` saying what went wrong and what to do.

        The card and the single-commit push come from the project's `elmo_hf.tools.hub.hub_push`, which never travels
        as remote code: a model loaded as remote code where the project is not installed pushes as any other
        transformers model, with transformers' generic card.
        """
        push_folder = project_push_folder()
        if push_folder is None:
            extra = {} if tags is None else {"tags": tags}  # transformers' own push fails on an explicit tags=None
            return super().push_to_hub(
                repo_id, commit_message=commit_message, commit_description=commit_description, private=private,
                token=token, revision=revision, create_pr=create_pr, max_shard_size=max_shard_size, **extra,
            )
        with tempfile.TemporaryDirectory() as folder:
            self.save_pretrained(folder, max_shard_size=max_shard_size)
            return push_folder(
                folder, repo_id, token=token, private=private, revision=revision, create_pr=create_pr,
                commit_message=commit_message or f"Upload {type(self).__name__}", commit_description=commit_description,
                tags=[*(self.model_tags or []), *(tags or [])],
            )
