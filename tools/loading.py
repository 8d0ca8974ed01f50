"""One way to load an ELMo model and its tokenizer, used by every command (`elmo-embed`, `elmo-analyze`, the
fine-tuning commands, the demo):

    from elmo_hf.tools.loading import load_elmo
    model, tokenizer = load_elmo("outputs/demo/model")                       # a folder
    model, tokenizer = load_elmo("owner/elmo-small", trust_remote_code=True)  # a Hub id
    model, tokenizer = load_elmo("tiny", task="sequence-classification")     # a preset: random weights

`name_or_path` is, in this order:

* a folder: it must hold `config.json` (of an ELMo model); its tokenizer files give the tokenizer, and a folder
  without them gets a default `ElmoTokenizer` of the model's `max_characters_per_token` (logged);
* a preset name of `configuration_elmo.PRESETS` (`tiny`, `small`, `medium`, `original`), when no such folder
  exists: a model of that size with random weights, drawn after `torch.manual_seed(seed)` and logged as random
  (not a trained model), with the default `ElmoTokenizer`;
* a Hub id (`owner/name`): `from_pretrained`; absent, private or offline, it is a one-line error. A name that
  looks like a local path (it starts with `.`, `/` or `~`, has another number of `/` than one, or its `owner` is a
  local folder: `outputs/modle`) and names nothing is refused at once, without a Hub request; where the Hub's host
  name does not resolve (offline), a Hub id not in the Hugging Face cache is refused at once too.

`task` picks the class through the transformers Auto classes, which `import elmo_hf.modeling_elmo` registers (and which
load a Hub model's own code with `trust_remote_code=True`): see `TASKS`. A head that transformers has no Auto class for
(`auto_class` None in `ELMO_CLASSES`: semantic role labelling) loads the same way through `HeadLoader`. An
ELMoForManyLangs model (`token_encoder == "word_char"`, written by `convert_elmoformanylangs`) gets its
`ElmoManyLangsTokenizer` from its saved dictionaries. `weights_fingerprint(model)` names loaded weights by their bytes
(elmo-embed's `--resume`, the export's cache), here because both features read it and neither imports the other for it.

Every failure is a `ModelLoadError` (a `ValueError`) whose message is one line naming `name_or_path` and what is
accepted; each command reports it as its own exit-2 error. This module does not travel as remote code.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch
import transformers
from safetensors import SafetensorError

from elmo_hf.modeling_elmo.configuration_elmo import PRESETS, TASK_CLASSES, ElmoConfig
from elmo_hf.tokenization import ElmoManyLangsTokenizer, ElmoTokenizer, ElmoTokenizerFast, WordSplitError

from .core.errors import InputError

logger = logging.getLogger(__name__)


# The tasks without a head: the biLM alone, and the biLM with its language-model softmax.
MODEL_TASKS: dict[str | None, str] = {None: "AutoModel", "model": "AutoModel",
                                      "pre-training": "AutoModelForPreTraining"}


class _Tasks(Mapping):
    """task -> the name of the Auto class that loads it (registered for ElmoConfig by `import elmo_hf.modeling_elmo`):
    `MODEL_TASKS`, then one per task head of `elmo_hf.modeling_elmo.configuration_elmo.ELMO_CLASSES`
    ("sequence-classification", "token-classification", ...), read at each use (`TASK_CLASSES`); for a head without
    an Auto class, its class's name (its key in `auto_map`)."""

    def _table(self) -> dict[str | None, str]:
        return {**MODEL_TASKS, **{name: row.auto_map_key for name, row in TASK_CLASSES.items()}}

    def __getitem__(self, task: str | None) -> str:
        return self._table()[task]

    def __iter__(self) -> Iterator[str | None]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return repr(self._table())


TASKS: Mapping[str | None, str] = _Tasks()


class HeadLoader:
    """Loads a head of `ELMO_CLASSES` that has no transformers Auto class as an Auto class would: `from_config`, and
    `from_pretrained`, which with `trust_remote_code=True` takes the class of the folder's own code (its config's
    `auto_map`, under the class's name), else the installed one."""

    def __init__(self, row):
        self.row = row
        self.__name__ = row.auto_map_key

    def installed(self) -> type:
        import elmo_hf.modeling_elmo as modeling

        return getattr(modeling, self.__name__)

    def from_config(self, config):
        return self.installed()._from_config(config)

    def from_pretrained(self, name: str, *, config, trust_remote_code: bool = False, **kwargs):
        reference = (getattr(config, "auto_map", None) or {}).get(self.__name__)
        if trust_remote_code and reference:
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            return get_class_from_dynamic_module(reference, name).from_pretrained(name, config=config, **kwargs)
        return self.installed().from_pretrained(name, config=config, **kwargs)


