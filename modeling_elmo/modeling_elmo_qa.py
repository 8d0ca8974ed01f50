"""The question-answering head of ELMo: `ElmoForQuestionAnswering`, a span extractor in the spirit of the paper's SQuAD
model (Peters et al. 2018 added ELMo to BiDAF: Seo et al. 2017), on the scalar mix of the biLM layers.

The input is the pair (question, passage) as the tokenizer encodes it (`tokenizer(question, passage)`): the two
sentences one after the other, each framed by `<S>`/`</S>`, `token_type_ids` 1 on the passage. The biLM reads each
on its own (as `ElmoForSequenceClassification` reads a pair). Then the bidirectional attention flow: passage-to-
question attention (which question words matter to each passage word) and question-to-passage attention (which
passage words matter most to the question), a trainable biLSTM over the passage ("modelling layer"), and a start and
an end score per passage word. Position 0 (the question's `<S>`) scores "no answer" (SQuAD 2.0), as BERT's [CLS].

Windows of long passages, and the best span mapped back to the passage's characters, are in
`question_answering_elmo.py`. This file travels to the Hub as remote code with its siblings: it imports only torch,
transformers and them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import QuestionAnsweringModelOutput

from .character_ids import real_token_mask
from .compat_elmo import can_return_tuple
from .configuration_elmo import ElmoConfig
from .downstream_elmo import first_empty_side, place_back, run_lstm, split_pair
from .modeling_elmo_heads import ElmoPreTrainedModelForTasks

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .char_cnn_kernels_elmo import char_cnn_implementation  # noqa: F401
from .config_choices_elmo import CHOICES  # noqa: F401
from .crf_elmo import ElmoCRF  # noqa: F401
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

# The logit of every position that cannot start or end an answer (the question, boundaries, padding): low enough
# that softmax gives it nothing, and finite in float16.
NOT_IN_PASSAGE = -10000.0


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, NOT_IN_PASSAGE), dim=dim)


class ElmoForQuestionAnswering(ElmoPreTrainedModelForTasks):
    """ELMo with a span head (`AutoModelForQuestionAnswering`): BiDAF's attention flow between the question's and the
    passage's mixed ELMo vectors, a modelling layer (`config.qa_modeling_layer`: a biLSTM, or none), and linear start
    and end scores over the passage's words. `start_logits`/`end_logits` cover every position of `input_ids`:
    `NOT_IN_PASSAGE` outside the passage's words, except position 0 (the "no answer" score)."""

    input_layout = "question-passage"  # labels: start_positions and end_positions

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        width = self.representation_dim
        # similarity of passage word c and question word q: w . [c; q; c * q] (BiDAF's trilinear function)
        self.similarity = nn.Linear(3 * width, 1)
        attended = 4 * width  # [c; c2q; c * c2q; c * q2c]
        self.modeling = None
        modeled = attended
        if config.qa_modeling_layer == "lstm":
            self.modeling = nn.LSTM(attended, self.head_hidden_size, batch_first=True, bidirectional=True)
            modeled = attended + 2 * self.head_hidden_size
        self.span = nn.Linear(modeled, 2)  # start and end score of each passage word
        self.null = nn.Linear(modeled, 2)  # start and end score of "no answer", from the passage's max-pool
        self.post_init()

    def attention_flow(self, c: torch.Tensor, c_mask: torch.Tensor, q: torch.Tensor, q_mask: torch.Tensor):
        """(B, Tc, D) passage and (B, Tq, D) question vectors with their word masks -> (B, Tc, 4D)
        `[c; c2q; c * c2q; c * q2c]`."""
        w_c, w_q, w_cq = self.similarity.weight[0].split(c.shape[-1])
        # w . [c; q; c * q] for every pair, without building the (B, Tc, Tq, 3D) tensor
        scores = (c @ w_c).unsqueeze(2) + (q @ w_q).unsqueeze(1) + (c * w_cq) @ q.transpose(1, 2)
        scores = scores + self.similarity.bias  # (B, Tc, Tq)
        c2q = _masked_softmax(scores, q_mask.unsqueeze(1), dim=2) @ q  # (B, Tc, D)
        best = scores.masked_fill(~q_mask.unsqueeze(1), NOT_IN_PASSAGE).max(dim=2).values  # (B, Tc)
        q2c = (_masked_softmax(best, c_mask, dim=1).unsqueeze(1) @ c)  # (B, 1, D)
        return torch.cat([c, c2q, c * c2q, c * q2c], dim=-1)

    def _sides(self, input_ids, attention_mask, token_type_ids):
        mask = attention_mask.bool() if attention_mask is not None else real_token_mask(input_ids)
        if token_type_ids is None:
            raise ValueError("ElmoForQuestionAnswering reads (question, passage) pairs: give token_type_ids (1 on the "
                             "passage), as tokenizer(question, passage) returns them")
        second = token_type_ids.to(mask.device).bool() & mask
        sides = split_pair(input_ids, mask, second)
        missing = first_empty_side(sides)
        if missing is not None:
            side, row = missing
            raise ValueError(f"row {row} of the batch has no {('question', 'passage')[side]}: every row is a pair "
                             "(question, passage), token_type_ids 0 on the question and 1 on the passage")
        return sides

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> QuestionAnsweringModelOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, tokens, max_characters_per_token)`): character ids of
                `tokenizer(question, passage)`, right-padded.
            attention_mask (`torch.Tensor` of shape `(batch, tokens)`, *optional*): 1 for real tokens.
            token_type_ids (`torch.Tensor` of shape `(batch, tokens)`): 0 on the question, 1 on the passage.
            start_positions, end_positions (`torch.LongTensor` of shape `(batch,)`, *optional*): the positions of the
                answer's first and last word in `input_ids`; 0 for "no answer". Positions past the row are ignored.
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers of each sentence read alone,
                at its positions of `input_ids`.
        """
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        length = input_ids.shape[1]
        (q_ids, q_mask, q_positions), (c_ids, c_mask, c_positions) = self._sides(input_ids, attention_mask,
                                                                                 token_type_ids)
        q, _, q_words, q_layers = self._task_inputs(q_ids, q_mask.long(), **kwargs)
        c, _, c_words, c_layers = self._task_inputs(c_ids, c_mask.long(), **kwargs)
        x = self.attention_flow(c, c_words, q, q_words)  # (B, Tc, 4D)
        if self.modeling is not None:
            # the passage rows are left-aligned: the biLSTM reads each passage, boundaries included
            modeled = run_lstm(self.modeling, x, c_mask.sum(1))[0]
            x = torch.cat([x, self.representation_dropout(modeled)], dim=-1)
        span = self.span(x).masked_fill(~c_words.unsqueeze(-1), NOT_IN_PASSAGE)  # (B, Tc, 2)
        null = self.null(x.masked_fill(~c_words.unsqueeze(-1), NOT_IN_PASSAGE).max(dim=1).values)  # (B, 2)

        # back to the positions of input_ids: the passage's words where they sit, "no answer" at 0
        logits = span.new_full((span.shape[0], length, 2), NOT_IN_PASSAGE)
        logits = logits.scatter(1, c_positions.unsqueeze(-1).expand_as(span), span)
        logits[:, 0] = null
        start_logits, end_logits = logits.unbind(-1)

        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self._regularized(span_loss(start_logits, end_logits, start_positions, end_positions))
        hidden_states = None
        if output_hidden_states:
            hidden_states = tuple(place_back([(ql, q_mask, q_positions), (cl, c_mask, c_positions)], length)
                                  for ql, cl in zip(q_layers, c_layers))
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits.contiguous(),
                                            end_logits=end_logits.contiguous(), hidden_states=hidden_states)


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor,
              end_positions: torch.Tensor) -> torch.Tensor:
    """The mean of the start and end cross-entropies, as transformers' question-answering heads compute it:
    positions past the row (answers cut off by truncation) are clamped to the row's length and ignored."""
    ignored = start_logits.shape[1]
    starts = start_positions.to(start_logits.device).view(-1).clamp(0, ignored)
    ends = end_positions.to(end_logits.device).view(-1).clamp(0, ignored)
    start = F.cross_entropy(start_logits.float(), starts, ignore_index=ignored)
    end = F.cross_entropy(end_logits.float(), ends, ignore_index=ignored)
    return (start + end) / 2


__all__ = ["ElmoForQuestionAnswering"]
