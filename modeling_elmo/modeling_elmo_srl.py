"""`ElmoForSemanticRoleLabeling`: ELMo's semantic role labeller (Peters et al. 2018, table 1's SRL row, after He et
al. 2017 at small scale): a BIO tagger over the mix of the biLM layers, told which word is the predicate.

transformers has no Auto class for semantic role labelling: the class's row of `configuration_elmo.ELMO_CLASSES` has
`auto_class` None, so a saved config's `auto_map` names it under its own name ("ElmoForSemanticRoleLabeling"), and it
loads with `elmo_hf.tools.loading.load_elmo(folder, task="semantic-role-labeling")`, or as remote code with
`get_class_from_dynamic_module(config.auto_map["ElmoForSemanticRoleLabeling"], folder)`.

This file travels to the Hub as remote code with its siblings: it imports only torch, transformers and them.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput

from .compat_elmo import can_return_tuple
from .configuration_elmo import ElmoConfig
from .crf_elmo import ElmoCRF, allowed_transitions
from .downstream_elmo import run_lstm, sentence_boundary_mask
from .modeling_elmo_heads import ElmoPreTrainedModelForTasks, best_tags, tagger_output

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .char_cnn_kernels_elmo import char_cnn_implementation  # noqa: F401
from .character_ids import real_token_mask  # noqa: F401
from .config_choices_elmo import CHOICES  # noqa: F401
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

# Width of the predicate indicator's embedding (He et al. 2017 use 100 beside 100-dimensional word vectors; a small
# fixed width here, next to ELMo's 2P, is enough to tell the predicate's own word from the others).
PREDICATE_EMBEDDING_DIM = 16


class ElmoForSemanticRoleLabeling(ElmoPreTrainedModelForTasks):
    """ELMo labelling the arguments of one predicate: at every token, [the scalar mix of the biLM layers ; an
    embedding of whether the token is the predicate], optionally a trainable biLSTM
    (`config.token_classifier_encoder="lstm"`), then a linear layer scoring BIO argument tags ("B-ARG0", "I-ARG1",
    "B-V", "O", ...). A sentence with several predicates is one row per predicate, the same words with another
    `predicate_mask`. With `config.use_crf`, a linear-chain CRF over the words, as `ElmoForTokenClassification`'s
    (its logits are then max-marginals, whose argmax is the Viterbi sequence)."""

    input_layout = "predicate"
    label_layout = "token"
    onnx_logits = None  # the predicate mask is an input the exported graph does not take

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.predicate_embedding = nn.Embedding(2, PREDICATE_EMBEDDING_DIM)
        width = self.representation_dim + PREDICATE_EMBEDDING_DIM
        self.encoder = None
        if config.token_classifier_encoder == "lstm":
            self.encoder = nn.LSTM(width, self.head_hidden_size, batch_first=True, bidirectional=True)
            width = 2 * self.head_hidden_size
        self.classifier = nn.Linear(width, config.num_labels)
        self.crf = None
        if config.use_crf:
            labels = [config.id2label[i] for i in range(config.num_labels)]
            self.crf = ElmoCRF(config.num_labels, allowed_transitions(labels, config.crf_constraints))
        self.post_init()

    def emission_scores(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
        predicate_mask: torch.Tensor | None = None, **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """The linear layer's scores (B, T, num_labels), the mask of the word positions (B, T: not `<S>`, `</S>`,
        padding) and the biLM layers."""
        x, mask, _, layers = self._task_inputs(input_ids, attention_mask, **kwargs)  # (B, T, D)
        if predicate_mask is None:
            predicate_mask = torch.zeros(mask.shape, dtype=torch.long, device=x.device)
        if predicate_mask.shape != mask.shape:
            raise ValueError(f"predicate_mask must have shape [batch, tokens] = {tuple(mask.shape)}, got "
                             f"{tuple(predicate_mask.shape)}")
        marks = self.predicate_embedding((predicate_mask.to(x.device) > 0).long()).to(x.dtype)
        x = torch.cat([x, marks], dim=-1)
        if self.encoder is not None:
            x = self.representation_dropout(run_lstm(self.encoder, x, mask.sum(1))[0])  # (B, T, 2H)
        words = mask & ~sentence_boundary_mask(input_ids, self.config.sentence_boundary_rows).to(mask.device)
        return self.classifier(x), words, layers

    @torch.no_grad()
    def decode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               predicate_mask: torch.Tensor | None = None) -> list[list[int]]:
        """The tag ids of the words of every row, in order: the CRF's Viterbi sequence, or each word's argmax."""
        return best_tags(self.crf, *self.emission_scores(input_ids, attention_mask, predicate_mask)[:2])

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        predicate_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> TokenClassifierOutput | tuple:
        r"""
        Args:
            input_ids, attention_mask: as in `ElmoForSequenceClassification.forward`.
            predicate_mask (`torch.LongTensor` of shape `(batch, tokens)`, *optional*): 1 at the predicate's token,
                0 elsewhere (none given: no predicate marked).
            labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*): a tag id per position of
                `input_ids`, -100 where there is none (`<S>`, `</S>`, padding).
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers.
        """
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        emissions, words, layers = self.emission_scores(input_ids, attention_mask, predicate_mask, **kwargs)
        return tagger_output(self, emissions, words, layers, labels, output_hidden_states)


__all__ = ["ElmoForSemanticRoleLabeling"]