def model_loader(task: str | None):
    """What loads the model of `task` (a key of `TASKS`): its transformers Auto class, or a `HeadLoader`."""
    row = TASK_CLASSES.get(task) if task is not None else None
    if row is not None and row.auto_class is None:
        return HeadLoader(row)
    return getattr(transformers, TASKS[task])
# What from_pretrained raises for files it cannot use: an OSError (missing, unreadable) or a ValueError (a JSON file
# that does not parse, a configuration that does not validate). A TypeError or a KeyError from inside it is a fault of
# the code (a head's constructor, a tokenizer's), reported with its traceback, never as the model's.
_ERRORS = (OSError, ValueError)


class ModelLoadError(InputError):
    """`load_elmo` cannot load what it was given: one line naming it and what is accepted."""


def load_elmo(
    name_or_path: str | Path,
    task: str | None = None,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    seed: int | None = 0,
    config_overrides: Mapping | None = None,
    trust_remote_code: bool = False,
    tokenizer_name: str | None = None,
    ignore_mismatched_sizes: bool = False,
    output_loading_info: bool = False,
):
    """An ELMo model (in eval mode) and its tokenizer, from a folder, a preset name or a Hub id (module docstring).

    Args:
        name_or_path: a model folder, a preset name (random weights) or a Hub id.
        task: None or "model" (`ElmoModel`), "pre-training" (`ElmoForPreTraining`), or a fine-tuning task of
            `ELMO_CLASSES` ("sequence-classification", "token-classification", ...): `TASKS` here.
        device, dtype: where and in which dtype the model is put (default: as loaded, on the CPU); `dtype` a
            `torch.dtype` or its name ("bfloat16", "torch.bfloat16"). A device this torch cannot use (`"cuda"`
            without a GPU) is refused before anything is loaded.
        seed: the seed of a preset's random weights (None: the current random state).
        config_overrides: config fields set over the saved config or the preset (e.g. a head's `id2label`),
            then validated.
        trust_remote_code: let a Hub model run its own code (its config, model and tokenizer classes).
        tokenizer_name: a tokenizer folder or Hub id, when not the model's own.
        ignore_mismatched_sizes: re-initialise saved weights of another shape (a classifier of other labels).
        output_loading_info: return `from_pretrained`'s loading info too: a dict of `missing_keys` (initialised
            here), `unexpected_keys` (saved, not used), `mismatched_keys` (`(key, saved shape, shape)`,
            re-initialised) and `error_msgs`; None for a preset, whose weights are all drawn here.

    Returns:
        `(model, tokenizer)`, or `(model, tokenizer, loading_info)` with `output_loading_info`.

    Raises:
        ModelLoadError: nothing loadable under `name_or_path`, an unknown `task`, overrides that do not give a
            valid config, saved weights of other shapes than the config gives (without `ignore_mismatched_sizes`),
            or a `device` / `dtype` that cannot be used.
    """
    name = str(name_or_path)
    if task not in TASKS:
        raise ModelLoadError(f"task {task!r} is not one of {[t for t in TASKS if t is not None]} (or None)")
    auto_class = model_loader(task)
    device, dtype = checked_device(device), _checked_dtype(dtype)
    overrides = dict(config_overrides or {})
    if "id2label" in overrides and "label2id" not in overrides:  # never beside the saved label2id of other labels
        overrides["label2id"] = {label: int(i) for i, label in overrides["id2label"].items()}
    path = Path(name)
    preset = name in PRESETS and not path.exists()
    if preset:
        model, info = _random_model(name, auto_class, overrides, seed), None
    else:
        _check_name(name, path)
        model, info = _pretrained_model(name, auto_class, overrides, trust_remote_code, ignore_mismatched_sizes)
    tokenizer = _tokenizer(name, model.config, tokenizer_name, trust_remote_code, preset)
    if device is not None or dtype is not None:
        try:
            model = model.to(device=device, dtype=dtype)
        except (RuntimeError, AssertionError) as error:  # torch asserts on a backend it was not built with
            raise ModelLoadError(f"cannot put {name} on device {device} as {dtype}: {_first_line(error)}") from error
    return (model.eval(), tokenizer, info) if output_loading_info else (model.eval(), tokenizer)


