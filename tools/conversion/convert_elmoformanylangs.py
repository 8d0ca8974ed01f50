"""Convert an ELMoForManyLangs model folder (HIT-SCIR, 44 languages) to a Hugging Face folder.

    elmo-convert --manylangs_dir DIR --output_dir OUT [--word_split jieba] [--overwrite] [--verbose]

DIR is a model folder as HIT-SCIR publish it (unzipped from the NLPL repository): `config.json` (training options;
its `config_path` names the network config), the network config (e.g. `cnn_50_100_512_4096_sample.json`),
`char.dic`, `word.dic`, `token_embedder.pkl` and `encoder.pkl`. OUT gets `config.json`, `model.safetensors`, the
tokenizer files (the two dictionaries) and the remote code, so that `AutoModel` / `AutoTokenizer` load it, in-library
or with `trust_remote_code=True`.

Everything is read as the `elmoformanylangs` package reads it (`Embedder.get_model`), without importing it:

* the network config is looked for at `config_path`, then under its file name in DIR, then among the package's two
  default configs (copied below), in the package's order;
* `char.dic` / `word.dic` are read line by line with `codecs.open`, `line.strip().split('\t')`, a lone id meaning
  the entry `'\u3000'` (a whitespace character that strip() removed); later lines win;
* the `.pkl` files are state dicts, loaded with `torch.load(weights_only=True)`: a pickle that would run code is
  refused, never executed.

How their layer 0 maps to `ElmoConfig(token_encoder="word_char")`, and why the highway gate is negated, is in
docs/original_model.md ("ELMoForManyLangs") and docs/weight_layout.md ("ELMoForManyLangs .pkl files").
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import pickle
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from elmo_hf.modeling_elmo.configuration_elmo import ElmoConfig
from elmo_hf.tokenization import ElmoManyLangsTokenizer

from ..core.interrupts import Interrupted
from .convert_common import (
    ConversionError,
    build_model,
    check_output_dir,
    checked_word_split,
    notice,
    write_converted,
)

logger = logging.getLogger(__name__)

# The package's own network configs (elmoformanylangs/configs/): the published folders often name one of them by
# an absolute path of the authors' machine, and the package falls back to its copy. Both files hold the same text.
_PUBLISHED_NETWORK = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
DEFAULT_NETWORKS = {
    "cnn_50_100_512_4096_sample.json": _PUBLISHED_NETWORK,
    "cnn_0_100_512_4096_sample.json": _PUBLISHED_NETWORK,
}
# Remote code beyond what every converted folder has (convert_common.REQUIRED_FILES).
REMOTE_CODE_FILES = ("word_char_encoder.py", "tokenization_elmo_manylangs.py")
ID_SHIFT = 1  # our ids are theirs + 1: row 0 of every table is padding
CHAR_SPECIALS = ("<bow>", "<eow>", "<oov>", "<pad>", "<bos>", "<eos>")
WORD_SPECIALS = ("<oov>", "<pad>")

# Measured by tests/test_convert_elmoformanylangs.py against the elmoformanylangs package on random weights.
CONVERTER_PARITY = {
    "every layer vs elmoformanylangs 0.0.4.post2 (fresh biLM state), random tiny models": "< 1e-5",
    "tolerance asserted by the test suite": "1e-5",
}


# --------------------------------------------------------------------------------------------------
# Reading the folder
# --------------------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ConversionError(f"{path} is missing: not an ELMoForManyLangs model folder") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConversionError(f"{path} cannot be read as JSON: {error}") from error
    if not isinstance(data, dict):
        raise ConversionError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data


def read_network_config(model_dir: str | os.PathLike) -> tuple[dict, str]:
    """The network config named by `model_dir/config.json` and where it came from (a path or "default ...")."""
    model_dir = Path(model_dir)
    options_path = model_dir / "config.json"
    config_path = _read_json(options_path).get("config_path")
    if not isinstance(config_path, str) or not config_path:
        raise ConversionError(f"{options_path} has no config_path naming the network config")
    name = os.path.basename(config_path.replace("\\", "/"))
    for candidate in (model_dir / config_path, model_dir / name):
        if candidate.is_file():
            return _read_json(candidate), str(candidate)
    if name in DEFAULT_NETWORKS:
        logger.info("%s names %s, which is not in %s: using the package's default %s (as the package does)",
                    options_path, config_path, model_dir, name)
        return json.loads(json.dumps(DEFAULT_NETWORKS[name])), f"default {name}"
    raise ConversionError(
        f"{options_path} names the network config {config_path!r}, found neither there nor as {model_dir / name}"
    )


def read_dictionary(path: str | os.PathLike) -> dict[str, int]:
    """`char.dic` / `word.dic` as `elmoformanylangs.Embedder` reads them: `{entry: id}`."""
    path = Path(path)
    if not path.is_file():
        raise ConversionError(f"{path} is missing: the network config needs it")
    lexicon: dict[str, int] = {}
    try:
        with codecs.open(str(path), "r", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                tokens = line.strip().split("\t")
                if len(tokens) == 1:
                    tokens.insert(0, "\u3000")  # the package's reading of a whitespace entry
                if len(tokens) != 2 or not tokens[1].isdigit():
                    raise ConversionError(f"{path} line {number}: expected 'entry<TAB>id', got {line.rstrip()!r}")
                lexicon[tokens[0]] = int(tokens[1])
    except (OSError, UnicodeDecodeError) as error:
        raise ConversionError(f"{path} cannot be read as UTF-8 text: {error}") from error
    return lexicon


def load_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A `.pkl` state dict, loaded with `weights_only=True`: a pickle that would run code is refused."""
    path = Path(path)
    if not path.is_file():
        raise ConversionError(f"{path} is missing: not an ELMoForManyLangs model folder")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Interrupted:
        raise
    except pickle.UnpicklingError as error:
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise ConversionError(
            f"{path} is not a plain state dict of tensors; refused without running it (torch.load "
            f"weights_only=True): {reason}"
        ) from error
    except Exception as error:  # noqa: BLE001 - a corrupt file raises anything from EOFError to RuntimeError
        raise ConversionError(f"{path} cannot be read as a torch state dict: {type(error).__name__}: "
                              f"{error}") from error
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise ConversionError(f"{path} must hold a state dict (names -> tensors), got {type(state).__name__}")
    return dict(state)


