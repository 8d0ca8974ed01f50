"""ELMo for Hugging Face transformers: configuration, models and the converter of the original weights.

Importing this package registers the Elmo classes and the tokenizers with the transformers Auto classes
(in-library), and marks the models for remote code, so that `save_pretrained` copies the modeling files and
writes `auto_map`. Dependencies run one way: `modeling_elmo` -> `tokenization`, never back.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from tokenization import ElmoManyLangsTokenizer, ElmoTokenizer

from .configuration_elmo import ElmoConfig
from .modeling_elmo import (
    ElmoForPreTraining,
    ElmoForPreTrainingOutput,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoModelOutput,
    ElmoPreTrainedModel,
    ElmoPreTrainedModelForTasks,
    ElmoRepresentationsOutput,
    ElmoScalarMix,
)

AutoConfig.register("elmo", ElmoConfig, exist_ok=True)
AutoModel.register(ElmoConfig, ElmoModel, exist_ok=True)
AutoModelForPreTraining.register(ElmoConfig, ElmoForPreTraining, exist_ok=True)
AutoModelForSequenceClassification.register(ElmoConfig, ElmoForSequenceClassification, exist_ok=True)
AutoModelForTokenClassification.register(ElmoConfig, ElmoForTokenClassification, exist_ok=True)

ElmoConfig.register_for_auto_class()
ElmoModel.register_for_auto_class("AutoModel")
ElmoForPreTraining.register_for_auto_class("AutoModelForPreTraining")
ElmoForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
ElmoForTokenClassification.register_for_auto_class("AutoModelForTokenClassification")

# The tokenizers live one level down (`tokenization` imports nothing from this package); they are registered here,
# against ElmoConfig, so that `import modeling_elmo` is enough for every Auto class. Both classes must be found by
# name (tokenizer_config.json names one); the last registration is the default for ElmoConfig.
AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoManyLangsTokenizer, exist_ok=True)
AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)

__all__ = [
    "ElmoConfig",
    "ElmoModel",
    "ElmoModelOutput",
    "ElmoForPreTraining",
    "ElmoForPreTrainingOutput",
    "ElmoPreTrainedModel",
    "ElmoPreTrainedModelForTasks",
    "ElmoRepresentationsOutput",
    "ElmoScalarMix",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
]
