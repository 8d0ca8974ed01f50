"""The ONNX graph of a saved ELMo: written once, checked at several lengths, kept beside the model or in a cache.

`export_onnx(model, path)` writes the graph of `export_module.ExportableElmo` with `torch.onnx.export(dynamo=True)`:

- inputs `input_ids` int64 (batch, length, token_row_width) and `attention_mask` int64 (batch, length), right-padded,
  both axes dynamic;
- outputs `hidden_states` float32 (batch, L + 1, length, 2P): layer 0 then every biLSTM layer, zeros at padding;
  and `mixed` (batch, length, 2P) when a scalar mix is given (a task head's first mix);
- the recurrence as an ONNX `Scan` per layer (both directions in one), with both clips; opset `OPSET`.

The exporter traces with one example shape; an exporter that baked that length (or batch) into the graph would give
a graph wrong at every other length. `check_graph` therefore runs the written graph in ONNX Runtime at lengths and
batches other than the example's, with padding, against the PyTorch model, and a graph that differs is removed.

The graph records in its metadata (`metadata_props`) what it was made from and with: the weights' fingerprint (as
`elmo-embed --resume` takes it), the configuration's digest, the opset, the torch and ONNX Runtime versions, the
outputs. `cached_export(model)` finds a graph made from these very weights (beside a model folder,
`FOLDER/onnx/model.onnx`, or in the cache, `$ELMO_HF_CACHE/onnx/<fingerprint>/model.onnx`) or makes one in the cache:
weights that change get a new graph.

ONNX Runtime's int8 (`quantize_int8_graph`): its dynamic quantization of the graph's matrix multiplies
(`onnxruntime.quantization.quantize_dynamic`, int8 weights, activations quantized at run time), cached beside the
float32 graph.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from ..conversion.download import default_cache_dir
from ..loading import weights_fingerprint
from .export_module import ExportableElmo

logger = logging.getLogger(__name__)

OPSET = 18  # ONNX Runtime >= 1.14 and OpenVINO >= 2023.0 run it
GRAPH_NAME = "model.onnx"
INT8_GRAPH_NAME = "model.int8.onnx"
METADATA_PREFIX = "elmo."
# Lengths and batches the written graph is checked at (none of them the example's 7 x 3), with padding.
CHECK_SHAPES = ((1, 1), (2, 2), (3, 9), (2, 33))
EXAMPLE_SHAPE = (3, 7)  # batch, length of the traced example


class ExportError(Exception):
    """A graph that could not be written or that does not compute the model's function (one line)."""


def model_digest(model) -> str:
    """What a graph depends on: the weights' fingerprint and the configuration (sizes, clips, skip connections)."""
    config = hashlib.sha256(model.config.to_json_string(use_diff=False).encode()).hexdigest()[:16]
    return f"{weights_fingerprint(model)}-{config}"


def onnxruntime_version() -> str | None:
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.__version__


