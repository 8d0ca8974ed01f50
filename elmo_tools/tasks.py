"""The fine-tuning tasks, one row each: what drives a task head's command, its `--help`, `load_elmo(task=...)` and
the model card's fine-tuning section.

    from elmo_tools.tasks import TASKS
    row = TASKS["token-classification"]
    row.head_class, row.command, row.module       # "ElmoForTokenClassification", "elmo-finetune-ner", "train.finetune_ner"

Standard library only: the commands' `--help` reads this table before torch is imported. The rows name code by
strings, as console scripts name their functions (`elmo_tools` never imports `train`):

* `module`: the task's parts (readers, encoder, collator, metrics, prediction writer), the protocol
  `train.finetune_run.TaskParts`; it imports torch, transformers and datasets at its top.
* `data_arguments`: `"module:Class"`, the dataclass of the task's data options, in a module that imports only the
  standard library (the command's `--help` lists its fields).
* `auto_class` / `head_class`: a row of `modeling_elmo.configuration_elmo.AUTO_CLASSES`, which registers the class
  with transformers (tests/test_tasks.py checks that every head there has its row here, and every row its head).

A new head is a class in `modeling_elmo/modeling_elmo_heads.py` with its row of `AUTO_CLASSES`, a row here, its task
module (and its data options, unless it shares another task's), and a console script in pyproject.toml with its
door in `train/finetune_cli.py`: docs/finetuning.md, "A new task".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# The card's example for a task whose examples are sentences with one label each; `{auto_class}` and `{model_id}`
# are filled in by the card (`elmo_tools.hub_utils`).
SENTENCE_CARD_EXAMPLE = """\
from transformers import {auto_class}, AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("{model_id}", trust_remote_code=True)
model = {auto_class}.from_pretrained("{model_id}", trust_remote_code=True, num_labels=2)

def encode(batch):
    return tokenizer(batch["text"], truncation=True, max_length=128)

train_dataset = dataset["train"].map(encode, batched=True)  # a datasets.Dataset with "text" and "label"
trainer = Trainer(
    model=model,
    args=TrainingArguments(output_dir="elmo-finetuned", learning_rate=1e-3, num_train_epochs=3),
    train_dataset=train_dataset,
    processing_class=tokenizer,
)
trainer.train()
"""


@dataclass(frozen=True)
class FineTuningTask:
    """One fine-tuning task: its head, its command, the module of its parts, and the words and defaults its
    command, `--help` and the model card use."""

    name: str  # the task as transformers names it, and `load_elmo(task=...)` takes it: "sequence-classification"
    head_class: str  # "ElmoForSequenceClassification"
    auto_class: str  # "AutoModelForSequenceClassification": the key of its row of AUTO_CLASSES
    command: str  # the console script: "elmo-finetune-classification"
    module: str  # the task's parts (`train.finetune_run.TaskParts`): "train.finetune_classification"
    data_arguments: str  # "module:Class": the dataclass of its data options (standard library only)
    head_name: str  # what the messages call the head: "the classification head"
    labels: str  # what its labels are called in messages: "labels", "tags"
    examples: str  # what its examples are called: "examples", "sentences"
    head_option: str  # the config field that shapes a new head, also an option: "classifier_pooling"
    head_default: str  # its value for a new head (a fine-tuned folder keeps its own)
    head_help: str  # the values of `head_option`, for --help: "mean, max, lstm or attention"
    # `TrainingArguments` defaults of the command where transformers' own (made for a fine-tuned transformer) leave
    # a head on a frozen biLM almost untrained: benchmarks/bench_finetune.md
    training_defaults: Mapping[str, float | int] = field(hash=False)
    epochs_note: str  # appended to --num_train_epochs' help
    description: str  # the first paragraph of --help
    card_task: str  # the model card: "`AutoModelForSequenceClassification` for {card_task}"
    card_example: str | None = None  # the model card's code, `{auto_class}` and `{model_id}` filled in


TASKS: dict[str, FineTuningTask] = {
    row.name: row
    for row in (
        FineTuningTask(
            name="sequence-classification",
            head_class="ElmoForSequenceClassification",
            auto_class="AutoModelForSequenceClassification",
            command="elmo-finetune-classification",
            module="train.finetune_classification",
            data_arguments="train.finetune_arguments:ClassificationDataArguments",
            head_name="classification",
            labels="labels",
            examples="examples",
            head_option="classifier_pooling",
            head_default="lstm",
            head_help="mean, max, lstm or attention",
            training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 10.0,
                                                "per_device_train_batch_size": 16, "warmup_steps": 0.1}),
            epochs_note="",
            description="Fine-tune an ELMo sentence (or sentence-pair) classifier (`ElmoForSequenceClassification`) "
                        "with `transformers.Trainer`,\nand label new sentences with it. A second text column "
                        "(text_pair, sentence2, hypothesis, ...) trains\nthe pair head; numeric labels a regression.",
            card_task="text classification",
            card_example=SENTENCE_CARD_EXAMPLE,
        ),
        FineTuningTask(
            name="token-classification",
            head_class="ElmoForTokenClassification",
            auto_class="AutoModelForTokenClassification",
            command="elmo-finetune-ner",
            module="train.finetune_ner",
            data_arguments="train.finetune_arguments:TaggingDataArguments",
            head_name="tagging",
            labels="tags",
            examples="sentences",
            head_option="token_classifier_encoder",
            head_default="lstm",
            head_help="none (linear) or lstm (biLSTM)",
            # a tagger's biLSTM needs more updates before it tags anything but O: 20 epochs of 8 sentences
            training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 20.0,
                                                "per_device_train_batch_size": 8, "warmup_steps": 0.1}),
            epochs_note="; more on a small training set: --min_train_steps",
            description="Fine-tune an ELMo tagger (`ElmoForTokenClassification`), e.g. for NER, with "
                        "`transformers.Trainer`, and tag new\nsentences with it.",
            card_task="token classification (e.g. NER, POS)",
        ),
        FineTuningTask(
            name="question-answering",
            head_class="ElmoForQuestionAnswering",
            auto_class="AutoModelForQuestionAnswering",
            command="elmo-finetune-qa",
            module="train.finetune_qa",
            data_arguments="train.finetune_arguments:QuestionAnsweringDataArguments",
            head_name="question-answering",
            labels="answers",
            examples="questions",
            head_option="qa_modeling_layer",
            head_default="lstm",
            head_help="lstm (BiDAF's modelling biLSTM over the passage) or none",
            # the attention and span layers train fast; a biLSTM over 256-word windows makes every step slow
            training_defaults=MappingProxyType({"learning_rate": 2e-3, "num_train_epochs": 5.0,
                                                "per_device_train_batch_size": 16, "warmup_steps": 0.1}),
            epochs_note="",
            description="Fine-tune ELMo for extractive question answering (`ElmoForQuestionAnswering`, BiDAF-style "
                        "attention between\nquestion and passage) on SQuAD v1.1/v2.0 JSON or JSON lines with "
                        "`transformers.Trainer`, and answer new\nquestions with it (predictions.json: id -> answer).",
            card_task="extractive question answering (SQuAD)",
        ),
    )
}

