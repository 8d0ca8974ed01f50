"""Convert the original ELMo weights (bilm-tf / AllenNLP `options.json` + `weights.hdf5`) to this model.

    elmo-convert --model original --output_dir OUT        # a published model: downloaded, verified, cached
    elmo-convert --options_file OPTIONS --weight_file WEIGHTS \
        --output_dir OUT [--vocab_file VOCAB] [--overwrite]   # your files (paths or http(s) URLs)

writes OUT/config.json, OUT/model.safetensors, the tokenizer files and the remote code, so that
`AutoModel.from_pretrained(OUT, trust_remote_code=True)` works without this project installed.

The options file, the hdf5 layout and how each dataset maps to our parameters are described in
docs/weight_layout.md; the original code's quirks handled below in docs/original_model.md. Downloads are in
`download.py`; the output folder's checks and writing, shared with the ELMoForManyLangs converter, in
`convert_common.py`. This file is not remote code (`modeling_elmo.py` never imports it); h5py is imported only when
a weight file is read, so `import elmo_hf.modeling_elmo` does not need it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from elmo_hf.modeling_elmo.configuration_elmo import ElmoConfig
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.tokenization.word_vocab_elmo import WORD_VOCAB_SPECIALS

from . import download
from .convert_common import (
    ConversionError,
    build_model,
    check_input_file,
    check_output_dir,
    checked_word_split,
    hide_write_progress,
    write_converted,
)

logger = logging.getLogger(__name__)

# Keys of bilm-tf's *training* options file that mean nothing for inference
# (docs/weight_layout.md, "options.json").
TRAINING_KEYS = (
    "bidirectional",
    "dropout",
    "all_clip_norm_val",
    "n_epochs",
    "n_train_tokens",
    "batch_size",
    "n_tokens_vocab",
    "unroll_steps",
    "n_negative_samples_batch",
    "share_embedding_softmax",
)
_LSTM_KEYS = ("dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections")
_CHAR_CNN_KEYS = (
    "embedding",
    "filters",
    "activation",
    "n_highway",
    "n_characters",
    "max_characters_per_token",
)

# TF LSTMCell kernel columns are the gate blocks i | j | f | o; torch's order is i, f, g(= j), o.
# `_TF_BLOCK_FOR_TORCH_BLOCK[k]` is the TF block that becomes torch block k
# (docs/weight_layout.md, "LSTM kernels").
_TF_BLOCK_FOR_TORCH_BLOCK = (0, 2, 1, 3)
_TORCH_FORGET_BLOCK = 1
# bilm-tf builds its cells with LSTMCell(forget_bias=1.0): added at run time, never stored in the file.
FORGET_BIAS = 1.0

# Rows of the stored character table: 261 (no padding row); the model has one more, row 0, all zeros.
STORED_CHAR_ROWS = 261

SOFTMAX_WEIGHT, SOFTMAX_BIAS = "softmax/W", "softmax/b"


# --------------------------------------------------------------------------------------------------
# options.json -> ElmoConfig
# --------------------------------------------------------------------------------------------------


def _require(section: dict, key: str, where: str):
    if key not in section:
        raise ConversionError(f"options are missing the required field {where}.{key}")
    return section[key]


def _clip(value, field: str) -> float | None:
    """bilm-tf reads the clips with `.get`, so a missing value means no clipping.

    A clip of 0 is ambiguous: TF's LSTMCell would clip to [0, 0] (a dead model), allennlp skips falsy clips.
    We follow allennlp (no clipping) and say so.
    """
    if value is None:
        logger.info("options have no %s: no clipping (as bilm-tf)", field)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConversionError(f"options field {field} must be a non-negative number or absent, got {value!r}")
    if value == 0:
        logger.warning("options field %s is 0: read as 'no clipping' (allennlp's reading)", field)
        return None
    return float(value)


def config_from_options(options: dict) -> ElmoConfig:
    """Map a bilm-tf / AllenNLP `options.json` (already parsed) to an `ElmoConfig`.

    Args:
        options: the parsed JSON, with the sections `lstm` and `char_cnn`.

    Returns:
        The configuration of the inference model. `n_characters` 261 (training options) becomes 262;
        missing optional fields take bilm-tf's defaults (`n_layers` 1, `n_highway` 0, no clipping,
        no skip connections); training-time keys are ignored. Each of these is logged.

    Raises:
        ConversionError: a required field is missing or a value is not usable; the message names the field.
    """
    if not isinstance(options, dict):
        raise ConversionError(f"options must be a JSON object, got {type(options).__name__}")
    lstm = _require(options, "lstm", "options")
    cnn = _require(options, "char_cnn", "options")
    for name, section in (("lstm", lstm), ("char_cnn", cnn)):
        if not isinstance(section, dict):
            raise ConversionError(f"options field {name} must be a JSON object, got {section!r}")

    training = sorted(k for k in options if k in TRAINING_KEYS)
    if training:
        logger.info("ignoring training-time options: %s", ", ".join(training))
    unknown = sorted(k for k in options if k not in TRAINING_KEYS and k not in ("lstm", "char_cnn"))
    unknown += [f"lstm.{k}" for k in sorted(lstm) if k not in _LSTM_KEYS]
    unknown += [f"char_cnn.{k}" for k in sorted(cnn) if k not in _CHAR_CNN_KEYS]
    if unknown:
        logger.warning("ignoring unknown options: %s", ", ".join(unknown))

    cell_size = _require(lstm, "dim", "lstm")
    projection_dim = _require(lstm, "projection_dim", "lstm")
    if "n_layers" not in lstm:
        logger.info("options have no lstm.n_layers: using 1 (bilm-tf's default)")
    num_layers = lstm.get("n_layers", 1)
    for field, value in (
        ("lstm.dim", cell_size),
        ("lstm.projection_dim", projection_dim),
        ("lstm.n_layers", num_layers),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConversionError(f"options field {field} must be a positive integer, got {value!r}")
    if projection_dim > cell_size:
        # bilm-tf then builds LSTMCells without projection whose output has size lstm.dim, not projection_dim.
        raise ConversionError(
            f"options field lstm.projection_dim ({projection_dim}) is larger than lstm.dim ({cell_size}): "
            "bilm-tf then runs the LSTM without projection, a layout this model does not support"
        )
    cell_clip = _clip(lstm.get("cell_clip"), "lstm.cell_clip")
    proj_clip = _clip(lstm.get("proj_clip"), "lstm.proj_clip")
    if cell_size == projection_dim and proj_clip is not None:
        # TF's LSTMCell applies proj_clip only when it has a projection (num_proj); bilm-tf builds none here.
        logger.info(
            "lstm.dim == lstm.projection_dim: no projection, so lstm.proj_clip is unused (as in bilm-tf)"
        )
        proj_clip = None
    if "use_skip_connections" not in lstm:
        logger.warning("options have no lstm.use_skip_connections: using false")
    use_skip = lstm.get("use_skip_connections") or False  # bilm-tf tests it for truth
    if use_skip not in (True, False):  # also accepts 0 and 1
        raise ConversionError(
            f"options field lstm.use_skip_connections must be true or false, got {use_skip!r}"
        )
    use_skip = bool(use_skip)

    embedding = _require(cnn, "embedding", "char_cnn")
    if not isinstance(embedding, dict):
        raise ConversionError(f"options field char_cnn.embedding must be a JSON object, got {embedding!r}")
    char_dim = _require(embedding, "dim", "char_cnn.embedding")
    filters = _require(cnn, "filters", "char_cnn")
    activation = _require(cnn, "activation", "char_cnn")
    max_chars = _require(cnn, "max_characters_per_token", "char_cnn")
    if "n_highway" not in cnn or cnn["n_highway"] is None:
        logger.info("options have no char_cnn.n_highway: no highway layers (as bilm-tf)")
    num_highway = cnn.get("n_highway") or 0
    n_characters = cnn.get("n_characters", 262)
    if "n_characters" not in cnn:
        logger.info("options have no char_cnn.n_characters: using 262")
    if n_characters == 261:
        # Training options count 261 characters (no padding id); inference prepends a zero row
        # (docs/original_model.md, "261 vs 262 characters").
        logger.info(
            "char_cnn.n_characters is 261 (training options): using 262, the inference table with a padding row"
        )
        n_characters = 262
    if n_characters != 262:
        raise ConversionError(
            f"options field char_cnn.n_characters must be 262 (or 261 in training options), got {n_characters!r}"
        )
    if not isinstance(filters, list) or not all(isinstance(f, (list, tuple)) for f in filters):
        raise ConversionError(
            f"options field char_cnn.filters must be a list of [width, count], got {filters!r}"
        )

    try:
        return ElmoConfig(
            char_embedding_dim=char_dim,
            char_cnn_filters=[list(f) for f in filters],
            char_cnn_activation=activation,
            num_highway_layers=num_highway,
            max_characters_per_token=max_chars,
            char_vocab_size=n_characters,
            projection_dim=projection_dim,
            cell_size=cell_size,
            num_layers=num_layers,
            cell_clip=cell_clip,
            proj_clip=proj_clip,
            use_skip_connections=use_skip,
        )
    except ValueError as error:  # ElmoConfig's validation names its own field; say which option it came from
        raise ConversionError(f"options do not give a valid ELMo configuration: {error}") from error


def read_options(options_file: str | os.PathLike) -> dict:
    """Parse an options file, with errors that name it."""
    path = Path(options_file)
    check_input_file(path, "options file")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConversionError(f"options file {path} is not valid JSON: {error}") from error


# --------------------------------------------------------------------------------------------------
# weights.hdf5 -> state dict
# --------------------------------------------------------------------------------------------------


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


class _WeightReader:
    """Reads the datasets of an open hdf5 file one at a time, checking each shape against the options."""

    def __init__(self, handle, path: Path):
        self.handle = handle
        self.path = path
        self.used: set[str] = set()

    def has(self, name: str) -> bool:
        return name in self.handle

    def read(self, name: str, expected: Sequence[tuple[int, str]], needed_for: str = ""):
        """The dataset `name` as a float32 numpy array; `expected` is one (size, where it comes from) per axis."""
        if name not in self.handle:
            reason = f" (needed for {needed_for})" if needed_for else ""
            raise ConversionError(f"weight file {self.path} has no dataset {name!r}{reason}")
        dataset = self.handle[name]
        if not hasattr(dataset, "shape"):
            raise ConversionError(f"weight file {self.path}: {name!r} is a group, expected a dataset")
        shape = tuple(dataset.shape)
        want = tuple(size for size, _ in expected)
        if shape != want:
            if len(shape) != len(want):
                detail = f"{len(shape)} axes instead of {len(want)}"
            else:
                detail = "; ".join(
                    f"axis {axis}: expected {size} ({origin}), found {found}"
                    for axis, ((size, origin), found) in enumerate(zip(expected, shape, strict=True))
                    if size != found
                )
            raise ConversionError(
                f"dataset {name!r} in {self.path} has shape {shape}, expected {want} from the options ({detail}); "
                "the options file and the weight file disagree"
            )
        if dataset.dtype.kind != "f":
            raise ConversionError(
                f"dataset {name!r} in {self.path} has dtype {dataset.dtype}, expected floats"
            )
        try:
            array = dataset[()]
        except OSError as error:  # a damaged or truncated file can open but fail on read
            raise ConversionError(f"cannot read dataset {name!r} from {self.path}: {error}") from error
        self.used.add(name)
        return np.asarray(array, dtype=np.float32)

    def unused(self) -> list[str]:
        names: list[str] = []
        self.handle.visititems(lambda name, obj: names.append(name) if hasattr(obj, "shape") else None)
        return sorted(n for n in names if n not in self.used and not n.startswith("softmax/"))


def _open_hdf5(path: Path):
    try:
        import h5py
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ConversionError(
            "reading the original weights needs h5py: pip install 'elmo-hf[convert]'"
        ) from error
    check_input_file(path, "weight file")
    try:
        return h5py.File(path, "r")
    except OSError as error:
        raise ConversionError(
            f"cannot read weight file {path} as HDF5 (not an HDF5 file, or truncated): {error}"
        ) from error


def load_hdf5_weights(weight_file: str | os.PathLike, config: ElmoConfig) -> dict[str, torch.Tensor]:
    """Read a bilm-tf weight file into a state dict for `ElmoModel(config)`.

    Datasets are read one at a time and written straight into their final tensors, so the peak memory is
    the converted weights plus the largest single dataset.

    Args:
        weight_file: the hdf5 file (layout in docs/weight_layout.md, "hdf5 datasets").
        config: the configuration the weights must match (from `config_from_options`).

    Returns:
        `{parameter name: float32 tensor}` with exactly the keys of `ElmoModel(config).state_dict()`.

    Raises:
        ConversionError: the file is missing, unreadable, lacks a dataset, has a dataset of the wrong shape
            (naming the dataset, the expected and found shapes and the option behind the expectation), or
            holds datasets the options do not account for.
    """
    path = Path(weight_file)
    with _open_hdf5(path) as handle:
        reader = _WeightReader(handle, path)
        state = _read_char_encoder(reader, config)
        state.update(_read_bilstm(reader, config))
        extra = reader.unused()
    if extra:
        raise ConversionError(
            f"weight file {path} has datasets the options do not account for: {', '.join(extra[:8])}"
            f"{' ...' if len(extra) > 8 else ''}; {_explain_extra(extra[0], config)}"
        )
    return state


def _explain_extra(name: str, config: ElmoConfig) -> str:
    """Name the option that most likely disagrees with an unexpected dataset."""
    if name.startswith("CNN_high_"):
        return f"check char_cnn.n_highway (options say {config.num_highway_layers})"
    if name.startswith("CNN_proj"):
        return (
            f"the options give sum(char_cnn.filters counts) == lstm.projection_dim ({config.projection_dim}), "
            "so there should be no projection; check char_cnn.filters and lstm.projection_dim"
        )
    if name.startswith("CNN/"):
        return f"check char_cnn.filters (options give {len(config.char_cnn_filters)} filters)"
    if name.endswith("W_P_0"):
        return (f"the options give lstm.dim == lstm.projection_dim ({config.cell_size}), so there is no projection; "
                "check both")
    if name.startswith("RNN_"):
        return f"check lstm.n_layers (options say {config.num_layers})"
    return "check that the options file belongs to this weight file"


def _read_char_encoder(reader: _WeightReader, config: ElmoConfig) -> dict[str, torch.Tensor]:
    d, filters, proj = config.char_embedding_dim, config.num_char_filters, config.projection_dim
    d_src = "char_cnn.embedding.dim"
    f_src = "sum of char_cnn.filters counts"
    state: dict[str, torch.Tensor] = {}

    # The stored table has no padding row; row 0 (the padding id) is zeros
    # (docs/weight_layout.md, "Character embedding").
    table = reader.read("char_embed", [(STORED_CHAR_ROWS, "261 stored characters"), (d, d_src)])
    embedding = torch.zeros(config.char_vocab_size, d)
    embedding[1:] = torch.from_numpy(table)
    state["char_encoder.char_embedding.weight"] = embedding

    for i, (width, count) in enumerate(config.char_cnn_filters):
        where = f"char_cnn.filters[{i}]"
        kernel = reader.read(
            f"CNN/W_cnn_{i}",
            [(1, "conv2d height"), (width, f"{where} width"), (d, d_src), (count, f"{where} count")],
        )
        # TF conv2d HWIO (1, w, d, n) -> torch Conv1d (n, d, w); both are cross-correlations
        # (docs/weight_layout.md, "Character CNN").
        state[f"char_encoder.convolutions.{i}.weight"] = torch.from_numpy(kernel[0].transpose(2, 1, 0).copy())
        state[f"char_encoder.convolutions.{i}.bias"] = torch.from_numpy(
            reader.read(f"CNN/b_cnn_{i}", [(count, f"{where} count")])
        )

    for k in range(config.num_highway_layers):
        group, needed = f"CNN_high_{k}", f"char_cnn.n_highway={config.num_highway_layers}"
        square = [(filters, f_src), (filters, f_src)]
        # Stored (in, out) and used as x @ W; torch Linear keeps (out, in). TF's "carry" gate weights the
        # transform branch: y = g * relu(transform(x)) + (1 - g) * x with g = sigmoid(carry(x))
        # (docs/original_model.md, "Highway carry gate").
        for leaf in ("carry", "transform"):
            weight = reader.read(f"{group}/W_{leaf}", square, needed)
            state[f"char_encoder.highways.{k}.{leaf}.weight"] = torch.from_numpy(weight.T.copy())
            state[f"char_encoder.highways.{k}.{leaf}.bias"] = torch.from_numpy(
                reader.read(f"{group}/b_{leaf}", [(filters, f_src)], needed)
            )

    if filters != proj:  # bilm-tf projects only when F != P (docs/original_model.md, "CNN projection")
        needed = f"{f_src} ({filters}) != lstm.projection_dim ({proj})"
        weight = reader.read("CNN_proj/W_proj", [(filters, f_src), (proj, "lstm.projection_dim")], needed)
        state["char_encoder.projection.weight"] = torch.from_numpy(weight.T.copy())
        state["char_encoder.projection.bias"] = torch.from_numpy(
            reader.read("CNN_proj/b_proj", [(proj, "lstm.projection_dim")], needed)
        )
    return state


def _read_bilstm(reader: _WeightReader, config: ElmoConfig) -> dict[str, torch.Tensor]:
    cell, proj = config.cell_size, config.projection_dim
    state: dict[str, torch.Tensor] = {}
    for layer in range(config.num_layers):
        weight_ih = torch.empty(2, 4 * cell, proj)
        weight_hh = torch.empty(2, 4 * cell, proj)
        bias = torch.empty(2, 4 * cell)
        weight_hr = torch.empty(2, proj, cell) if cell != proj else None
        needed = f"lstm.n_layers={config.num_layers}"
        for direction in range(2):  # RNN_0 forward, RNN_1 backward (docs/weight_layout.md, "LSTM kernels")
            prefix = _lstm_prefix(direction, layer)
            # Rows: [layer input (P) ; previous projected h (P)]; columns: TF gate blocks i | j | f | o of C.
            kernel = torch.from_numpy(
                reader.read(
                    f"{prefix}/W_0",
                    [(2 * proj, "2 x lstm.projection_dim"), (4 * cell, "4 x lstm.dim")],
                    needed,
                )
            )
            stored_bias = torch.from_numpy(reader.read(f"{prefix}/B", [(4 * cell, "4 x lstm.dim")], needed))
            for torch_block, tf_block in enumerate(_TF_BLOCK_FOR_TORCH_BLOCK):
                rows = slice(torch_block * cell, (torch_block + 1) * cell)
                cols = slice(tf_block * cell, (tf_block + 1) * cell)
                weight_ih[direction, rows] = kernel[:proj, cols].T
                weight_hh[direction, rows] = kernel[proj:, cols].T
                bias[direction, rows] = stored_bias[cols]
            del kernel
            # The forget bias is added at run time by TF's LSTMCell(forget_bias=1.0), not stored
            # (docs/original_model.md, "Forget bias").
            bias[direction, _TORCH_FORGET_BLOCK * cell : (_TORCH_FORGET_BLOCK + 1) * cell] += FORGET_BIAS
            if weight_hr is not None:
                projection = reader.read(
                    f"{prefix}/W_P_0", [(cell, "lstm.dim"), (proj, "lstm.projection_dim")], needed
                )
                weight_hr[direction] = torch.from_numpy(projection).T
        base = f"bilm.layers.{layer}"
        state[f"{base}.weight_ih"], state[f"{base}.weight_hh"], state[f"{base}.bias"] = (
            weight_ih,
            weight_hh,
            bias,
        )
        if weight_hr is not None:
            state[f"{base}.weight_hr"] = weight_hr
    return state


def read_hdf5_softmax(path: str | os.PathLike) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The pretraining softmax `(W (V, P), b (V,))` of a weight file, or None when it has none.

    bilm-tf's `dump_weights` leaves the softmax out, so released weight files have none; files written by
    other tools (e.g. allennlp's `elmo_softmax_weights.hdf5` test fixture) may carry `softmax/W`, `softmax/b`.
    """
    file = Path(path)
    with _open_hdf5(file) as handle:
        reader = _WeightReader(handle, file)
        if not (reader.has(SOFTMAX_WEIGHT) and reader.has(SOFTMAX_BIAS)):
            return None
        weight_shape = tuple(handle[SOFTMAX_WEIGHT].shape)
        if len(weight_shape) != 2:
            raise ConversionError(
                f"dataset {SOFTMAX_WEIGHT!r} in {file} has shape {weight_shape}, expected (V, P)"
            )
        vocab, dim = weight_shape
        weight = reader.read(SOFTMAX_WEIGHT, [(vocab, "vocabulary"), (dim, "projection_dim")])
        bias = reader.read(SOFTMAX_BIAS, [(vocab, f"rows of {SOFTMAX_WEIGHT}")])
    return torch.from_numpy(weight), torch.from_numpy(bias)


