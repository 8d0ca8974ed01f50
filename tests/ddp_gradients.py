"""One training step of a tiny ElmoForPreTraining through Accelerate's DDP, each process on half the batch, and the
same step in one process on the whole batch: run under torchrun by tests (test_lstm_graph.py on the CPU,
test_cuda.py with both processes on one GPU).

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/ddp_gradients.py DEVICE OUT.pt

DEVICE is "cpu" or "cuda". The processes talk through gloo on either: NCCL refuses two processes on one GPU, and gloo
reduces CUDA tensors too; on CUDA each process's LOCAL_RANK is taken modulo the GPUs, since Accelerate uses it as the
index of the process's GPU (two processes on one GPU would otherwise ask for a second). Process 0 saves both losses and
both sets of gradients to OUT.pt for the test to compare.
"""

from __future__ import annotations

import datetime
import gc
import os
import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import random_char_ids  # noqa: E402

from elmo_hf.modeling_elmo import ElmoConfig, ElmoForPreTraining  # noqa: E402

# Both halves hold the same number of real tokens, so the mean of the two processes' mean losses (what DDP's averaged
# gradients differentiate) is the whole batch's mean loss.
LENGTHS = [7, 5, 7, 5]


def model_and_batch(device: torch.device):
    torch.manual_seed(0)
    model = ElmoForPreTraining(ElmoConfig.from_preset("tiny", vocab_size=30, dropout=0.0)).to(device)
    ids = random_char_ids(LENGTHS, seed=1)
    labels = torch.randint(0, 30, (len(LENGTHS), max(LENGTHS)), generator=torch.Generator().manual_seed(2))
    labels[ids.abs().sum(-1) == 0] = -100
    return model, ids.to(device), labels.to(device)


def main(device_name: str, out: str) -> None:
    if device_name == "cuda":
        # as elmo_hf.train.pretrain_run does where processes outnumber GPUs: Accelerate takes LOCAL_RANK for the index
        # of the process's GPU (its device, DDP's device_ids, its barriers)
        os.environ["LOCAL_RANK"] = str(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    handlers = [InitProcessGroupKwargs(backend="gloo", timeout=datetime.timedelta(seconds=120))]
    accelerator = Accelerator(cpu=device_name == "cpu", kwargs_handlers=handlers)
    device = accelerator.device
    assert device.type == device_name, (device, device_name)
    model, ids, labels = model_and_batch(device)
    ddp = accelerator.prepare(model)
    half = len(LENGTHS) // accelerator.num_processes
    rows = slice(accelerator.process_index * half, (accelerator.process_index + 1) * half)
    loss = ddp(ids[rows], labels=labels[rows]).loss
    accelerator.backward(loss)
    losses = accelerator.gather(loss.detach().reshape(1))
    if accelerator.is_main_process:
        single, ids, labels = model_and_batch(device)
        whole = single(ids, labels=labels).loss
        whole.backward()
        torch.save({
            "processes": accelerator.num_processes,
            "backend": torch.distributed.get_backend(),
            "device": str(device),
            "ddp_loss": losses.mean().cpu(),
            "single_loss": whole.detach().cpu(),
            "ddp": {n: p.grad.cpu() for n, p in accelerator.unwrap_model(ddp).named_parameters() if p.grad is not None},
            "single": {n: p.grad.cpu() for n, p in single.named_parameters() if p.grad is not None},
        }, out)
    accelerator.wait_for_everyone()
    # The DDP wrapper first, while the process group is registered, then the group: as elmo_hf.train.pretrain_run's
    # tear_down, and for its reason (the wrapper's reducer, freed last, destroys the group holding the GIL while a gloo
    # thread freeing the tensors of the last collective waits for it: a hang seen here once, rank 1 at exit).
    del ddp, loss, losses
    gc.collect()
    accelerator.end_training()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
