"""transformers' own common model tests (`ModelTesterMixin`, `ConfigTester`) on every Elmo class of `ELMO_CLASSES`.

Every model inside transformers passes `tests/test_modeling_common.py` and `tests/test_configuration_common.py`: the
ecosystem's definition of "follows the PreTrainedModel API" (save/load, safetensors, loading info, determinism,
hidden states, training, embeddings accessors, ...). Both files come from the source distribution of the installed
transformers (`transformers_sources.py`: fetched once with pip; without the index the module skips, saying so).
The tagger runs twice: as configured by default (a softmax per word) and with its CRF (`ElmoCRFTaggerCommonTest`).

The mixin's tests that cannot apply to ELMo (attention, accelerators, rotary embeddings, experts, ...) are listed in
`NOT_APPLICABLE` with the reason, and removed from the classes rather than skipped when they run, so that a skip in the
suite means a missing optional thing.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import unittest
import unittest.mock

import pytest
import torch
from conftest import random_char_ids
from transformers_sources import fetch_reason, import_transformers_tests

from elmo_hf.modeling_elmo import AUTO_MAP, ElmoConfig
from elmo_hf.modeling_elmo.configuration_elmo import PRESETS

pytestmark = pytest.mark.slow  # about 30 s: some 180 tests, each saving and loading every class

_reason = fetch_reason()
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)
modeling_common, configuration_common = import_transformers_tests("test_modeling_common", "test_configuration_common")

MODEL_CLASSES = tuple(
    getattr(importlib.import_module(f"elmo_hf.modeling_elmo.{path.split('.')[0]}"), path.split(".")[1])
    for path in AUTO_MAP.values()
)


class ElmoModelTester:
    """A tiny ELMo and a batch of random character ids, in the shape the mixins ask of a model tester."""

    def __init__(self, parent, batch_size: int = 3, seq_length: int = 6, vocab_size: int = 11, num_labels: int = 3):
        self.parent = parent
        self.batch_size, self.seq_length = batch_size, seq_length
        self.vocab_size, self.num_labels = vocab_size, num_labels
        self.is_training = True
        config = self.get_config()
        self.hidden_size, self.num_hidden_layers = config.hidden_size, config.num_hidden_layers
        self.expected_num_hidden_layers = config.num_layers + 1  # layer 0, then every biLSTM layer

    def get_config(self) -> ElmoConfig:
        return ElmoConfig.from_preset("tiny", vocab_size=self.vocab_size, num_labels=self.num_labels)

    def prepare_config_and_inputs_for_common(self) -> tuple[ElmoConfig, dict]:
        lengths = [self.seq_length] + [max(2, self.seq_length - 1 - row) for row in range(1, self.batch_size)]
        input_ids = random_char_ids(lengths, seed=0).to(modeling_common.torch_device)
        attention_mask = (input_ids != 0).any(-1).long()
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


class ElmoCRFTaggerTester(ElmoModelTester):
    """The tagger with its CRF, on BIO labels (their transition rules in force)."""

    def get_config(self) -> ElmoConfig:
        labels = ["O", "B-X", "I-X"][: self.num_labels]
        return ElmoConfig.from_preset("tiny", vocab_size=self.vocab_size, use_crf=True,
                                      id2label=dict(enumerate(labels)),
                                      label2id={label: i for i, label in enumerate(labels)})


class ElmoCommonTest(modeling_common.ModelTesterMixin, unittest.TestCase):
    all_model_classes = MODEL_CLASSES
    has_attentions = False  # a biLSTM: no attention weights to return
    test_resize_embeddings = False  # the input embedding is a table of characters, fixed by the tokenizer
    # The mixin checks `_init_weights` only for models whose files carry a copyright year from 2023 on; ours is
    # meant to pass it.
    test_can_init_all_missing_weights_before_2023 = True

    def setUp(self):
        self.model_tester = ElmoModelTester(self)
        self.config_tester = configuration_common.ConfigTester(
            self, config_class=ElmoConfig, common_properties=["hidden_size", "num_hidden_layers"],
            **PRESETS["tiny"],
        )

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        layout = model_class.input_layout  # what the class reads and learns from: it says so itself
        if layout in ("choices", "sentences"):  # as the mixin expands its own multiple-choice inputs; a document of
            # two sentences for the coreference head
            inputs_dict = {key: value.unsqueeze(1).expand(-1, 2, *value.shape[1:]).contiguous()
                           if isinstance(value, torch.Tensor) and value.ndim > 1 else value
                           for key, value in inputs_dict.items()}
        mask = inputs_dict["attention_mask"]
        if layout == "question-passage":  # pairs (question, passage): the second half passage
            lengths = mask.sum(1, keepdim=True)
            positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
            inputs_dict["token_type_ids"] = ((positions >= lengths // 2) & mask.bool()).long()
            if return_labels:
                inputs_dict["start_positions"] = (lengths.squeeze(1) - 1).clamp(min=0)
                inputs_dict["end_positions"] = (lengths.squeeze(1) - 1).clamp(min=0)
        if layout == "predicate":  # a predicate marked in every row: its second token (the first word)
            inputs_dict["predicate_mask"] = torch.zeros_like(mask)
            inputs_dict["predicate_mask"][:, 1] = 1
        if return_labels and model_class.label_layout is not None:
            # transformers adds labels for the classes of its own name tables, which registered models are not in
            batch, steps = self.model_tester.batch_size, inputs_dict["input_ids"].shape[-2]
            generator = torch.Generator().manual_seed(0)  # the same labels at every call: tests compare two runs
            if model_class.label_layout == "mentions":  # gold mentions (first word, last word, cluster) of every
                # document: its first word with the first word of its second sentence, and its second word alone
                words = int(mask[-1].sum())  # the shortest document's words: its sentence twice
                labels = torch.tensor([[0, 0, 1], [words // 2, words // 2, 1], [1, 1, 2]]).expand(batch, -1, -1)
                inputs_dict["labels"] = labels.contiguous().to(inputs_dict["input_ids"].device)
                return inputs_dict
            high, shape = {
                "vocabulary": (self.model_tester.vocab_size, (batch, steps)),
                "sentence": (self.model_tester.num_labels, (batch,)),
                "token": (self.model_tester.num_labels, (batch, steps)),
                "choice": (2, (batch,)),  # the index of one of 2 choices
            }[model_class.label_layout]
            labels = torch.randint(high, shape, generator=generator)
            inputs_dict["labels"] = labels.to(inputs_dict["input_ids"].device)
        return inputs_dict

    def test_training(self):
        # the mixin leaves out base models by transformers' own name table, in which registered models are not
        with_loss = tuple(c for c in MODEL_CLASSES if "labels" in inspect.signature(c.forward).parameters)
        with unittest.mock.patch.object(self, "all_model_classes", with_loss):
            super().test_training()

    def test_config(self):
        self.config_tester.run_common_tests()


class ElmoCRFTaggerCommonTest(ElmoCommonTest):
    """The same common tests on `ElmoForTokenClassification` with `use_crf` (other weights, another loss, logits
    from the CRF)."""

    all_model_classes = tuple(c for c in MODEL_CLASSES if c.label_layout == "token" and c.input_layout == "tokens")

    def setUp(self):
        super().setUp()
        self.model_tester = ElmoCRFTaggerTester(self)

    def test_config(self):
        pass  # the configuration is ElmoCommonTest's: tested there once

    # the tagger's biLM is frozen (freeze_bilm): its layers carry no gradient; ElmoCommonTest runs this on ElmoModel
    test_retain_grad_hidden_states_attentions = None


# The mixin's tests that cannot apply to ELMo, by what they need: each name (or `fnmatch` pattern) is removed from the
# classes, not collected. The transformers tests skip them themselves (`skipTest`, or decorators such as
# `require_flash_attn`); listed here, the suite runs only what applies.
NOT_APPLICABLE = {
    "attention weights and kernels (a biLSTM has none)": (
        "test_attention_outputs", "test_attn_implementation_*", "test_can_set_attention_dynamically",
        "test_eager_matches_sdpa_inference_*", "test_sdpa_*", "test_flash_attn_*", "test_flex_attention_*",
        "test_sliding_window_mask", "test_kernels_can_load_without_crashing"),
    "an accelerator, several of them, MPS or DeepSpeed": (
        "test_can_load_with_device_context_manager", "test_can_load_with_global_device_set", "test_cpu_offload",
        "test_disk_offload_*", "test_model_parallelism", "*deepspeed*"),
    "token or position embeddings to resize, rotary embeddings": (
        "test_resize_*", "test_model_rope_*", "test_vision_axial_rope"),
    "experts, router logits and grouped matrix multiplies": (
        "test_moe_models_record_router_logits", "test_output_router_logits_from_config",
        "test_eager_matches_batched_and_grouped_inference_*"),
    "a decoder, sub-configurations, a composite model": (
        "test_causal_lm_loss_honors_shift_labels", "test_encoder_decoder_loss_no_double_shift",
        "test_internal_model_config_and_subconfig_are_same", "test_can_set_attention_dynamically_composite_model"),
    "transformers' hooks for models that have them (inputs_embeds, capture_outputs, fp32 modules, tensor-parallel "
    "plans, checkpoint conversions)": (
        "test_inputs_embeds", "test_capture_outputs_decorator", "test_can_capture_specific_layers_hidden_states",
        "test_keep_in_fp32_modules*", "test_tied_head_has_a_tp_plan_entry", "test_tp_plan_matches_params",
        "test_can_load_from_already_mapped_keys", "test_reverse_loading_mapping",
        "test_enable_input_require_grads_with_gradient_checkpointing"),
    "transformers' own slow tests (RUN_SLOW)": ("test_torch_compile_for_training",),
}


def _not_applicable(names) -> set[str]:
    return {name for name in names for patterns in NOT_APPLICABLE.values()
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)}


for _cls in (ElmoCommonTest, ElmoCRFTaggerCommonTest):
    for _name in _not_applicable(name for name in dir(_cls) if name.startswith("test_")):
        setattr(_cls, _name, None)
