"""ELMo for Hugging Face transformers: configuration, models and the converter of the original weights.

Importing this package registers the Elmo classes with the transformers Auto classes (in-library), and
marks them for remote code, so that `save_pretrained` copies the modeling files and writes `auto_map`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForPreTraining

from .configuration_elmo import ElmoConfig
from .modeling_elmo import (
    ElmoForPreTraining,
    ElmoForPreTrainingOutput,
    ElmoModel,
    ElmoModelOutput,
    ElmoPreTrainedModel,
)

AutoConfig.register("elmo", ElmoConfig, exist_ok=True)
AutoModel.register(ElmoConfig, ElmoModel, exist_ok=True)
AutoModelForPreTraining.register(ElmoConfig, ElmoForPreTraining, exist_ok=True)

ElmoConfig.register_for_auto_class()
ElmoModel.register_for_auto_class("AutoModel")
ElmoForPreTraining.register_for_auto_class("AutoModelForPreTraining")

__all__ = [
    "ElmoConfig",
    "ElmoModel",
    "ElmoModelOutput",
    "ElmoForPreTraining",
    "ElmoForPreTrainingOutput",
    "ElmoPreTrainedModel",
]
