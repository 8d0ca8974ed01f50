"""ELMo for Hugging Face transformers: the configuration and the models, the files that travel to the Hub as remote
code.

Importing this package registers the Elmo classes and the tokenizers with the transformers Auto classes
(in-library), and marks the models for remote code, so that `save_pretrained` copies the modeling files and
writes `auto_map`. Which class goes with which Auto class is written once, in `configuration_elmo.ELMO_CLASSES`,
and every class there is exported from here.
Dependencies run one way: `modeling_elmo` -> `tokenization`, never back.
"""

import importlib

import transformers
from transformers import AutoConfig, AutoTokenizer

from elmo_hf.tokenization import ElmoManyLangsTokenizer, ElmoTokenizer, ElmoTokenizerFast

from .configuration_elmo import AUTO_CLASSES, AUTO_MAP, ELMO_CLASSES, ElmoConfig
from .downstream_elmo import ElmoRepresentationsOutput, ElmoScalarMix
from .modeling_elmo import ElmoForPreTrainingOutput, ElmoModelOutput, ElmoPreTrainedModel
from .modeling_elmo_heads import ElmoPreTrainedModelForTasks


def _register_elmo_classes() -> list[str]:
    """Every row of `ELMO_CLASSES`: the class with its Auto class (in-library), marked for remote code (under its
    `auto_map_key` where it has no Auto class), and exported from this package; returns their names."""
    AutoConfig.register("elmo", ElmoConfig, exist_ok=True)
    ElmoConfig.register_for_auto_class()
    names = []
    for row in ELMO_CLASSES:
        module, name = row.path.split(".")
        model_class = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        if row.auto_class is None:  # no Auto class to register with: saved folders name it by its own name
            model_class._auto_class = row.auto_map_key
        else:
            getattr(transformers, row.auto_class).register(ElmoConfig, model_class, exist_ok=True)
            model_class.register_for_auto_class(row.auto_class)
        globals()[name] = model_class
        names.append(name)
    return names


_CLASS_NAMES = _register_elmo_classes()

# The tokenizers live one level down (`tokenization` imports nothing from this package); they are registered here,
# against ElmoConfig, so that `import elmo_hf.modeling_elmo` is enough for every Auto class. Both classes must be found
# by name (tokenizer_config.json names one); the last registration is the default for ElmoConfig.
# `slow_tokenizer_class` is the keyword of every transformers from 4.46 on (5.x names it `tokenizer_class` and still
# takes this one, the same way).
AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=ElmoManyLangsTokenizer, exist_ok=True)
AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=ElmoTokenizer, fast_tokenizer_class=ElmoTokenizerFast,
                       exist_ok=True)
# ElmoTokenizerFast is ElmoTokenizer's fast class: what AutoTokenizer returns by default (transformers 5 always gives
# the fast class where one is registered, use_fast=False is ignored; 4.x defaults to use_fast=True), as transformers'
# users expect (word_ids(), offsets, the example scripts' isinstance check). Its plain calls run on ElmoTokenizer's
# path at its speed; the project's own commands still load ElmoTokenizer (tools/loading.py), faster on windows and
# offsets.

__all__ = [
    "AUTO_CLASSES",
    "AUTO_MAP",
    "ELMO_CLASSES",
    "ElmoConfig",
    "ElmoModelOutput",
    "ElmoForPreTrainingOutput",
    "ElmoPreTrainedModel",
    "ElmoPreTrainedModelForTasks",
    "ElmoRepresentationsOutput",
    "ElmoScalarMix",
    *_CLASS_NAMES,  # ElmoModel, ElmoForPreTraining and the task heads, from ELMO_CLASSES
]
