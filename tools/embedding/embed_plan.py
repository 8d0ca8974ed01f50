"""`elmo-embed`'s options checked (`check_options`) and, once the model is loaded, resolved into the run's `EmbedPlan`,
which every later step reads: the options themselves are never changed (a caller's `EmbedOptions` reads the same after
the run)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from elmo_hf.tokenization import check_word_split

from ..core.command_options import EmbedOptions
from .embed_io import EmbedError


@dataclass(frozen=True)
class EmbedPlan:
    """What a run embeds with, resolved once by `_run` from the options, which stay as the caller gave them: the
    output format (`--format`, else OUTPUT's suffix), the word split (`--word_split`, else the tokenizer's), the
    backend and dtype (`backend_choice.resolve`: auto measured, the default chosen). Every step after the model is
    loaded reads the plan; any other option reads through to `options`."""

    options: EmbedOptions
    format: str
    word_split: str
    backend: str
    dtype: str

    def __getattr__(self, name: str):  # only for names that are not fields: the options as given
        if name.startswith("__") or name == "options":  # copy and pickle probe before `options` is set
            raise AttributeError(name)
        return getattr(self.options, name)

    def as_dict(self) -> dict:
        """Every option with the resolved values, flat (what Ray's actors rebuild their arguments from)."""
        resolved = {"format": self.format, "word_split": self.word_split, "backend": self.backend, "dtype": self.dtype}
        return {**vars(self.options), **resolved}


def check_options(args: EmbedOptions) -> None:
    """What `elmo-embed` refuses in its options alone (`EmbedError`, one line), before anything is opened or loaded."""
    if args.word_split is not None:
        try:  # registered (an import path is imported), and its package (jieba ...) installed
            check_word_split(args.word_split, "--word_split", allow_import=True)
        except ValueError as error:
            raise EmbedError(str(error)) from error
    for name in ("batch_size", "batch_tokens", "window", "max_tokens", "max_line_chars", "dist_timeout", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise EmbedError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if not args.commit_seconds > 0:
        raise EmbedError(f"--commit_seconds must be a positive number of seconds, got {args.commit_seconds}")
    if args.max_lines is not None and args.max_lines < 0:
        raise EmbedError(f"--max_lines must be >= 0, got {args.max_lines}")
    if args.token_cache_size < 0:
        raise EmbedError(f"--token_cache_size must be >= 0, got {args.token_cache_size}")
    if args.batch_tokens < args.max_tokens + 2:
        raise EmbedError(
            f"--batch_tokens ({args.batch_tokens}) must hold one piece of --max_tokens ({args.max_tokens}) words "
            "plus <S> and </S>"
        )
    if args.overwrite and args.resume:
        raise EmbedError("--overwrite and --resume contradict each other: choose one")
    if args.num_workers < 1:
        raise EmbedError(f"--num_workers must be a positive integer, got {args.num_workers}")
    if args.engine == "ray":
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise EmbedError("--engine ray runs from one process: start it without torchrun / accelerate launch")
        try:
            import ray  # noqa: F401
        except ImportError:
            raise EmbedError("--engine ray needs Ray: pip install 'elmo-hf[ray]'") from None
    elif args.ray_address is not None or args.num_workers != 1:
        option = "--ray_address" if args.ray_address is not None else "--num_workers"
        raise EmbedError(f"{option} is an option of --engine ray: add --engine ray (or leave {option} out)")
