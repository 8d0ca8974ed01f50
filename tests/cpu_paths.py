"""Every CPU path of the model on one batch, for `test_cpu_branches.py`: run here, and as a script in a fresh
interpreter whose kernels are capped to an older instruction set.

`python tests/cpu_paths.py OUT.pt` writes `results()` to OUT.pt: per model variant, every layer's vectors from the
reference and the fast paths (float32, the token cache, bfloat16 autocast, int8) and the loss and gradients of a
training step, with which kernels torch chose here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import random_char_ids  # noqa: E402

from elmo_hf.modeling_elmo import ElmoConfig, ElmoForPreTraining, ElmoModel, matmul_elmo, quantization_elmo  # noqa: E402

VARIANTS = {"clipped": {}, "unclipped": {"cell_clip": None, "proj_clip": None}}
LENGTHS = [7, 3, 9, 1, 5]


def model_for(model_class, **overrides):
    """The tiny preset with seeded weights three times the initialisation, so that gates saturate and clipping
    happens (as in test_fast_paths)."""
    torch.manual_seed(0)
    model = model_class(ElmoConfig.from_preset("tiny", vocab_size=30, dropout=0.0, **overrides))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "bilm" in name:
                parameter.mul_(3.0)
    return model


def layers(model, ids: torch.Tensor, implementation: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Every layer's vectors at the real positions, as float32: (L + 1, tokens, 2P)."""
    model.config.lstm_implementation = implementation
    mask = (ids != 0).any(-1)
    autocast = torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32)
    with torch.no_grad(), autocast:
        out = model(ids, attention_mask=mask.long(), output_hidden_states=True)
    return torch.stack([h.float() for h in out.hidden_states])[:, mask]


def inference(overrides: dict, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    model = model_for(ElmoModel, **overrides).eval()
    out = {
        "reference": layers(model, ids, "reference"),
        "fast": layers(model, ids, "auto"),
        "bfloat16": layers(model, ids, "auto", torch.bfloat16),
    }
    model.enable_token_cache()
    out["token_cache"] = layers(model, ids, "auto")
    model.disable_token_cache()
    if quantization_elmo.int8_unavailable_reason() is None:
        model.quantize_int8()
        out["int8"] = layers(model, ids, "int8")
    return out


def training_step(overrides: dict, ids: torch.Tensor, implementation: str) -> dict[str, torch.Tensor]:
    """The biLM loss and every gradient of one step."""
    model = model_for(ElmoForPreTraining, lstm_implementation=implementation, **overrides).train()
    labels = torch.randint(0, 30, ids.shape[:2], generator=torch.Generator().manual_seed(2))
    labels[ids.abs().sum(-1) == 0] = -100
    loss = model(ids, labels=labels).loss
    loss.backward()
    return {"loss": loss.detach(), **{f"grad.{n}": p.grad for n, p in model.named_parameters() if p.grad is not None}}


def below_avx512() -> bool:
    """Whether this process is capped below AVX-512 (`ATEN_CPU_CAPABILITY`, set by test_cpu_branches)."""
    return os.environ.get("ATEN_CPU_CAPABILITY", "").lower() in ("default", "avx2")


def results() -> dict:
    """Every path's results on one thread (the same reduction order in every process); the thread count and the
    probe's choices are put back as they were (the pytest process goes on with other tests)."""
    threads, probed = torch.get_num_threads(), dict(matmul_elmo._ONEDNN)
    torch.set_num_threads(1)
    try:
        if below_avx512():
            # torch allows oneDNN's bfloat16 packing from the CPU's own flags (AVX-512 or AVX-NE-CONVERT), which no
            # variable caps: below AVX-512, bfloat16 takes the plain torch path, as the probe decides on such a CPU.
            matmul_elmo._ONEDNN[torch.bfloat16] = False
        return _results_here()
    finally:
        torch.set_num_threads(threads)
        matmul_elmo._ONEDNN.clear()
        matmul_elmo._ONEDNN.update(probed)


def _results_here() -> dict:
    ids = random_char_ids(LENGTHS, seed=3)
    out: dict = {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "onednn": {str(dtype): matmul_elmo.use_onednn(torch.device("cpu"), dtype)
                   for dtype in (torch.float32, torch.bfloat16)},
    }
    for name, overrides in VARIANTS.items():
        out[name] = inference(overrides, ids)
        out[f"{name}.train.reference"] = training_step(overrides, ids, "reference")
        out[f"{name}.train.fast"] = training_step(overrides, ids, "auto")
    return out


if __name__ == "__main__":
    torch.save(results(), sys.argv[1])