# --------------------------------------------------------------------------------------------------
# The converted folder (written by convert_common)
# --------------------------------------------------------------------------------------------------


def read_vocabulary(vocab_file: Path) -> list[str]:
    """A vocabulary file as bilm-tf's `Vocabulary` accepts it: one token per line (stripped; blank lines skipped, as
    the tokenizer reads its own vocab.txt), UTF-8 by the format, and `<S>`, `</S>`, `<UNK>` optional (bilm-tf
    checks them only with `validate_file=True`). Missing ones are added after the file's tokens, with a warning:
    the tokenizer needs them, but a softmax trained with the file has no rows for them."""
    check_input_file(vocab_file, "vocab file")
    try:
        with open(vocab_file, encoding="utf-8") as handle:
            tokens = [token for token in (line.strip() for line in handle) if token]
    except UnicodeDecodeError as error:
        raise ConversionError(f"vocab file {vocab_file} cannot be used: it is not UTF-8 text ({error})") from error
    if any("\x00" in token for token in tokens):  # valid UTF-8, but no vocabulary holds NUL: a binary file
        raise ConversionError(f"vocab file {vocab_file} holds a NUL byte: a binary file, not a vocabulary")
    present = set(tokens)
    missing = [special for special in WORD_VOCAB_SPECIALS if special not in present]
    if missing:
        them = "it" if len(missing) == 1 else "them"
        ids = ", ".join(f"{special} {len(tokens) + i:,}" for i, special in enumerate(missing))
        logger.warning(
            "vocab file %s lacks %s: accepted as bilm-tf accepts it, but a softmax trained with this file has no row "
            "for %s (bilm-tf gives a missing special the id -1); the tokenizer adds %s after the file's %s tokens, "
            "as word ids %s", vocab_file, " ".join(missing), them, them, f"{len(tokens):,}", ids)
        tokens += missing
    return tokens