def _checked_dtype(dtype) -> torch.dtype | None:
    """A `torch.dtype`, or its name as `AutoModel.from_pretrained(dtype=...)` takes it ("bfloat16")."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, dtype.removeprefix("torch."), None) if isinstance(dtype, str) else None
    if not isinstance(value, torch.dtype):
        raise ModelLoadError(f"dtype {dtype!r} is not a torch dtype: give e.g. torch.bfloat16 or \"bfloat16\"")
    return value


def checked_device(device, option: str = "device") -> torch.device | None:
    """`device` as a `torch.device`, refused in one line (`ModelLoadError`, naming `option`) when torch does not know
    the name (`gpu`) or cannot use it here: a CPU-only build, no GPU, an index beyond the GPUs. Used by `load_elmo`
    and by the commands' `--device` (elmo-analyze; elmo-embed through `embed_io.checked_device`)."""
    if device is None:
        return None
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ModelLoadError(f"{option} {str(device)!r} is not a device name (cpu, cuda, cuda:1, mps, ...)") from None
    backend = {"cuda": torch.cuda, "mps": getattr(torch.backends, "mps", None),
               "xpu": getattr(torch, "xpu", None)}.get(device.type)
    if backend is not None and not backend.is_available():
        reason = "this torch is built without CUDA" if device.type == "cuda" and torch.version.cuda is None else \
            f"torch {torch.__version__} sees no {device.type} device"
        raise ModelLoadError(f"{option} {device}: not available here ({reason}); use cpu, or run where that device is")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ModelLoadError(f"{option} {device}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as error:  # torch says "not compiled with ..." with an AssertionError
        raise ModelLoadError(f"{option} {device} is not usable here: {_first_line(error)}") from error
    return device


def _accepted() -> str:
    return f"a model folder with config.json, a Hub id (owner/name) or a preset ({', '.join(sorted(PRESETS))})"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _check_name(name: str, path: Path) -> None:
    """A name that looks like a local path and names nothing is refused at once, without a Hub request (which,
    offline, would be retried for half a minute): only a valid `owner/name` whose `owner` is not a local folder
    goes to the Hub. `outputs/modle`, with an `outputs/` folder here, is a mistyped folder, not a Hub id."""
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"cannot load an ELMo model from {name}: the folder has no config.json; "
                                 f"give {_accepted()}")
        return
    if path.exists():
        raise ModelLoadError(f"cannot load an ELMo model from {name}: a file, not a folder; give {_accepted()}")
    if name.startswith((".", "/", "~")) or "\\" in name or name.count("/") != 1:
        raise ModelLoadError(f"model {name} not found: give {_accepted()}")
    owner = name.split("/")[0]
    if Path(owner).is_dir():
        raise ModelLoadError(f"model {name} not found: the folder {owner} has no {name.split('/')[1]} (a Hub id "
                             f"is tried only when no local folder {owner} exists); give {_accepted()}")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ModelLoadError(f"model {name} not found: not a folder, and not a valid Hub id; "
                             f"give {_accepted()}") from None


def _random_model(name: str, auto_class, overrides: dict, seed: int | None):
    try:
        config = ElmoConfig.from_preset(name, **overrides)
    except ValueError as error:  # an override the configuration refuses
        raise ModelLoadError(f"preset {name} with {sorted(overrides)}: {_first_line(error)}") from error
    if seed is not None:
        torch.manual_seed(seed)
    logger.warning("%s: a preset, so RANDOM weights (seed %s), not a trained model", name, seed)
    return auto_class.from_config(config)


