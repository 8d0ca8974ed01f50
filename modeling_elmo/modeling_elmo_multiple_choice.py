"""`ElmoForMultipleChoice`: which of N endings follows a context (SWAG, HellaSwag, ARC-style rows), as transformers'
`AutoModelForMultipleChoice` heads answer it.

Each choice is read as one sequence, the context then the ending (`tokenizer(contexts, endings)` gives
`<S> context </S> <S> ending </S>`): the biLM reads across the boundary, as it did across sentences when it was
pretrained on a stream of text, so the forward LSTM reads the ending in the light of the context. The scalar mix of its
layers is pooled over the words of the sequence (`config.classifier_pooling`), and a linear layer scores it; the N
scores of a row are its logits, and the loss is their cross-entropy with the index of the right ending.

This file travels to the Hub as remote code with its siblings: it imports only torch, transformers and them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import MultipleChoiceModelOutput

from .compat_elmo import can_return_tuple
from .configuration_elmo import ElmoConfig
from .modeling_elmo_heads import ElmoPreTrainedModelForTasks

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .char_cnn_kernels_elmo import char_cnn_implementation  # noqa: F401
from .character_ids import real_token_mask  # noqa: F401
from .config_choices_elmo import CHOICES  # noqa: F401
from .crf_elmo import ElmoCRF  # noqa: F401
from .downstream_elmo import pool  # noqa: F401
from .inputs_elmo import check_inputs  # noqa: F401
from .kernels_elmo import ALL_LSTM_FUNCTIONS  # noqa: F401
from .lstm_graph_elmo import lstm_graph  # noqa: F401
from .lstm_inference_elmo import packed_index  # noqa: F401
from .lstm_training_elmo import lstm_training  # noqa: F401
from .lstm_triton_elmo import available  # noqa: F401
from .matmul_elmo import needs_grad  # noqa: F401
from .modeling_elmo import ElmoModel  # noqa: F401
from .push_to_hub_elmo import PLUGIN_GROUP  # noqa: F401
from .quantization_elmo import quantize_int8  # noqa: F401
from .remote_code_elmo import model_code_files  # noqa: F401
from .softmax_elmo import ElmoSoftmax  # noqa: F401
from .token_cache_elmo import ElmoTokenCache  # noqa: F401
from .word_char_encoder import ElmoWordCharEncoder  # noqa: F401


class ElmoForMultipleChoice(ElmoPreTrainedModelForTasks):
    """ELMo scoring each of a row's N choices: the mix of the biLM layers over the words of the context and the
    choice, pooled (`config.classifier_pooling`: "mean", "max", "lstm" or "attention") and scored by a linear layer.

    The choices of a row are independent sequences of one batch of the biLM (stateless: a choice's score never
    depends on the other choices, their padding or their order)."""

    input_layout = "choices"
    label_layout = "choice"

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.classifier = nn.Linear(self._pooling_layers(), 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> MultipleChoiceModelOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, choices, tokens, max_characters_per_token)`): each
                choice's character ids from `ElmoTokenizer` (the context and the choice, `tokenizer(context,
                choice)`), right-padded with all-zero tokens; `(batch, choices, tokens * max_characters_per_token)`,
                as transformers' multiple-choice collators flatten them, is read as the same.
            attention_mask (`torch.Tensor` of shape `(batch, choices, tokens)`, *optional*): 1 for real tokens.
            token_type_ids (`torch.Tensor` of shape `(batch, choices, tokens)`, *optional*): accepted as the
                tokenizer gives them for pairs, and not needed: each choice is read as one sequence.
            labels (`torch.LongTensor` of shape `(batch,)`, *optional*): the index of the right choice.
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers, of shape
                `(batch * choices, tokens, 2P)`, as transformers' multiple-choice heads return theirs.
        """
        if input_ids is not None and input_ids.dim() == 3:
            input_ids = self._unflatten_characters(input_ids, attention_mask)
        if input_ids is None or input_ids.dim() != 4:
            raise ValueError("input_ids must have shape (batch, choices, tokens, characters), got "
                             f"{None if input_ids is None else tuple(input_ids.shape)}")
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        batch, choices = input_ids.shape[:2]
        flat_ids = input_ids.reshape(batch * choices, *input_ids.shape[2:])  # (B * N, T, C)
        flat_mask = None if attention_mask is None else attention_mask.reshape(batch * choices, -1)  # (B * N, T)
        x, _, word_mask, layers = self._task_inputs(flat_ids, flat_mask, **kwargs)  # (B * N, T, D)
        logits = self.classifier(self.pool(x, word_mask)).view(batch, choices)  # (B, N)
        loss = None
        if labels is not None:
            loss = self._regularized(F.cross_entropy(logits.float(), labels.to(logits.device).view(-1)))
        return MultipleChoiceModelOutput(loss=loss, logits=logits,
                                         hidden_states=layers if output_hidden_states else None)

    def _unflatten_characters(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(batch, choices, tokens * characters) -> (batch, choices, tokens, characters): what transformers'
        multiple-choice collators make of a tokenizer's rows (run_swag.py's `DataCollatorForMultipleChoice` pads the
        flattened choices, then views each feature as `(batch, choices, -1)`)."""
        width = self.config.max_characters_per_token
        tokens, rest = divmod(input_ids.shape[-1], width)
        if rest or (attention_mask is not None and attention_mask.shape[-1] != tokens):
            raise ValueError(f"input_ids of shape {tuple(input_ids.shape)} are not (batch, choices, tokens x {width} "
                             f"characters) for an attention_mask of shape "
                             f"{None if attention_mask is None else tuple(attention_mask.shape)}")
        return input_ids.reshape(*input_ids.shape[:2], tokens, width)


__all__ = ["ElmoForMultipleChoice"]