def _make_tokenizer(config: ElmoConfig, vocab_file: Path | None, word_split: str | None = None):
    """The project's `ElmoTokenizer` for this model, with the word vocabulary when one is given."""
    kwargs = {"max_characters_per_token": config.max_characters_per_token}
    if word_split is not None:
        kwargs["word_split"] = word_split
    if vocab_file is not None:
        kwargs["word_vocab"] = read_vocabulary(vocab_file)
    try:
        return ElmoTokenizer(**kwargs)
    except (ValueError, OSError, UnicodeDecodeError) as error:
        raise ConversionError(f"vocab file {vocab_file} cannot be used: {error}") from error


# Measured by tests/test_convert.py on the AllenNLP fixture (docs/original_model.md, "Parity recipe"): how
# closely this converter reproduces the original TensorFlow outputs. Quoted in the model card of every converted model.
CONVERTER_PARITY = {
    "top layer vs bilm-tf, 10 batches with the state carried (max abs difference)": "1.2e-6",
    "character encoder vs bilm-tf, 458 words (max abs difference)": "7.2e-7",
    "tolerance asserted by the test suite": "1e-5",
}


def convert(
    options_file: str | os.PathLike,
    weight_file: str | os.PathLike,
    output_dir: str | os.PathLike,
    vocab_file: str | os.PathLike | None = None,
    overwrite: bool = False,
    word_split: str | None = None,
) -> Path:
    """Convert an `options.json` + `weights.hdf5` pair to a Hugging Face folder.

    The folder holds `config.json` (with `auto_map`), `model.safetensors`, the tokenizer files (with the
    vocabulary when `vocab_file` is given) and the remote code, so that `AutoModel.from_pretrained(folder,
    trust_remote_code=True)` and `AutoTokenizer.from_pretrained(folder, trust_remote_code=True)` work
    anywhere. Everything is written to a temporary folder beside `output_dir` and moved into place at the
    end: on any error no partial output is left behind.

    Args:
        options_file: the bilm-tf options JSON.
        weight_file: the bilm-tf / allennlp hdf5 weights.
        output_dir: the folder to create.
        vocab_file: optional vocabulary (one token per line) saved with the tokenizer; `<S>`, `</S>` and `<UNK>`
            may be missing, as bilm-tf allows (`read_vocabulary`).
        overwrite: replace `output_dir` if it exists and is not empty.
        word_split: the tokenizer's word split, a name in `tokenization.WORD_SPLITTERS` (None: its default).

    Returns:
        The path of the output folder.

    Raises:
        ConversionError: bad inputs, or `output_dir` exists, is not empty and `overwrite` is False.
    """
    output_dir = check_output_dir(output_dir, overwrite, (options_file, weight_file, vocab_file))
    word_split = checked_word_split(word_split)
    config = config_from_options(read_options(options_file))
    tokenizer = _make_tokenizer(config, Path(vocab_file) if vocab_file is not None else None, word_split)
    logger.info(
        "ELMo: %d layers, cell %d, projection %d, %d char filters, %d highway, skip connections %s",
        config.num_layers,
        config.cell_size,
        config.projection_dim,
        config.num_char_filters,
        config.num_highway_layers,
        config.use_skip_connections,
    )
    state = load_hdf5_weights(weight_file, config)
    model = build_model(config, state)
    del state
    logger.info("converted %s parameters", f"{sum(p.numel() for p in model.parameters()):,}")
    card = {
        "description": "Converted from original ELMo weights (bilm-tf / AllenNLP) with `elmo-convert`; the "
        "training data and procedure are those of the original model.",
        "options_file": Path(options_file).name,
        "weight_file": Path(weight_file).name,
    }
    return write_converted(output_dir, model, tokenizer, card, CONVERTER_PARITY)


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def _check_sources(args: argparse.Namespace) -> None:
    """Either --model or both files; the options that only make sense with --model."""
    if args.model is not None:
        download.get_published_model(args.model)  # an unknown name lists the valid ones
        given = [flag for flag in ("options_file", "weight_file") if getattr(args, flag) is not None]
        if given:
            raise ConversionError(f"--model {args.model} downloads its own files; drop --{given[0]}")
        if args.with_vocab and args.vocab_file is not None:
            raise ConversionError("--with_vocab and --vocab_file both give a vocabulary; pass one")
        return
    missing = [f"--{flag}" for flag in ("options_file", "weight_file") if getattr(args, flag) is None]
    if missing:
        raise ConversionError(
            f"give --model NAME ({', '.join(download.model_names())}) or both --options_file and "
            f"--weight_file (missing {' and '.join(missing)})"
        )
    for flag in ("with_vocab", "base_url"):
        if getattr(args, flag):
            raise ConversionError(f"--{flag} needs --model")


