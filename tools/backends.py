"""Where the biLM runs: PyTorch (the model itself), ONNX Runtime or OpenVINO (its ONNX graph, `onnx_export.py`).

A runtime backend takes the model's exported float32 graph (made once per weights: `onnx_export.cached_export`) and
runs it in the runtime's own kernels:

| backend | float32 | bfloat16 | int8 |
|---|---|---|---|
| torch | the model | autocast | `quantize_int8` (fbgemm, per-row activation scales) |
| onnxruntime | the graph | (no bfloat16 kernels on the CPU: refused) | `quantize_dynamic` of the graph (int8 weights, one activation scale per multiply and call) |
| openvino | the graph, `INFERENCE_PRECISION_HINT` f32 | the graph, hint bf16 (CPUs with bfloat16 instructions) | ONNX Runtime's int8 graph |

OpenVINO computes in bfloat16 by default on CPUs that have bfloat16 instructions: float32 is asked for explicitly.
ONNX Runtime's int8 quantizes the activations of each multiply with one scale for the whole batch, so a sentence's
vectors move slightly with its batch (measured in benchmarks/results_backends.md); torch's int8 does not.

`GraphRunner.run(input_ids, attention_mask)` (numpy int64) gives `hidden_states` (B, L + 1, T, 2P) float32, the
graph's output; `GraphEmbedder` is `embed.Embedder` on a runner. Neither needs torch to run: a deployment with the
graph, the tokenizer's files and `onnxruntime` or `openvino` (docs/deployment.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from .core.errors import InputError, RunFailed

logger = logging.getLogger(__name__)

BACKENDS = ("torch", "onnxruntime", "openvino")
BACKEND_DTYPES = {
    "torch": ("float32", "bfloat16", "float16", "int8"),
    "onnxruntime": ("float32", "int8"),
    "openvino": ("float32", "bfloat16", "int8"),
}
PACKAGES = {"onnxruntime": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx", "onnxruntime")}
INSTALL_HINT = "pip install 'elmo-hf[onnx]'"


class BackendError(InputError):
    """A backend or dtype that cannot run here (one line, naming what is missing)."""


def missing_packages(backend: str) -> list[str]:
    """The packages `backend` needs that are not installed. OpenVINO's int8 and every export need onnxruntime too
    (the quantizer; the check of a new graph)."""
    import importlib.util

    return [name for name in PACKAGES.get(backend, ()) if importlib.util.find_spec(name) is None]


def unavailable_reason(backend: str, dtype: str, device_type: str = "cpu") -> str | None:
    """Why `backend` cannot run `dtype` here (one line), or None. Torch's own dtypes are checked by `elmo-embed`."""
    if backend not in BACKENDS:
        return f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}"
    if dtype not in BACKEND_DTYPES[backend]:
        return (f"--backend {backend} has no {dtype}: it runs {', '.join(BACKEND_DTYPES[backend])}")
    if backend == "torch":
        return None
    if device_type != "cpu":
        return f"--backend {backend} runs on the CPU here, not on {device_type}: add --device cpu"
    missing = missing_packages(backend)
    if missing:
        return f"--backend {backend} needs {', '.join(missing)}: {INSTALL_HINT}"
    if backend == "openvino" and dtype == "bfloat16" and "BF16" not in openvino_capabilities():
        return "--backend openvino --dtype bfloat16: this CPU has no bfloat16 instructions (OpenVINO lists no BF16)"
    if backend == "openvino" and dtype == "bfloat16" and os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in NO_BF16_ISA:
        return (f"--backend openvino --dtype bfloat16: ONEDNN_MAX_CPU_ISA={os.environ['ONEDNN_MAX_CPU_ISA']} caps the "
                "CPU below its bfloat16 instructions (OpenVINO then returns no vectors): unset it or use float32")
    return None


# oneDNN's instruction-set caps below bfloat16: OpenVINO still lists BF16 under them, and its bfloat16 graph then
# returns empty outputs (seen with ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU with bfloat16, OpenVINO 2026.4).
NO_BF16_ISA = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI"}


def openvino_capabilities() -> list[str]:
    import openvino

    return list(openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


class GraphRunner:
    """An ONNX graph of the biLM in one runtime: `run(input_ids, attention_mask) -> hidden_states` (numpy)."""

    backend = ""

    def __init__(self, graph: Path, dtype: str, threads: int | None):
        self.graph, self.dtype, self.threads = Path(graph), dtype, threads

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.graph}, {self.dtype})"


class OnnxRuntimeRunner(GraphRunner):
    backend = "onnxruntime"

    def __init__(self, graph: Path, dtype: str, threads: int | None):
        super().__init__(graph, dtype, threads)
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3  # its warnings about unused initializers and shapes are not the user's
        self.session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": np.asarray(input_ids, dtype=np.int64),
                 "attention_mask": np.asarray(attention_mask, dtype=np.int64)}
        return self.session.run(["hidden_states"], feeds)[0]


class OpenVinoRunner(GraphRunner):
    backend = "openvino"

    def __init__(self, graph: Path, dtype: str, threads: int | None):
        super().__init__(graph, dtype, threads)
        import openvino

        core = openvino.Core()
        config = {"INFERENCE_PRECISION_HINT": "bf16" if dtype == "bfloat16" else "f32",  # bf16 is its CPU default
                  "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self.compiled = core.compile_model(str(graph), "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.output = self.compiled.output("hidden_states")

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": np.asarray(input_ids, dtype=np.int64),
                 "attention_mask": np.asarray(attention_mask, dtype=np.int64)}
        return self.request.infer(feeds)[self.output].copy()  # the request reuses its buffers


RUNNERS = {"onnxruntime": OnnxRuntimeRunner, "openvino": OpenVinoRunner}


def graph_for(model, dtype: str, folder: str | os.PathLike | None = None) -> Path:
    """The graph a runtime backend runs for `dtype`: the float32 export of `model`'s weights (made once), or its int8
    quantization for int8."""
    from .onnx_export import cached_export, quantize_int8_graph

    graph = cached_export(model, folder)
    return quantize_int8_graph(graph) if dtype == "int8" else graph


def runner_for(backend: str, dtype: str, model, folder=None, threads: int | None = None) -> GraphRunner:
    """A runner of `model`'s graph in `backend` at `dtype` (`BackendError` when it cannot run here)."""
    reason = unavailable_reason(backend, dtype)
    if reason is not None:
        raise BackendError(reason)
    return RUNNERS[backend](graph_for(model, dtype, folder), dtype, threads)


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
        raise RunFailed(f"--backend {backend}: {error}") from None
    return GraphEmbedder(runner, tokenizer, mode, model)