def _hub_host_unresolvable() -> str | None:
    """The Hub's host name when it does not resolve (offline, no DNS) and no proxy would resolve it instead; else
    None. A name lookup, not a request: it answers at once where the Hub client would retry for half a minute."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or urllib.request.getproxies().get("https"):
        return None
    host = urlsplit(constants.ENDPOINT).hostname
    try:
        socket.getaddrinfo(host, 443)
    except (OSError, UnicodeError):
        return host
    return None


def _pretrained_model(name: str, auto_class, overrides: dict, trust_remote_code: bool, ignore_mismatched_sizes: bool):
    """`(model, loading_info)` from a folder or a Hub id."""
    host = None if Path(name).is_dir() else _hub_host_unresolvable()
    if host is not None:
        try:  # only the Hugging Face cache can still serve it
            transformers.AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code, local_files_only=True)
        except _ERRORS:
            raise ModelLoadError(f"cannot load an ELMo model from {name}: {host} cannot be reached (its name does not "
                                 f"resolve: offline?) and the model is not in the Hugging Face cache; "
                                 f"give {_accepted()}") from None
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code, **overrides)
    except _ERRORS as error:
        raise ModelLoadError(f"cannot load an ELMo model from {name}: {_first_line(error)}; "
                             f"give {_accepted()}") from error
    if getattr(config, "model_type", None) != "elmo":
        raise ModelLoadError(f"{name} holds a {getattr(config, 'model_type', None)!r} model, not an ELMo model")
    if overrides and hasattr(config, "validate"):
        try:
            config.validate()  # the overrides were set after the config's own checks
        except ValueError as error:
            raise ModelLoadError(f"{name}: {_first_line(error)}") from error
    try:
        return auto_class.from_pretrained(name, config=config, trust_remote_code=trust_remote_code,
                                          ignore_mismatched_sizes=ignore_mismatched_sizes, output_loading_info=True)
    except RuntimeError as error:
        if "mismatch" not in str(error):  # not a file it cannot use: a fault of the code, with its traceback
            raise
        # transformers' message points to a report that a quiet console does not show: say what it means
        raise ModelLoadError(f"cannot load {name} as {auto_class.__name__}: some saved weights have other shapes "
                             f"than its config gives (a head of another number of labels or another pooling?); "
                             f"ignore_mismatched_sizes=True re-initialises them") from error
    except SafetensorError as error:  # a truncated or damaged weight file, where the class is not ours (remote code)
        weights = sorted(Path(name).glob("*.safetensors")) if Path(name).is_dir() else []
        where = ", ".join(str(path) for path in weights) or name
        raise ModelLoadError(f"cannot read the weights of {name} ({where}): {_first_line(error)}; the file is damaged "
                             "or incomplete (an interrupted copy or download?)") from error
    except _ERRORS as error:
        raise ModelLoadError(f"cannot load an ELMo model from {name}: {_first_line(error)}") from error


def _default_tokenizer(config) -> ElmoTokenizer:
    return ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)


def _slow_twin(tokenizer, name: str):
    """`ElmoTokenizer` where AutoTokenizer gave the installed `ElmoTokenizerFast` (its default since the fast class is
    registered): the same outputs, and the commands' calls with truncation, windows or offsets run 1.3-3x faster on
    it (benchmarks/results_tokenizer.md). A tokenizer loaded as remote code is left as it is."""
    if type(tokenizer) is ElmoTokenizerFast:
        return ElmoTokenizer.from_pretrained(name)
    return tokenizer


def _tokenizer(name: str, config, tokenizer_name: str | None, trust_remote_code: bool, preset: bool):
    """`tokenizer_name`'s tokenizer, or the one saved with the model; a default `ElmoTokenizer` for a preset and
    where none is saved."""
    manylangs = getattr(config, "token_encoder", "char_cnn") == "word_char"  # reads rows of its own dictionaries
    if tokenizer_name is not None:
        try:
            loaded = transformers.AutoTokenizer.from_pretrained(tokenizer_name, trust_remote_code=trust_remote_code)
            return _slow_twin(loaded, tokenizer_name)
        except _ERRORS as error:
            raise ModelLoadError(f"cannot load the tokenizer {tokenizer_name}: {_first_line(error)}") from error
    if preset:
        return _default_tokenizer(config)
    saved = not Path(name).is_dir() or (Path(name) / "tokenizer_config.json").is_file()
    if saved:
        try:
            if manylangs:
                return ElmoManyLangsTokenizer.from_pretrained(name)
            loaded = transformers.AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
            return _slow_twin(loaded, name)
        except WordSplitError as error:  # its own split, unusable here: never silently another split
            raise ModelLoadError(f"cannot load the tokenizer of {name}: {_first_line(error)}") from error
        except _ERRORS as error:
            if manylangs:
                raise ModelLoadError(f"cannot load the ELMoForManyLangs tokenizer of {name} (its dictionaries): "
                                     f"{_first_line(error)}") from error
            if Path(name).is_dir() or not isinstance(error, OSError):  # its files are there: never another tokenizer
                raise ModelLoadError(f"cannot load the tokenizer of {name} (its tokenizer_config.json and the files it "
                                     f"names): {_first_line(error)}") from error
            return _unsaved_tokenizer(name, config, f" ({_first_line(error)})")
    if manylangs:
        raise ModelLoadError(f"{name} holds an ELMoForManyLangs model but not its tokenizer files (its dictionaries)")
    return _unsaved_tokenizer(name, config)


def _unsaved_tokenizer(name: str, config, why: str = ""):
    """The default tokenizer for a model saved without its tokenizer, said in a warning: the word split lives in
    tokenizer_config.json, so a model trained with another split (jieba, whitespace) would read other words."""
    tokenizer = _default_tokenizer(config)
    logger.warning("%s has no tokenizer files%s: its text is split into words by the default tokenizer's %r split; "
                   "if the model was trained with another, give its tokenizer (--tokenizer_name) or save it beside "
                   "the model", name, why, tokenizer.word_split)
    return tokenizer


def weights_fingerprint(model) -> str:
    """A digest of the model's tensors (names, dtypes, shapes and bytes), for `--resume` to refuse other weights
    behind the same name and config (a model folder whose safetensors was replaced). Hashing is far cheaper than
    embedding: well under a second for the largest ELMo. Taken before `--dtype int8` quantizes the model."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).contiguous().view(torch.uint8).cpu().numpy())
    return digest.hexdigest()[:16]
