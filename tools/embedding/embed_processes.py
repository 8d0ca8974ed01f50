"""The processes of one `elmo-embed` run under `torchrun` or `accelerate launch`: where this one stands among them,
and the few small objects they exchange (the windows done, an error, the counts). `embed.py` deals the windows out."""

from __future__ import annotations

import datetime
import os

import torch.distributed as dist

from .embed_io import EmbedError


class Processes:
    """This process's place among those a launcher started (`torchrun` and `accelerate launch` set `WORLD_SIZE`,
    `RANK` and `LOCAL_RANK`); one process without a launcher. The processes exchange only small Python objects
    (the windows done, an error, the counts), so gloo serves on GPU nodes too. On a CPU machine, use
    `accelerate launch --multi_gpu --num_processes N` (`--cpu` starts one process; docs/transformers_traps.md,
    "Accelerate on CPU")."""

    def __init__(self, timeout_s: float):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.timeout_s = timeout_s
        self._group_owned = False

    def start(self) -> None:
        if self.world > 1 and not dist.is_initialized():
            timeout = datetime.timedelta(seconds=self.timeout_s)
            # torchrun --max_restarts starts the processes again on the store of the first attempt, where the
            # addresses of the processes that died are still written: each attempt keys its own.
            store, _, _ = next(dist.rendezvous("env://", self.rank, self.world, timeout=timeout))
            attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
            dist.init_process_group("gloo", store=dist.PrefixStore(f"elmo-embed/attempt-{attempt}", store),
                                    rank=self.rank, world_size=self.world, timeout=timeout)
            self._group_owned = True

    def stop(self) -> None:
        """Destroy the process group (ours only) once no collective is pending, not at interpreter exit, where
        a gloo thread still running can hang the exit."""
        if self._group_owned and dist.is_initialized():
            dist.destroy_process_group()
        self._group_owned = False

    def from_first(self, task):
        """`task()` run by process 0 only, its result sent to every process; an EmbedError it raises is raised by
        every process (all exit 2 with the same message)."""
        if self.world == 1:
            return task()

        message: list = [None]
        if self.rank == 0:
            try:
                message = [("result", task())]
            except EmbedError as error:
                message = [("error", str(error))]
        dist.broadcast_object_list(message, src=0)
        kind, value = message[0]
        if kind == "error":
            raise EmbedError(value)
        return value

    def gather(self, value) -> list:
        """Every process's `value`, in rank order; also the barrier after which all chunks are complete."""
        if self.world == 1:
            return [value]

        gathered: list = [None] * self.world
        dist.all_gather_object(gathered, value)
        return gathered