def _example(model) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded example batch of EXAMPLE_SHAPE: real tokens of random characters, the last rows shorter."""
    batch, length = EXAMPLE_SHAPE
    return random_batch(model.config, batch, length, seed=0)


def random_batch(config, batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`(input_ids, attention_mask)` int64 of `batch` rows of at most `length` tokens: row 0 full, the others of
    random lengths (padding), tokens of random characters between `<S>`-like boundaries (any valid ids)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    lengths[0] = length
    width = config.token_row_width
    ids = torch.randint(1, config.char_vocab_size, (batch, length, width), generator=generator)
    if config.token_encoder == "word_char" and config.word_input_embedding_dim > 0:
        ids[..., -1] = torch.randint(1, config.word_input_vocab_size, (batch, length), generator=generator)
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    ids[~mask] = 0
    return ids.long(), mask.long()


def exportable(model) -> tuple[torch.nn.Module, list[str], str | None]:
    """The module to export for `model` and its outputs: an `ElmoModel`'s layers; a task head's layers, its first
    scalar mix and its logits, or without the logits when the head cannot be exported (the reason, one line)."""
    from .export_module import ExportableHead, head_unexportable_reason

    if not hasattr(model, "scalar_mixes"):
        return ExportableElmo(model), ["hidden_states"], None
    reason = head_unexportable_reason(model)
    if reason is None:
        return ExportableHead(model), ["hidden_states", "mixed", "logits"], None
    return ExportableElmo(model.elmo, model.scalar_mixes[0]), ["hidden_states", "mixed"], reason


def export_onnx(model, path: str | os.PathLike, check: bool = True) -> Path:
    """Write the ONNX graph of `model` (an `ElmoModel`, or a task head: `exportable`), float32, to `path`; check it
    (`check_graph`) unless `check=False`. Written under a temporary name and renamed when checked: `path` is complete
    or absent."""
    path = Path(path)
    if next(model.parameters()).dtype != torch.float32:
        raise ExportError("the ONNX graph is exported in float32: load the model in float32")
    model = model.cpu().eval()
    module, outputs, reason = exportable(model)
    if reason is not None:
        logger.info("the graph holds the biLM's layers and the head's scalar mix, not its logits: %s", reason)
    input_ids, attention_mask = _example(model)
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    dynamic = {"input_ids": {0: batch, 1: length}, "attention_mask": {0: batch, 1: length}}
    made = _folders_to_make(path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, done = Path(tempfile.mkdtemp(prefix=".export-", dir=path.parent)), False
    try:
        graph = tmp / path.name
        with _quiet_exporter(), torch.no_grad():
            program = torch.onnx.export(module, (input_ids, attention_mask), dynamo=True, opset_version=OPSET,
                                        input_names=["input_ids", "attention_mask"], output_names=outputs,
                                        dynamic_shapes=dynamic, verbose=False, external_data=False)
        proto = program.model_proto  # a fresh serialisation at each access: take it once
        _drop_initializer_shapes(proto)
        _set_metadata(proto, model, outputs)
        _save(proto, graph)
        if check:
            check_graph(graph, model)
        os.replace(graph, path)
        done = True
    finally:  # however it ends (a failed check, Ctrl-C): no partial file, and no folder made for the graph alone
        shutil.rmtree(tmp, ignore_errors=True)
        if not done:
            _remove_empty(made)
    logger.info("wrote the ONNX graph of the model to %s (opset %d)", path, OPSET)
    return path


def _folders_to_make(folder: Path) -> list[Path]:
    """The folders `folder.mkdir(parents=True)` would make, innermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove `folders` (innermost first) while each is empty: an interrupted export left the model folder's onnx/
    behind, empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (another run wrote there meanwhile), or gone: left as it is
            return


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter's progress lines (stdout), its notes (warnings) and its passes' INFO logs are not the user's
    business: a command shows one line for the export. torch's tracing also resets some of its own loggers
    (`torch.__trace`): every logger of torch and of the ONNX tools is put back as it was."""
    def ours(name: str) -> bool:
        return name.split(".")[0] in ("torch", "onnxscript", "onnx_ir")

    manager = logging.root.manager
    saved = {name: (item.level, list(item.handlers), item.propagate, item.disabled)
             for name, item in list(manager.loggerDict.items()) if isinstance(item, logging.Logger) and ours(name)}
    root_level = logging.root.level
    quiet = [logging.getLogger(name) for name in ("onnxscript", "onnx_ir", "torch.onnx", "torch._dynamo",
                                                   "torch.export", "torch._export")]
    try:
        for each in quiet:
            each.setLevel(logging.ERROR)
        # ONNX Runtime's quantizer logs to the root logger, warnings included ("consider pre-processing")
        logging.root.setLevel(max(root_level, logging.ERROR))
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.root.setLevel(root_level)
        for name, item in list(manager.loggerDict.items()):
            if isinstance(item, logging.Logger) and ours(name):
                level, handlers, propagate, disabled = saved.get(name, (logging.NOTSET, [], True, False))
                if name not in saved and name not in {each.name for each in quiet}:
                    continue  # a logger the export created: its library's own set-up
                item.setLevel(level)
                item.handlers[:] = handlers
                item.propagate, item.disabled = propagate, disabled


def _drop_initializer_shapes(proto) -> None:
    """The exporter also lists the weights' shapes as `value_info`; ONNX Runtime's quantizer transposes some weights
    and then finds those entries contradict them. The weights carry their shapes: drop the entries."""
    weights = {initializer.name for initializer in proto.graph.initializer}
    kept = [entry for entry in proto.graph.value_info if entry.name not in weights]
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(kept)


def _save(proto, path: Path) -> None:
    import onnx

    onnx.save_model(proto, str(path))


def _set_metadata(proto, model, outputs: list[str]) -> None:
    config = model.config
    entries = {
        "digest": model_digest(model),
        "opset": str(OPSET),
        "torch_version": torch.__version__,
        "onnxruntime_version": onnxruntime_version() or "",
        "outputs": ",".join(outputs),
        "num_layers": str(config.num_layers),
        "hidden_size": str(config.hidden_size),
        "token_row_width": str(config.token_row_width),
    }
    del proto.metadata_props[:]
    for key, value in entries.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = METADATA_PREFIX + key, value


def graph_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The `elmo.*` metadata of a graph written by `export_onnx` (empty for any other graph), without its weights."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    return {entry.key[len(METADATA_PREFIX):]: entry.value for entry in proto.metadata_props
            if entry.key.startswith(METADATA_PREFIX)}


def reference_outputs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, np.ndarray]:
    """What the graph of `model` must give, from the model's own forward passes (float32): the layers of its biLM,
    and for a task head its first mix (`get_elmo_representations`) and its logits."""
    with torch.no_grad():
        bilm = model.elmo if hasattr(model, "scalar_mixes") else model
        out = bilm(input_ids, attention_mask=attention_mask, output_hidden_states=True)
        expected = {"hidden_states": torch.stack(out.hidden_states, dim=1).numpy()}
        if hasattr(model, "scalar_mixes"):
            mixes = model.get_elmo_representations(input_ids, attention_mask)
            expected["mixed"] = mixes.elmo_representations[0].numpy()
            expected["logits"] = model(input_ids, attention_mask=attention_mask).logits.numpy()
    return expected


def check_graph(path: Path, model, shapes=CHECK_SHAPES) -> float:
    """Run the graph in ONNX Runtime at `shapes` (batch, length), padded, against the model's own float32 forward;
    returns the largest difference, `ExportError` above 1e-5 of the largest value (the parity bound)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    worst = 0.0
    for seed, (batch, length) in enumerate(shapes):
        input_ids, attention_mask = random_batch(model.config, batch, length, seed=seed + 1)
        expected = reference_outputs(model, input_ids, attention_mask)
        got = session.run(names, {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
        for name, a in zip(names, got):
            b = expected[name]
            if a.shape != b.shape:
                raise ExportError(f"the exported graph gives {name} of shape {a.shape} at batch {batch}, length "
                                  f"{length}, not {b.shape}: it was traced for one shape only")
            difference = float(np.abs(a - b).max())
            limit = 1e-5 * max(1.0, float(np.abs(b).max()))
            if not difference <= limit:
                raise ExportError(f"the exported graph's {name} differs from the model's by {difference:.3g} at batch "
                                  f"{batch}, length {length} (more than {limit:.3g})")
            worst = max(worst, difference)
    return worst


# --------------------------------------------------------------------------------------------------
# The graph of a model, made once
# --------------------------------------------------------------------------------------------------


def beside_model(folder: str | os.PathLike) -> Path:
    """Where `elmo-export` writes a folder's graph by default, and where the backends look first."""
    return Path(folder) / "onnx" / GRAPH_NAME


def cache_folder(digest: str) -> Path:
    return default_cache_dir() / "onnx" / digest


def cached_export(model, folder: str | os.PathLike | None = None) -> Path:
    """The float32 graph of `model`'s current weights: beside `folder` when one made from them is there, else in
    the cache (made there when absent; a graph of other weights is never used)."""
    digest = model_digest(model)
    candidates = [beside_model(folder)] if folder is not None and Path(folder).is_dir() else []
    candidates.append(cache_folder(digest) / GRAPH_NAME)
    for candidate in candidates:
        if candidate.is_file() and graph_metadata(candidate).get("digest") == digest:
            logger.info("using the ONNX graph %s", candidate)
            return candidate
    target = candidates[-1]
    logger.info("exporting the model to ONNX once (its graph is kept in %s)", target.parent)
    return export_onnx(model, target)


def quantize_int8_graph(graph: Path) -> Path:
    """ONNX Runtime's dynamic int8 quantization of `graph` (its matrix multiplies, subgraphs included: int8 weights,
    activations quantized at run time), written beside it once: `model.int8.onnx`.

    Weights use 7 bits (`reduce_range`): on a CPU without VNNI (AVX2 only, as many AMD and older Intel machines) ONNX
    Runtime multiplies uint8 activations by int8 weights with an instruction whose int16 sums saturate, and full-range
    weights took a sentence's top layer to cosine 0.969 against float32 there (tests/test_onnx_export.py's floor is
    0.99, which 7 bits meet); with VNNI the 7 bits cost a little precision, but one graph then serves every CPU."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = graph.with_name(INT8_GRAPH_NAME)
    stamp = target.with_suffix(".json")
    made_as = {"digest": graph_metadata(graph).get("digest", ""), "reduce_range": True}
    if target.is_file() and stamp.is_file() and json.loads(stamp.read_text()) == made_as:
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with _quiet_exporter():
            quantize_dynamic(str(graph), str(tmp), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gemm"],
                             reduce_range=made_as["reduce_range"], extra_options={"EnableSubgraph": True})
        os.replace(tmp, target)
    finally:  # interrupted or failed: no partial graph beside the model
        tmp.unlink(missing_ok=True)
    stamp.write_text(json.dumps(made_as))
    return target


# --------------------------------------------------------------------------------------------------
# elmo-export
# --------------------------------------------------------------------------------------------------


def _head_task(name: str) -> str | None:
    """The task whose head a saved folder holds (its config's `architectures`), None for the biLM."""
    from transformers import AutoConfig

    from elmo_hf.modeling_elmo.configuration_elmo import TASK_CLASSES

    path = Path(name)
    if not (path / "config.json").is_file():
        return None
    architectures = AutoConfig.from_pretrained(path).architectures or []
    return next((task for task, row in TASK_CLASSES.items() if row.path.rsplit(".", 1)[-1] in architectures), None)


def run(options, guard=None) -> Path:
    """`elmo-export MODEL [--output OUT.onnx]` (`export_options.ExportOptions`): the graph written, or found up to
    date; `InputError` for a bad model, output or a missing package, `RunFailed` for a graph that fails its check."""
    from ..core.errors import InputError, RunFailed, writing
    from ..core.output_paths import check_writable_file
    from ..loading import load_elmo

    log = logging.getLogger("elmo-export")
    missing = [name for name in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(f"elmo-export needs {', '.join(missing)}: pip install 'elmo-hf[onnx]'")
    if options.output is not None and (Path(options.output).suffix != ".onnx" or Path(options.output).is_dir()):
        raise InputError(f"--output {options.output} must be an .onnx file")
    model, _ = load_elmo(options.model, task=_head_task(options.model))  # ModelLoadError: an InputError
    if options.output is None and not Path(options.model).is_dir():
        raise InputError(f"give --output (an .onnx file) for {options.model}: only a model folder has a default place")
    output = Path(options.output) if options.output is not None else beside_model(options.model)
    if options.output is not None:  # a folder that is not there: one line, before the export (the default's is made)
        check_writable_file(output, "--output")
    if output.exists() and not options.overwrite:
        if options.output is not None or graph_metadata(output).get("digest") != model_digest(model):
            raise InputError(f"{output} exists: pass --overwrite to replace it")
        log.info("%s is up to date (made from these weights)", output)
        reused = True
    else:
        reused = False
        try:
            with writing(output, "--output"):
                export_onnx(model, output, check=not options.no_check)
        except ExportError as error:
            raise RunFailed(str(error)) from error
    meta = graph_metadata(output)
    checked = ("kept as it was (not checked again)" if reused else "not checked (--no_check)" if options.no_check
               else f"checked against PyTorch in onnxruntime {meta.get('onnxruntime_version')}")
    log.info("%s: outputs %s; opset %s; written with torch %s, %s", output, meta.get("outputs"),
             meta.get("opset"), meta.get("torch_version"), checked)
    if options.int8:
        with writing(output.parent):
            log.info("wrote ONNX Runtime's int8 graph %s", quantize_int8_graph(output))
    return output
