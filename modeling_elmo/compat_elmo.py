"""What transformers versions name or do differently, in one place: the model and its configuration run unchanged on
transformers 4.46 to the newest 5.x (tests/compat/ runs them on 4.46, 4.53, 5.3, 5.16 and the pinned release).

Each difference is an import tried in order, or a look at what the installed transformers has, with the versions that
need each branch written beside it. Nothing else in the package asks which transformers it runs on.

This file travels to the Hub as remote code: it imports only the standard library, torch and transformers.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
from dataclasses import is_dataclass
from functools import wraps

import torch
import transformers
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import logging

logger = logging.get_logger(__name__)

try:  # transformers >= 5.0: helpers that write a tensor only where the checkpoint did not fill it
    from transformers import initialization as init
except ImportError:  # 4.x: torch's own; 4.x calls `_init_weights` only on modules whose weights were not all loaded

    class _TorchInit:
        """`torch.nn.init`, with the `copy_` of transformers 5's helpers."""

        @staticmethod
        @torch.no_grad()
        def copy_(tensor: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
            return tensor.copy_(values)

        def __getattr__(self, name: str):
            return getattr(torch.nn.init, name)

    init = _TorchInit()

try:  # transformers >= 4.51
    from transformers.utils.generic import can_return_tuple
except ImportError:  # 4.46 - 4.50: the same decorator, as 4.51 wrote it

    def can_return_tuple(forward):
        """`forward` gives a tuple (its output's `to_tuple()`) when `return_dict=False` is passed or configured."""

        @wraps(forward)
        def wrapper(self, *args, **kwargs):
            return_dict = self.config.return_dict if hasattr(self, "config") else True
            passed = kwargs.pop("return_dict", return_dict)
            if passed is not None:
                return_dict = passed
            output = forward(self, *args, **kwargs)
            return output.to_tuple() if not return_dict and not isinstance(output, tuple) else output

        return wrapper


# transformers >= 5.0 passes `_initialize_weights` whether the model is custom code, and then skips the modules of
# custom code that own no parameter directly (the character encoder, a highway layer), whose initialisation would never
# run: `ElmoPreTrainedModel` passes False instead, safe because every write goes through `init` above. 4.x has no
# such argument.
INITIALIZE_WEIGHTS_ARGS = (False,) if "is_custom_code" in inspect.signature(
    PreTrainedModel._initialize_weights).parameters else ()

# transformers >= 4.50 renames a checkpoint's weights as it loads them by the `key_mapping` given to `from_pretrained`
# (regular expression -> replacement); 4.46 - 4.49 know no such argument (and pass it on to the model's `__init__`).
try:
    FROM_PRETRAINED_TAKES_KEY_MAPPING = "key_mapping" in inspect.getsource(PreTrainedModel.from_pretrained)
except (OSError, TypeError):  # no source to read (a frozen installation): by the version
    FROM_PRETRAINED_TAKES_KEY_MAPPING = tuple(map(int, re.findall(r"\d+", transformers.__version__)[:2])) >= (4, 50)

# transformers >= 5.0 keeps the renamings a checkpoint was loaded with and undoes them when saving, unless
# `save_original_format=False` (a keyword 4.x does not know): the project's renamings of old names are never undone.
SAVE_PRETRAINED_KEEPS_NAMES = {"save_original_format": False} if "save_original_format" in inspect.signature(
    PreTrainedModel.save_pretrained).parameters else {}

# transformers >= 5.6 makes every configuration class a dataclass of its annotated fields, whose `__init__` sets them
# and passes the other keywords to `__post_init__`, which ends in the base class's `__post_init__`. Before (4.x, and
# 5.0 - 5.5) `PretrainedConfig.__init__(**kwargs)` sets every keyword as an attribute: `config_fields` gives such a
# class the same `__init__`, and `finish_config` calls the base class's part in either case.
CONFIGS_ARE_DATACLASSES = is_dataclass(PretrainedConfig)


def config_fields(cls: type) -> type:
    """The class decorator of a configuration declared as annotated fields with defaults (see above)."""
    if CONFIGS_ARE_DATACLASSES:
        return cls
    declared = {name: getattr(cls, name) for klass in reversed(cls.__mro__) if issubclass(klass, PretrainedConfig)
                for name in inspect.get_annotations(klass) if name in vars(klass) and klass is not PretrainedConfig}

    def __init__(self, **kwargs):
        for name, default in declared.items():
            setattr(self, name, kwargs.pop(name) if name in kwargs else copy.deepcopy(default))
        self.__post_init__(**kwargs)

    cls.__init__ = __init__
    return cls


def finish_config(config: PretrainedConfig, kwargs: dict) -> None:
    """The base class's part of a configuration's construction, once the class's own fields are set."""
    if CONFIGS_ARE_DATACLASSES:
        PretrainedConfig.__post_init__(config, **kwargs)
    else:
        PretrainedConfig.__init__(config, **kwargs)


def warn_dotted_folder(folder: str | os.PathLike) -> None:
    """A warning where the name of `folder`, about to hold remote code, has a dot: transformers 4.x (4.46 tested) names
    the module of a folder's code after the folder, and a dot there splits it (`elmo-v1.0` -> `No module named
    'transformers_modules.elmo-v1'`), so such a folder never loads with `trust_remote_code=True` there; 5.x replaces
    the dot. The saving stack does not matter: the loading one does. A hidden folder (a leading dot) is a staging one
    that a command renames into place (`elmo-convert`): the command asks about the final name itself."""
    name = os.path.basename(os.path.normpath(os.fspath(folder)))
    if not name.startswith(".") and "." in name:
        logger.warning(f"{folder}: transformers 4.x cannot load a folder whose name has a dot with "
                       f"trust_remote_code=True (No module named 'transformers_modules.{name.split('.')[0]}'); "
                       f"name it without dots (e.g. {name.replace('.', '_')!r}) where 4.x users will load it")
