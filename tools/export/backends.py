"""Where the biLM runs: PyTorch (the model itself), ONNX Runtime or OpenVINO (its ONNX graph, `onnx_export.py`).

The backends, their dtypes, packages, devices and runners are rows of one table, `core/backend_registry.py`; this
module checks a row can run here (`unavailable_reason`) and builds its runner (`runner_for`). The runtimes' runners
are those of the torch-free `onnx_standalone.py`, imported from there.

A runtime backend takes the model's exported float32 graph (made once per weights: `onnx_export.cached_export`) and
runs it in the runtime's own kernels:

| backend | float32 | bfloat16 | int8 |
|---|---|---|---|
| torch | the model | autocast | `quantize_int8` (fbgemm, per-row activation scales) |
| onnxruntime | the graph | (no bfloat16 kernels on the CPU: refused) | `quantize_dynamic` of the graph (int8 weights,
  one activation scale per multiply and call) |
| openvino | the graph, `INFERENCE_PRECISION_HINT` f32 | the graph, hint bf16 (CPUs with bfloat16 instructions) |
  ONNX Runtime's int8 graph |

OpenVINO computes in bfloat16 by default on CPUs that have bfloat16 instructions: float32 is asked for explicitly.
ONNX Runtime's int8 quantizes the activations of each multiply with one scale for the whole batch, so a sentence's
vectors move slightly with its batch (measured in benchmarks/results_backends.md); torch's int8 does not.

`GraphRunner.run(input_ids, attention_mask)` (numpy int64) gives `hidden_states` (B, L + 1, T, 2P) float32, the
graph's output (`TorchRunner.run` the same from the model); `GraphEmbedder` is `embed.Embedder` on a runner. Neither
needs torch to run: a deployment with the graph, the tokenizer's files and `onnxruntime` or `openvino`
(docs/deployment.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from ..core.backend_registry import BACKEND_NAMES, backend_row
from ..core.errors import InputError, RunFailed
from .onnx_standalone import GraphRunner, OnnxRuntimeRunner, OpenVinoRunner  # noqa: F401  (the runners live there)

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'elmo-hf[onnx]'"


class BackendError(InputError):
    """A backend or dtype that cannot run here (one line, naming what is missing)."""


def missing_packages(name: str) -> list[str]:
    """The packages backend `name` needs that are not installed (its row's `packages`: OpenVINO's int8 and every
    export need onnxruntime too, the quantizer and the check of a new graph)."""
    import importlib.util

    return [package for package in backend_row(name).packages if importlib.util.find_spec(package) is None]


def unavailable_reason(name: str, dtype: str, device_type: str = "cpu") -> str | None:
    """Why backend `name` cannot run `dtype` here (one line), or None. Torch's own dtypes are checked by
    `elmo-embed`, on the device it runs on."""
    if name not in BACKEND_NAMES:
        return f"unknown backend {name!r}: choose one of {', '.join(BACKEND_NAMES)}"
    row = backend_row(name)
    if dtype not in row.dtypes:
        return f"--backend {name} has no {dtype}: it runs {', '.join(row.dtypes)}"
    if not row.graph:
        return None
    if device_type not in row.devices:
        where = " or ".join(device.upper() if device == "cpu" else device for device in row.devices)
        return f"--backend {name} runs on the {where} here, not on {device_type}: add --device cpu"
    missing = missing_packages(name)
    if missing:
        return f"--backend {name} needs {', '.join(missing)}: {INSTALL_HINT}"
    if name == "openvino" and dtype == "bfloat16" and "BF16" not in openvino_capabilities():
        return "--backend openvino --dtype bfloat16: this CPU has no bfloat16 instructions (OpenVINO lists no BF16)"
    if name == "openvino" and dtype == "bfloat16" and os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in NO_BF16_ISA:
        return (f"--backend openvino --dtype bfloat16: ONEDNN_MAX_CPU_ISA={os.environ['ONEDNN_MAX_CPU_ISA']} caps the "
                "CPU below its bfloat16 instructions (OpenVINO then returns no vectors): unset it or use float32")
    return None


# oneDNN's instruction-set caps below bfloat16: OpenVINO still lists BF16 under them, and its bfloat16 graph then
# returns empty outputs (seen with ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU with bfloat16, OpenVINO 2026.4).
NO_BF16_ISA = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI"}


def openvino_capabilities() -> list[str]:
    import openvino

    return list(openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


class TorchRunner:
    """The model itself at a dtype, as `elmo-embed` runs it (bfloat16: autocast; int8: `quantize_int8`), on a copy of
    the model for any dtype but float32: each dtype packs its own copies of the weights, and paths measured in turn on
    one model would repack them at every call. On the CPU (what `--backend auto` measures); `run` as a
    `GraphRunner`'s."""

    backend = "torch"

    def __init__(self, model, dtype: str):
        import copy

        from elmo_hf.modeling_elmo.quantization_elmo import quantize_int8

        self.model = model if dtype == "float32" else copy.deepcopy(model)
        self.dtype = dtype
        if dtype == "int8":
            quantize_int8(self.model)

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        import contextlib

        import torch

        autocast = (torch.autocast("cpu", dtype=getattr(torch, self.dtype)) if self.dtype in ("bfloat16", "float16")
                    else contextlib.nullcontext())
        with torch.inference_mode(), autocast:
            out = self.model(torch.from_numpy(np.asarray(input_ids, dtype=np.int64)),
                             attention_mask=torch.from_numpy(np.asarray(attention_mask, dtype=np.int64)),
                             output_hidden_states=True)
            return torch.stack(out.hidden_states, dim=1).float().numpy()


