"""ELMo for Hugging Face transformers: configuration, models and the converter of the original weights.

Importing this package registers the Elmo classes with the transformers Auto classes (in-library), and
marks them for remote code, so that `save_pretrained` copies the modeling files and writes `auto_map`.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

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

# The tokenizer registers itself with AutoTokenizer when imported; do it here too so that `import modeling_elmo`
# is enough for every Auto class. It is absent where only the model files travel (remote code).
try:
    import tokenization  # noqa: F401
except ImportError:
    pass

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