# --------------------------------------------------------------------------------------------------
# Network config -> ElmoConfig
# --------------------------------------------------------------------------------------------------


def _field(section: dict, key: str, where: str, source: str):
    if key not in section:
        raise ConversionError(f"{source}: {where} has no {key!r}")
    return section[key]


def config_from_network(network: dict, source: str, char_rows: int, word_rows: int) -> ElmoConfig:
    """`ElmoConfig(token_encoder="word_char")` for a network config; `*_rows` are the dictionaries' table sizes."""
    encoder, embedder = network.get("encoder"), network.get("token_embedder")
    if not isinstance(encoder, dict) or not isinstance(embedder, dict):
        raise ConversionError(f"{source} needs the sections 'encoder' and 'token_embedder'")
    if str(_field(encoder, "name", "encoder", source)).lower() != "elmo" or str(
        _field(embedder, "name", "token_embedder", source)
    ).lower() != "cnn":
        raise ConversionError(
            f"{source}: only the published architecture (encoder 'elmo', token_embedder 'cnn') converts, got "
            f"encoder {encoder.get('name')!r} and token_embedder {embedder.get('name')!r}"
        )
    cell, projection = _field(encoder, "dim", "encoder", source), _field(encoder, "projection_dim", "encoder", source)
    if cell == projection:
        raise ConversionError(
            f"{source}: dim == projection_dim ({cell}) is not supported (their LSTM projects even then; ours has no "
            "projection at that size)"
        )
    char_dim = _field(embedder, "char_dim", "token_embedder", source)
    word_dim = _field(embedder, "word_dim", "token_embedder", source)
    try:
        return ElmoConfig(
            token_encoder="word_char",
            char_embedding_dim=char_dim,
            char_cnn_filters=_field(embedder, "filters", "token_embedder", source) if char_dim else None,
            char_cnn_activation=_field(embedder, "activation", "token_embedder", source) if char_dim else "relu",
            num_highway_layers=_field(embedder, "n_highway", "token_embedder", source) if char_dim else 0,
            max_characters_per_token=_field(embedder, "max_characters_per_token", "token_embedder", source),
            char_vocab_size=char_rows + ID_SHIFT if char_dim else 1,
            word_input_vocab_size=word_rows + ID_SHIFT if word_dim else 0,
            word_input_embedding_dim=word_dim,
            projection_dim=projection,
            cell_size=cell,
            num_layers=_field(encoder, "n_layers", "encoder", source),
            # their LSTM clips only when the value is truthy (`if self.memory_cell_clip_value:`)
            cell_clip=encoder.get("cell_clip") or None,
            proj_clip=encoder.get("proj_clip") or None,
            use_skip_connections=True,
            dropout=network.get("dropout", 0.1),
            vocab_size=0,
        )
    except (ValueError, TypeError) as error:
        raise ConversionError(f"{source}: {error}") from error


