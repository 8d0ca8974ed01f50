"""Every backend that can compute ELMo's vectors, in one table: the only place that lists them.

Read by the command line (`elmo-embed --backend`'s choices, `elmo-app --backend`'s), by the automatic choice
(`backend_choice`: the rows marked `automatic`), by `backends.runner_for` (a row's `runner`), by `elmo-embed` (a row
that runs the model itself gets torch's dtypes, int8 quantization and the token cache; a `graph` row runs the exported
graph) and by the torch-free `onnx_standalone.py` (the rows marked `standalone`, tested against its runners).
Standard library only, and the runner is named as "module:Class", so that the options are parsed from this table
before torch, numpy or a runtime is imported (tests/test_layout.py: no other module lists backend names).
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"  # --backend auto: the fastest row marked `automatic`, measured once on this CPU (backend_choice.py)
DEFAULT = "torch"  # what runs without --backend (unless a remembered measurement found a float32 backend faster)


@dataclass(frozen=True)
class Backend:
    """One backend. `runner` ("module:Class") runs a batch, `run(input_ids, attention_mask) -> hidden_states`
    (numpy, (B, L + 1, T, 2P) float32): built from the model and a dtype (`Class(model, dtype)`), or, for a `graph`
    row, from the exported graph (`Class(graph, dtype, threads)`)."""

    name: str
    dtypes: tuple[str, ...]  # what --dtype it offers
    packages: tuple[str, ...]  # what it imports (module names), the runtime itself first
    devices: tuple[str, ...]  # the device types it runs on
    runner: str
    graph: bool  # runs the model's ONNX graph (float32, exported once per weights), not the model
    app: bool  # offered by elmo-app --backend (float32)
    automatic: bool  # among the paths --backend auto measures
    # The dtypes `auto` may choose on this row: those that keep a sentence's vectors independent of the other sentences
    # of its batch (to float32's reordering, tests/test_batch_invariance.py). The others are offered by name only:
    # bfloat16 rounds every multiply's output to 8 bits, and which way a value rounds follows the float32 sum under it,
    # whose order the kernels pick by the batch's shape (torch's autocast: 0.0078 between a sentence alone and in its
    # batch); the runtimes' int8 graph quantizes each multiply's activations with one scale for the whole batch (0.094).
    # OpenVINO's bfloat16 kept the same bits on one AVX-512 CPU (benchmarks/results_backends.md), but nothing holds its
    # kernels to that on another. torch's int8 scales each row by itself and sums in integers: the same bits alone or
    # batched, on every CPU.
    automatic_dtypes: tuple[str, ...]
    standalone: bool  # runs in onnx_standalone.py, without torch


BACKENDS = (
    Backend("torch", dtypes=("float32", "bfloat16", "float16", "int8"), packages=("torch",),
            devices=("cpu", "cuda", "mps", "xpu"), runner="elmo_hf.tools.export.backends:TorchRunner", graph=False,
            app=True, automatic=True, automatic_dtypes=("float32", "int8"), standalone=False),
    Backend("onnxruntime", dtypes=("float32", "int8"), packages=("onnxruntime", "onnx"), devices=("cpu",),
            runner="elmo_hf.tools.export.onnx_standalone:OnnxRuntimeRunner", graph=True, app=True, automatic=True,
            automatic_dtypes=("float32",), standalone=True),
    # OpenVINO's int8 is ONNX Runtime's quantized graph: its quantizer is onnxruntime's.
    Backend("openvino", dtypes=("float32", "bfloat16", "int8"), packages=("openvino", "onnx", "onnxruntime"),
            devices=("cpu",), runner="elmo_hf.tools.export.onnx_standalone:OpenVinoRunner", graph=True, app=True,
            automatic=True, automatic_dtypes=("float32",), standalone=True),
)
BACKEND_NAMES = tuple(row.name for row in BACKENDS)
EMBED_BACKENDS = (*BACKEND_NAMES, AUTO)  # elmo-embed --backend
APP_BACKENDS = tuple(row.name for row in BACKENDS if row.app)  # elmo-app --backend
AUTOMATIC_BACKENDS = tuple(row.name for row in BACKENDS if row.automatic)


def backend_row(name: str) -> Backend:
    """The row of `name` (`KeyError` for a name that is not one: the command line's choices refuse those first)."""
    for row in BACKENDS:
        if row.name == name:
            return row
    raise KeyError(f"unknown backend {name!r}: choose one of {', '.join(BACKEND_NAMES)}")