def runner_class(name: str) -> type:
    """The class the row of backend `name` names as its runner ("module:Class", imported now)."""
    import importlib

    module, _, attribute = backend_row(name).runner.partition(":")
    return getattr(importlib.import_module(module), attribute)


def graph_for(model, dtype: str, folder: str | os.PathLike | None = None) -> Path:
    """The graph a runtime backend runs for `dtype`: the float32 export of `model`'s weights (made once), or its int8
    quantization for int8."""
    from .onnx_export import cached_export, quantize_int8_graph

    graph = cached_export(model, folder)
    return quantize_int8_graph(graph) if dtype == "int8" else graph


def runner_for(name: str, dtype: str, model, folder=None, threads: int | None = None):
    """A runner of `model` on backend `name` at `dtype`: the model itself, or its graph (exported once per weights)
    in a runtime; `BackendError` when it cannot run here."""
    reason = unavailable_reason(name, dtype)
    if reason is not None:
        raise BackendError(reason)
    if not backend_row(name).graph:
        return runner_class(name)(model, dtype)
    return runner_class(name)(graph_for(model, dtype, folder), dtype, threads)


def layers_of(hidden_states: np.ndarray, mode: str) -> np.ndarray:
    """(B, L + 1, T, 2P) -> what `elmo-embed`'s mode keeps, as (K, B, T, 2P): every layer, the top or the average."""
    layers = hidden_states.transpose(1, 0, 2, 3)
    if mode == "top":
        return layers[-1:]
    if mode == "average":
        return layers.mean(0, keepdims=True, dtype=np.float32)
    return layers


class GraphEmbedder:
    """`embed.Embedder`'s contract on a `GraphRunner`: word lists -> each row's vectors without `<S>`/`</S>`."""

    def __init__(self, runner: GraphRunner, tokenizer, mode: str, model=None):
        self.runner, self.tokenizer, self.mode = runner, tokenizer, mode
        self.model = model  # read for its config by the window embedder; never run

    def __call__(self, sentences: list[list[str]]) -> list[np.ndarray]:
        encoded = self.tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="np")
        layers = layers_of(self.runner.run(encoded["input_ids"], encoded["attention_mask"]), self.mode)
        expected = tuple(encoded["input_ids"].shape[:2])
        if layers.shape[1:3] != expected:  # a runtime that computed nothing must not pass for vectors
            raise RunFailed(f"--backend {self.runner.backend} --dtype {self.runner.dtype} returned vectors of shape "
                            f"{layers.shape[1:3]} for a batch of {expected}: use another --backend or --dtype")
        results = []
        for row, words in enumerate(sentences):
            array = layers[:, row, 1 : len(words) + 1]  # boundaries removed
            results.append(np.ascontiguousarray(array if self.mode == "all" else array[0], dtype=np.float32))
        return results


def graph_embedder(backend: str, dtype: str, model, tokenizer, mode: str, folder=None) -> GraphEmbedder:
    """`elmo-embed`'s embedder on `backend`, with this process's thread count; `BackendError` (bad input) when the
    backend cannot run here, `RunFailed` when the graph cannot be made (an export that fails its check)."""
    import torch

    from .onnx_export import ExportError

    try:
        runner = runner_for(backend, dtype, model, folder, torch.get_num_threads())
    except ExportError as error:
        raise RunFailed(f"--backend {backend}: {error}") from error
    return GraphEmbedder(runner, tokenizer, mode, model)
