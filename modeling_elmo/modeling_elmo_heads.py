"""The task heads of ELMo (Peters et al. 2018, section 3.3): `ElmoPreTrainedModelForTasks` (the shared part: the
biLM, the scalar mixes, freezing), `ElmoForSequenceClassification` and `ElmoForTokenClassification`.

The scalar mix, the hashed word embedding and the pooling they use live in `downstream_elmo.py`, the biLM in
`modeling_elmo.py`. A new head is a class here and one row of `configuration_elmo.ELMO_CLASSES` (which registers it
with its Auto class and writes it into every saved `auto_map`). See docs/architecture.md ("Task heads").

This file travels to the Hub as remote code with its siblings: it imports only torch, transformers and them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput

from .character_ids import real_token_mask
from .compat_elmo import can_return_tuple, init
from .configuration_elmo import PAIR_COMBINATIONS, ElmoConfig
from .crf_elmo import ElmoCRF, allowed_transitions
from .downstream_elmo import (
    ElmoHashedWordEmbedding,
    ElmoRepresentationsOutput,
    ElmoScalarMix,
    combine_pair,
    first_empty_side,
    place_back,
    pool,
    run_lstm,
    scalar_mixes,
    sentence_boundary_mask,
    sequence_classification_loss,
    split_pair,
    word_mask_of,
)
from .modeling_elmo import ElmoModel, ElmoPreTrainedModel

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .char_cnn_kernels_elmo import char_cnn_implementation  # noqa: F401
from .config_choices_elmo import CHOICES  # noqa: F401
from .inputs_elmo import check_inputs  # noqa: F401
from .kernels_elmo import ALL_LSTM_FUNCTIONS  # noqa: F401
from .lstm_graph_elmo import lstm_graph  # noqa: F401
from .lstm_inference_elmo import packed_index  # noqa: F401
from .lstm_training_elmo import lstm_training  # noqa: F401
from .lstm_triton_elmo import available  # noqa: F401
from .matmul_elmo import needs_grad  # noqa: F401
from .push_to_hub_elmo import PLUGIN_GROUP  # noqa: F401
from .quantization_elmo import quantize_int8  # noqa: F401
from .remote_code_elmo import model_code_files  # noqa: F401
from .softmax_elmo import ElmoSoftmax  # noqa: F401
from .token_cache_elmo import ElmoTokenCache  # noqa: F401
from .word_char_encoder import ElmoWordCharEncoder  # noqa: F401


class ElmoPreTrainedModelForTasks(ElmoPreTrainedModel):
    """Shared part of the task heads: the biLM as `self.elmo`, `num_output_representations` scalar mixes,
    the optional hashed word embedding, dropout, and the freezing of the biLM.

    Freezing (`config.freeze_bilm`, default True): the biLM's parameters have `requires_grad=False` and it
    runs in eval mode (no dropout) under `torch.no_grad()`, so training the head leaves them bit-identical.
    """

    # The heads compute a plain mean loss: Trainer must not pass `num_items_in_batch`
    # (docs/transformers_traps.md, "Trainer and num_items_in_batch").
    accepts_loss_kwargs = False
    # How the head's logits go into an ONNX graph (`elmo_hf.tools.export.export_module`): "sentence" (the classifier on
    # the pooled words), "token" (the classifier at every position), or None: not exported (the graph then holds the
    # biLM's layers and the head's first mix). `onnx_unexportable_reason` says when a head's config rules it out.
    onnx_logits = None

    def onnx_unexportable_reason(self) -> str | None:
        """Why this head's logits cannot be part of an ONNX graph (one line), or None."""
        if self.onnx_logits is None:
            return f"{type(self).__name__} is not exported (sentence and token classification are)"
        return None

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        self.scalar_mixes = scalar_mixes(config)
        self.word_embedding = (
            ElmoHashedWordEmbedding(config.word_embedding_buckets, config.word_embedding_dim)
            if config.word_embedding_dim > 0
            else None
        )
        self.representation_dropout = nn.Dropout(config.representation_dropout)
        self._apply_freeze()

    @property
    def representation_dim(self) -> int:
        """Width of what the head reads at each token: 2P, plus the word embedding when there is one."""
        return self.config.hidden_size + self.config.word_embedding_dim

    @property
    def head_hidden_size(self) -> int:
        return self.config.head_hidden_size or self.config.projection_dim

    def _pooling_layers(self) -> int:
        """The layers of `config.classifier_pooling` for a head that pools a sequence into one vector, set as
        `pooler_lstm` ("lstm": a biLSTM over the tokens) and `attention` ("attention": a score per token, softmax over
        the sentence), None otherwise ("mean", "max"); returns the width of the pooled vector."""
        width, hidden = self.representation_dim, self.head_hidden_size
        self.pooler_lstm = self.attention = None
        if self.config.classifier_pooling == "lstm":
            self.pooler_lstm = nn.LSTM(width, hidden, batch_first=True, bidirectional=True)
            return 2 * hidden
        if self.config.classifier_pooling == "attention":
            self.attention = nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        return width

    def pool(self, x: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D) token vectors and (B, T) mask of the tokens to pool -> (B, D'), by `config.classifier_pooling`
        through the layers `_pooling_layers` made."""
        return pool(x, word_mask, self.config.classifier_pooling, self.pooler_lstm, self.attention)

    def _apply_freeze(self) -> None:
        frozen = self.config.freeze_bilm
        self.elmo.requires_grad_(not frozen)
        if frozen:
            self.elmo.eval()

    def set_bilm_frozen(self, frozen: bool = True) -> None:
        """Freeze or unfreeze the biLM after construction (e.g. train the head first, then fine-tune all)."""
        self.config.freeze_bilm = bool(frozen)
        self._apply_freeze()
        if not frozen:
            self.elmo.train(self.training)

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # output_loading_info=True gives a pair
        model._apply_freeze()  # loading may hand back fresh parameters
        return loaded

    def train(self, mode: bool = True):
        super().train(mode)
        if self.config.freeze_bilm:
            self.elmo.eval()  # a frozen biLM never runs its dropout
        return self

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, ElmoScalarMix):
            init.copy_(module.scalar_parameters, torch.tensor(module.initial_scalar_parameters))
            init.ones_(module.scale)
        elif isinstance(module, ElmoHashedWordEmbedding):
            values = torch.empty_like(module.weight).normal_(std=1.0 / math.sqrt(module.weight.shape[1]))
            values[0] = 0.0  # padding row
            init.copy_(module.weight, values)  # one guarded write: a loaded table is left as it is
        elif isinstance(module, ElmoCRF):  # no transition preferred before training
            for parameter in (module.transitions, module.start_transitions, module.end_transitions):
                init.zeros_(parameter)
        elif isinstance(module, nn.LSTM):  # the heads' biLSTM: torch's default
            bound = 1.0 / math.sqrt(module.hidden_size)
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)

    def _bilm_layers(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """Run the biLM once: its L + 1 layers, the real-token mask and the word mask, all (B, T[, 2P])."""
        if self.config.freeze_bilm:
            if self.elmo.training:
                self.elmo.eval()
            with torch.no_grad():
                outputs = self.elmo(input_ids, attention_mask=attention_mask, output_hidden_states=True,
                                    return_dict=True, **kwargs)
        else:
            outputs = self.elmo(input_ids, attention_mask=attention_mask, output_hidden_states=True,
                                return_dict=True, **kwargs)
        mask = attention_mask.bool() if attention_mask is not None else real_token_mask(input_ids)  # (B, T)
        return outputs.hidden_states, mask, word_mask_of(
            input_ids, mask, self.config.keep_sentence_boundaries, self.config.sentence_boundary_rows
        )

    def get_elmo_representations(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs
    ) -> ElmoRepresentationsOutput:
        """All `num_output_representations` ELMo mixes from one biLM run (allennlp `Elmo`'s
        `elmo_representations`), before dropout and without the word embedding."""
        layers, mask, word_mask = self._bilm_layers(input_ids, attention_mask, **kwargs)
        mixes = tuple(mix(layers, word_mask) for mix in self.scalar_mixes)
        return ElmoRepresentationsOutput(elmo_representations=mixes, mask=mask, word_mask=word_mask,
                                         hidden_states=layers)

    def _task_inputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """What the head reads: dropout([first mix ; word embedding]) (B, T, D), mask, word mask, biLM layers."""
        layers, mask, word_mask = self._bilm_layers(input_ids, attention_mask, **kwargs)
        x = self.scalar_mixes[0](layers, word_mask)  # (B, T, 2P)
        if self.word_embedding is not None:
            x = torch.cat([x, self.word_embedding(input_ids).to(x.dtype)], dim=-1)  # (B, T, 2P + E)
        return self.representation_dropout(x), mask, word_mask, layers

    def mix_l2_penalty(self) -> torch.Tensor:
        """`scalar_mix_l2_coef * sum(w ** 2)` of the mix the head uses (0 for a fixed mix)."""
        return self.scalar_mixes[0].l2_penalty(self.config.scalar_mix_l2_coef)

    def _regularized(self, loss: torch.Tensor) -> torch.Tensor:
        """The task loss plus, while training, the L2 penalty on the mix weights (Peters et al. 2018, eq. 1)."""
        if self.training and self.config.scalar_mix_l2_coef > 0 and self.scalar_mixes[0].trainable:
            loss = loss + self.mix_l2_penalty().to(loss.dtype)
        return loss


class ElmoForSequenceClassification(ElmoPreTrainedModelForTasks):
    """ELMo with a sentence classifier: the scalar mix of the biLM layers, pooled over the words of each sentence
    (`config.classifier_pooling`), then a linear layer. Regression (`num_labels == 1`), single-label and
    multi-label classification follow `config.problem_type`, as in transformers' BERT heads.

    `<S>`/`</S>` are not pooled unless `config.keep_sentence_boundaries` (allennlp and bilm-tf strip them before
    the task model).

    Sentence pairs (`config.pair_combination` set; `token_type_ids` 1 on each row's second sentence, as the
    tokenizer gives them for `text_pair`): the biLM is stateless, and reads each sentence of a pair on its own, as
    ESIM + ELMo did, so that a sentence's vectors never depend on its partner: all first sentences in one run, all
    second ones in another, each side with its own padding. Each side is pooled as a single sentence, and the two
    vectors combined (`[u; v; |u - v|; u * v]`) before the classifier. A head built without `pair_combination` (as
    `AutoModelForSequenceClassification.from_pretrained(folder, num_labels=3)` builds it in transformers' GLUE recipe)
    reads a pair as one sequence, the row as the tokenizer gives it (`<S> first </S> <S> second </S>`): the biLM carries
    each sentence into its reading of the other, and the words of both are pooled together (docs/finetuning.md,
    "Sentence pairs").
    """

    label_layout = "sentence"
    onnx_logits = "sentence"

    def onnx_unexportable_reason(self) -> str | None:
        if self.config.pair_combination is not None:
            return "a head of sentence pairs reads each side in its own biLM run (split by data): not exported"
        if self.config.classifier_pooling == "lstm":
            return "LSTM pooling packs each row's words by length (data-dependent): not exported"
        return None

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        pooled = self._pooling_layers()
        self.classifier = nn.Linear(pooled * PAIR_COMBINATIONS.get(config.pair_combination, 1), config.num_labels)
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
    ) -> SequenceClassifierOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, tokens, max_characters_per_token)`): character ids
                from `ElmoTokenizer`, with `<S>`/`</S>`, right-padded with all-zero tokens; a pair's two sentences
                one after the other.
            attention_mask (`torch.Tensor` of shape `(batch, tokens)`, *optional*): 1 for real tokens.
            token_type_ids (`torch.Tensor` of shape `(batch, tokens)`, *optional*): 1 on the second sentence of a
                pair, 0 elsewhere (all 0, or absent: single sentences).
            labels (`torch.Tensor` of shape `(batch,)` or `(batch, num_labels)`, *optional*): class ids
                (single-label), floats (regression) or multi-hot floats (multi-label).
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers (of pairs: each sentence's
                own, at its positions of `input_ids`).
        """
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        sides = self._pair_sides(input_ids, attention_mask, token_type_ids)
        if sides is None:
            x, _, word_mask, layers = self._task_inputs(input_ids, attention_mask, **kwargs)
            logits = self.classifier(self.pool(x, word_mask))  # (B, num_labels)
        else:
            logits, layers = self._pair_logits(sides, input_ids.shape[1], output_hidden_states, **kwargs)
        loss = None if labels is None else self._regularized(sequence_classification_loss(logits, labels, self.config))

        hidden_states = layers if output_hidden_states else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)

    def _pair_sides(self, input_ids, attention_mask, token_type_ids) -> tuple | None:
        """The two sides of a batch of pairs (`split_pair`), or None for rows read as one sequence: single sentences
        (no token type 1), and pairs for a head without `pair_combination`."""
        mask = attention_mask.bool() if attention_mask is not None else real_token_mask(input_ids)
        second = None if token_type_ids is None else token_type_ids.to(mask.device).bool() & mask
        combination = self.config.pair_combination
        if second is None or not bool(second.any()):
            if combination is not None:
                raise ValueError(
                    f"this head classifies sentence pairs (pair_combination={combination!r}): give every example "
                    "a second sentence, tokenizer(text, text_pair), marked by token_type_ids 1"
                )
            return None
        if combination is None:
            return None  # a pair read as one sequence
        sides = split_pair(input_ids, mask, second)
        missing = first_empty_side(sides)
        if missing is not None:
            side, row = missing
            raise ValueError(f"row {row} of a batch of sentence pairs has no {('first', 'second')[side]} sentence: "
                             "every row needs both (token_type_ids 0 on the first, 1 on the second)")
        return sides

    def _pair_logits(self, sides, length: int, output_hidden_states: bool, **kwargs):
        """Logits of a batch of pairs, and the biLM layers of each sentence read alone, placed back at the positions
        of `input_ids` (None unless `output_hidden_states`)."""
        pooled, layers = [], []
        for ids, mask, _ in sides:  # all first sentences in one biLM run, all second ones in another
            x, _, word_mask, side_layers = self._task_inputs(ids, mask.long(), **kwargs)
            pooled.append(self.pool(x, word_mask))
            layers.append(side_layers)
        logits = self.classifier(combine_pair(*pooled, self.config.pair_combination))
        if not output_hidden_states:
            return logits, None
        placed = tuple(
            place_back([(first, *sides[0][1:]), (second, *sides[1][1:])], length) for first, second in zip(*layers)
        )
        return logits, placed


class ElmoForTokenClassification(ElmoPreTrainedModelForTasks):
    """ELMo with a tagger (NER, POS, chunking): the scalar mix at every token, optionally a trainable biLSTM
    (`config.token_classifier_encoder="lstm"`), then a linear layer. Logits cover every position of `input_ids`;
    labels at `<S>`/`</S>` and padding are -100 (the alignment from `word_ids()` gives that).

    With `config.use_crf` the linear layer's scores are a linear-chain CRF's emissions over the words of each
    sentence (not `<S>`, `</S>`, padding): the loss is its negative log-likelihood, and the logits at the words are
    max-marginals (the score of the best tag sequence with each tag at that word), whose argmax is the Viterbi
    sequence: whatever takes the argmax of the logits (transformers' pipeline, `Trainer`'s metrics) gets the CRF's
    decoding. `decode()` gives the Viterbi tags themselves, `emission_scores()` the linear layer's scores.
    """

    label_layout = "token"
    onnx_logits = "token"

    def onnx_unexportable_reason(self) -> str | None:
        if self.config.token_classifier_encoder == "lstm":
            return "the tagger's own biLSTM packs rows by length (data-dependent): not exported"
        if self.config.use_crf:
            return ("a CRF's logits are max-marginals over tag sequences (a data-dependent dynamic programme): not "
                    "exported")
        return None

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        width = self.representation_dim
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
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """The linear layer's scores (B, T, num_labels), the mask of the word positions (B, T: not `<S>`, `</S>`,
        padding) and the biLM layers."""
        x, mask, _, layers = self._task_inputs(input_ids, attention_mask, **kwargs)  # (B, T, D)
        if self.encoder is not None:
            # right-padded rows are already left-aligned: the biLSTM reads each sentence, boundaries included
            x = self.representation_dropout(run_lstm(self.encoder, x, mask.sum(1))[0])  # (B, T, 2H)
        words = mask & ~sentence_boundary_mask(input_ids, self.config.sentence_boundary_rows).to(mask.device)
        return self.classifier(x), words, layers

    @torch.no_grad()
    def decode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> list[list[int]]:
        """The tag ids of the words of every sentence, in order: the CRF's Viterbi sequence, or the argmax of each
        word's logits without a CRF."""
        return best_tags(self.crf, *self.emission_scores(input_ids, attention_mask)[:2])

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> TokenClassifierOutput | tuple:
        r"""
        Args:
            input_ids, attention_mask: as in `ElmoForSequenceClassification.forward`.
            labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*): a label id per position of
                `input_ids`, -100 where there is none (`<S>`, `</S>`, padding).
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers.
        """
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        emissions, words, layers = self.emission_scores(input_ids, attention_mask, **kwargs)  # (B, T, num_labels)
        return tagger_output(self, emissions, words, layers, labels, output_hidden_states)


def best_tags(crf: ElmoCRF | None, emissions: torch.Tensor, words: torch.Tensor) -> list[list[int]]:
    """The tag ids of the words of every row, in order: the CRF's Viterbi sequence, or each word's argmax."""
    if crf is not None:
        return crf.decode(emissions, words)
    best = emissions.argmax(-1)
    return [best[row][words[row]].tolist() for row in range(best.shape[0])]


def tagger_output(head, emissions: torch.Tensor, words: torch.Tensor, layers, labels: torch.Tensor | None,
                  output_hidden_states: bool) -> TokenClassifierOutput:
    """A tagging head's output from its emissions (the taggers and semantic role labelling): the logits (the CRF's
    max-marginals with one), and with `labels` the loss (cross-entropy, or the CRF's negative log-likelihood)."""
    crf = head.crf
    logits = emissions if crf is None else crf.max_marginals(emissions, words)
    loss = None
    if labels is not None:
        if labels.shape != logits.shape[:2]:
            raise ValueError(
                f"labels must have shape [batch, tokens] = {tuple(logits.shape[:2])}, got {tuple(labels.shape)}"
            )
        labels = labels.to(logits.device)
        if crf is None:
            loss = F.cross_entropy(logits.view(-1, head.num_labels).float(), labels.view(-1))
        else:  # the CRF scores every word: -100 only at <S>, </S> and padding
            loss = crf.negative_log_likelihood(emissions, _crf_labels(labels, words), words)
        loss = head._regularized(loss)
    return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=layers if output_hidden_states else None)


def _crf_labels(labels: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """The labels the CRF scores: one at every word (a sequence has no gap), whatever is at `<S>`/`</S>`."""
    missing = (labels < 0) & words
    if bool(missing.any()):
        row, position = missing.nonzero()[0].tolist()
        raise ValueError(
            f"with use_crf every word needs a label (the CRF scores whole tag sequences): row {row} has "
            f"{int(labels[row, position])} at word position {position}; -100 belongs at <S>, </S> and padding only"
        )
    return labels.masked_fill(~words, 0)


__all__ = ["ElmoPreTrainedModelForTasks", "ElmoForSequenceClassification", "ElmoForTokenClassification"]