# --------------------------------------------------------------------------------------------------
# Their state dicts -> ours
# --------------------------------------------------------------------------------------------------


class _Weights:
    """The tensors of one `.pkl` file, taken by name with their shape checked; the file is named in every error."""

    def __init__(self, state: dict[str, torch.Tensor], path: Path):
        self.state, self.path, self.taken = state, path, set()

    def take(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        if name not in self.state:
            raise ConversionError(f"{self.path} lacks {name!r} (expected shape {shape})")
        tensor = self.state[name]
        if tuple(tensor.shape) != tuple(shape):
            raise ConversionError(f"{self.path}: {name!r} has shape {tuple(tensor.shape)}, expected {tuple(shape)}")
        self.taken.add(name)
        return tensor.detach().to(torch.float32)

    def check_all_taken(self) -> None:
        extra = sorted(set(self.state) - self.taken)
        if extra:
            raise ConversionError(f"{self.path} holds tensors the network config does not describe: {extra[:8]}")


def _padded(table: torch.Tensor) -> torch.Tensor:
    """Their table with our padding row 0 (zeros) in front."""
    return torch.cat([table.new_zeros(1, table.shape[1]), table])


def convert_token_embedder(weights: _Weights, config: ElmoConfig, char_rows: int, word_rows: int) -> dict:
    """`token_embedder.pkl` (their `ConvTokenEmbedder`) -> `char_encoder.*` of `ElmoWordCharEncoder`."""
    state, width = {}, 0
    prefix = "char_encoder."
    if config.word_input_embedding_dim:
        table = weights.take("word_emb_layer.embedding.weight", (word_rows, config.word_input_embedding_dim))
        state[prefix + "word_embedding.weight"] = _padded(table)
        width += config.word_input_embedding_dim
    if config.char_embedding_dim:
        cnn = prefix + "char_cnn."
        table = weights.take("char_emb_layer.embedding.weight", (char_rows, config.char_embedding_dim))
        state[cnn + "char_embedding.weight"] = _padded(table)
        for i, (kernel, count) in enumerate(config.char_cnn_filters):
            state[f"{cnn}convolutions.{i}.weight"] = weights.take(
                f"convolutions.{i}.weight", (count, config.char_embedding_dim, kernel)
            )
            state[f"{cnn}convolutions.{i}.bias"] = weights.take(f"convolutions.{i}.bias", (count,))
        filters = config.num_char_filters
        for k in range(config.num_highway_layers):
            # theirs: [nonlinear | gate] = x W^T + b, y = g x + (1 - g) relu(nonlinear), g = sigmoid(gate);
            # ours (bilm-tf): y = c relu(transform) + (1 - c) x with c = sigmoid(carry), so carry = -gate
            matrix = weights.take(f"highways._layers.{k}.weight", (2 * filters, filters))
            bias = weights.take(f"highways._layers.{k}.bias", (2 * filters,))
            state[f"{cnn}highways.{k}.transform.weight"] = matrix[:filters].clone()
            state[f"{cnn}highways.{k}.transform.bias"] = bias[:filters].clone()
            state[f"{cnn}highways.{k}.carry.weight"] = -matrix[filters:]
            state[f"{cnn}highways.{k}.carry.bias"] = -bias[filters:]
        width += filters
    state[prefix + "projection.weight"] = weights.take("projection.weight", (config.projection_dim, width))
    state[prefix + "projection.bias"] = weights.take("projection.bias", (config.projection_dim,))
    weights.check_all_taken()
    return state


def convert_encoder(weights: _Weights, config: ElmoConfig) -> dict:
    """`encoder.pkl` (their `ElmobiLm`, allennlp's LSTM cells: gates i, f, g, o like torch) -> `bilm.layers.*`."""
    cell, proj = config.cell_size, config.projection_dim
    state = {}
    for layer in range(config.num_layers):
        parts = {"weight_ih": [], "weight_hh": [], "bias": [], "weight_hr": []}
        for direction in ("forward", "backward"):  # our direction axis: 0 forward, 1 backward
            base = f"{direction}_layer_{layer}."
            parts["weight_ih"].append(weights.take(base + "input_linearity.weight", (4 * cell, proj)))
            parts["weight_hh"].append(weights.take(base + "state_linearity.weight", (4 * cell, proj)))
            parts["bias"].append(weights.take(base + "state_linearity.bias", (4 * cell,)))
            parts["weight_hr"].append(weights.take(base + "state_projection.weight", (proj, cell)))
        for name, tensors in parts.items():
            state[f"bilm.layers.{layer}.{name}"] = torch.stack(tensors)
    weights.check_all_taken()
    return state


# --------------------------------------------------------------------------------------------------
# The conversion
# --------------------------------------------------------------------------------------------------


def _table_rows(path: Path, name: str, state: dict, dictionary: dict[str, int], specials) -> int:
    """Rows of the embedding table `name` in `path`, checked against the dictionary read beside it."""
    if name not in state or state[name].dim() != 2:
        raise ConversionError(f"{path} lacks the 2-d table {name!r}")
    rows = state[name].shape[0]
    where = "char.dic" if name.startswith("char") else "word.dic"
    if rows != len(dictionary):
        raise ConversionError(
            f"{where} has {len(dictionary)} entries but {path.name} has {rows} rows in {name!r}: "
            "the dictionary does not belong to these weights"
        )
    missing = [s for s in specials if s not in dictionary]
    if missing:
        raise ConversionError(f"{where} lacks the entries {missing} that the package's batcher needs")
    top = max(dictionary.values())
    if top >= rows:
        raise ConversionError(f"{where} has the id {top}, beyond the {rows} rows of {name!r} in {path.name}")
    return rows


def read_model(model_dir: str | os.PathLike):
    """Read and check a model folder: `(config, state_dict, char_dictionary, word_dictionary, network_source)`.

    The dictionaries are None where the model has no such part.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ConversionError(f"model_dir {model_dir} is not a folder")
    network, source = read_network_config(model_dir)
    embedder = network.get("token_embedder") if isinstance(network.get("token_embedder"), dict) else {}
    char_dim, word_dim = embedder.get("char_dim", 0), embedder.get("word_dim", 0)
    chars = read_dictionary(model_dir / "char.dic") if char_dim else None
    words = read_dictionary(model_dir / "word.dic") if word_dim else None
    token_path, encoder_path = model_dir / "token_embedder.pkl", model_dir / "encoder.pkl"
    token_state, encoder_state = load_state_dict(token_path), load_state_dict(encoder_path)
    char_rows = _table_rows(token_path, "char_emb_layer.embedding.weight", token_state, chars,
                            CHAR_SPECIALS) if chars is not None else 0
    word_rows = _table_rows(token_path, "word_emb_layer.embedding.weight", token_state, words,
                            WORD_SPECIALS) if words is not None else 0
    config = config_from_network(network, source, char_rows, word_rows)
    state = convert_token_embedder(_Weights(token_state, token_path), config, char_rows, word_rows)
    state.update(convert_encoder(_Weights(encoder_state, encoder_path), config))
    return config, state, chars, words, source


def _make_tokenizer(config: ElmoConfig, chars: dict | None, words: dict | None, word_split: str | None = None):
    kwargs = {} if word_split is None else {"word_split": word_split}
    return ElmoManyLangsTokenizer(
        char_dictionary=chars, word_dictionary=words, max_characters_per_token=config.max_characters_per_token,
        **kwargs,
    )


# Ideographs of the CJK Unified Ideographs block and extension A: enough to tell a Chinese word dictionary.
_IDEOGRAPHS = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]{2,}")


def _suggest_word_split(words: dict | None, word_split: str | None) -> None:
    """With the default split, a word dictionary of words of several ideographs is read one ideograph at a time (its
    words are then never found): say once how to split Chinese into its words."""
    if word_split is not None or not words:
        return
    several = sum(1 for word in words if _IDEOGRAPHS.fullmatch(word))
    if several * 20 < len(words):  # under 5%: not a Chinese word dictionary
        return
    notice.info(
        "word.dic holds %s words of several Chinese characters, which the default word split (one token per "
        "ideograph) never produces: for Chinese text convert with --word_split jieba (pip install jieba), or "
        "pass words already split", f"{several:,}")


def convert(model_dir: str | os.PathLike, output_dir: str | os.PathLike, overwrite: bool = False,
            word_split: str | None = None) -> Path:
    """Convert an ELMoForManyLangs model folder to a Hugging Face folder (written atomically).

    `word_split` is the saved tokenizer's split of raw text, a name in `tokenization.WORD_SPLITTERS`; None keeps the
    tokenizer's default (`punctuation`: one token per CJK ideograph) and, for a Chinese word dictionary, logs how
    to choose `jieba` (docs/converting.md says why that is not the default).

    Raises:
        ConversionError: a missing or inconsistent file (named in the message), a pickle that is not a plain state
            dict, an unknown or unusable `word_split`, or `output_dir` exists, is not empty and `overwrite` is False.
    """
    output_dir = check_output_dir(output_dir, overwrite, (model_dir,))
    word_split = checked_word_split(word_split)
    config, state, chars, words, source = read_model(model_dir)
    logger.info(
        "ELMoForManyLangs: %s characters, %s words, %d CNN filters, %d highway, projection %d, cell %d, %d layers",
        "no" if chars is None else len(chars), "no" if words is None else len(words),
        config.num_char_filters if config.char_embedding_dim else 0, config.num_highway_layers,
        config.projection_dim, config.cell_size, config.num_layers,
    )
    _suggest_word_split(words, word_split)
    tokenizer = _make_tokenizer(config, chars, words, word_split)
    config.sentence_boundary_rows = tokenizer.sentence_boundary_rows  # their <bos>/<eos>, for the task heads
    config.tokenizer_class = type(tokenizer).__name__
    config.validate()
    model = build_model(config, state)
    card = {
        "description": "Converted from an ELMoForManyLangs model (HIT-SCIR, Che et al. 2018) with "
        "`elmo-convert --manylangs_dir`; the training data and procedure are theirs.",
        "model_dir": Path(model_dir).name,
        "network_config": Path(source).name,
    }
    return write_converted(output_dir, model, tokenizer, card, CONVERTER_PARITY, REMOTE_CODE_FILES)