def _local_sources(args: argparse.Namespace) -> tuple[Path, Path, Path | None]:
    """Local paths of the options, weights and vocabulary: downloads (verified, cached) for --model and URLs."""
    if args.model is not None:
        files = download.fetch_published(args.model, args.cache_dir, args.base_url, args.with_vocab)
        return files["options"], files["weights"], files.get("vocab") or _optional(args.vocab_file, args)
    options = download.resolve(args.options_file, "options", args.cache_dir)
    weights = download.resolve(args.weight_file, "weights", args.cache_dir)
    return options, weights, _optional(args.vocab_file, args)


def _optional(vocab_file: str | None, args: argparse.Namespace) -> Path | None:
    return None if vocab_file is None else download.resolve(vocab_file, "vocab", args.cache_dir)


def convert_sources(args) -> Path:
    """Convert what the options of `elmo-convert` (`command_options.ConvertOptions`) name: a published model
    (downloaded and checked) or bilm-tf / AllenNLP files or URLs. Returns the folder written."""
    _check_sources(args)
    checked_word_split(args.word_split)
    # Before any download: a refused output_dir must not cost a 374 MB transfer.
    check_output_dir(args.output_dir, args.overwrite, [p for p in (args.options_file, args.weight_file,
                     args.vocab_file) if p is not None and not download.is_url(p)])
    options_file, weight_file, vocab_file = _local_sources(args)
    hide_write_progress()  # after the downloads, whose bars are useful
    return convert(options_file, weight_file, args.output_dir, vocab_file, args.overwrite, args.word_split)
