"""`ElmoForCoreference`: ELMo's coreference model (Peters et al. 2018, table 1's coreference row: Lee et al. 2017's
end-to-end span ranking, at a scale a CPU trains) over the mix of the biLM layers.

transformers has no Auto class for coreference: the class's row of `configuration_elmo.ELMO_CLASSES` has `auto_class`
None, so a saved config's `auto_map` names it under its own name ("ElmoForCoreference"), and it loads with
`elmo_hf.tools.loading.load_elmo(folder, task="coreference")`, or as remote code with
`get_class_from_dynamic_module(config.auto_map["ElmoForCoreference"], folder)`.

This file travels to the Hub as remote code with its siblings: it imports only torch, transformers and them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.utils import ModelOutput

from .compat_elmo import can_return_tuple
from .configuration_elmo import ElmoConfig
from .downstream_elmo import run_lstm, sentence_boundary_mask
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

# Lee et al. 2017's buckets of the distance between a span and its antecedent: 0, 1, 2, 3, 4, 5-7, 8-15, 16-31,
# 32-63, 64+ (one bucket per power of two past 4, since a few words more matter less the farther apart they are).
DISTANCE_BUCKETS = 10
# Dropout inside the scorers (Lee et al. 2017: 0.2; the mixed vectors keep `config.representation_dropout`, 0.5).
FFNN_DROPOUT = 0.2


@dataclass
class ElmoCoreferenceOutput(ModelOutput):
    """`logits` (batch, spans, 1 + antecedents): the score of each kept span's dummy antecedent (0, "no antecedent")
    and of its `antecedent_indices`; `top_spans` (batch, spans, 2): the first and last word of each kept span (in the
    document, in order; -1 past a row's kept spans); `antecedent_indices` (batch, spans, antecedents): the kept spans
    each is scored against, nearest first (its real ones are where `logits` is above the dtype's minimum)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    top_spans: torch.Tensor | None = None
    antecedent_indices: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


def bucket_distance(distance: torch.Tensor) -> torch.Tensor:
    """Distances >= 0 -> their bucket (`DISTANCE_BUCKETS`): themselves up to 4, then floor(log2) + 3."""
    log2 = torch.floor(torch.log2(distance.clamp(min=1).float())).long() + 3
    return torch.where(distance <= 4, distance, log2).clamp(max=DISTANCE_BUCKETS - 1)


def _ffnn(width: int, hidden: int, dropout: float) -> nn.Sequential:
    """Lee et al.'s scorer: two hidden layers with ReLU and dropout, then one score. The score has no bias: a bias
    is a constant added to every real antecedent against the dummy's fixed 0, the shortcut by which a model whose
    pruning keeps no gold mention yet learns "no antecedent anywhere" in a few steps and then learns nothing (its
    loss near 0); without it, 1 run in 4 on the generated set of tests/test_coreference.py ended so, none after."""
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 1, bias=False))


class ElmoForCoreference(ElmoPreTrainedModelForTasks):
    """ELMo finding the clusters of mentions of a document, after Lee et al. (2017): every span of up to
    `config.coref_max_span_width` words within a sentence is represented by its first and last word's states, an
    attention-weighted sum of its words (its head) and an embedding of its width; a feed-forward net scores it as a
    mention; the `coref_spans_per_word` * words best spans are kept, and each is scored against the
    `coref_max_antecedents` kept spans before it (the two spans, their product and an embedding of their distance,
    plus both mention scores), and against a dummy antecedent of score 0 ("not coreferent with anything before").
    The loss is the negative marginal log-likelihood of the gold antecedents (the dummy where a span has none).

    A row is one document (or a segment of one): `input_ids` (batch, sentences, tokens, characters), each sentence
    as `ElmoTokenizer` makes it (`<S> ... </S>`). The biLM runs over each sentence on its own, as the ELMo paper's
    coreference model ran it and as the biLM was trained (one sentence at a time, from a zero state), so that a
    sentence's vectors never depend on the others; the words of a document are the words of its sentences in order
    (word positions count from 0 over the whole row, boundaries left out). With `config.token_classifier_encoder
    "lstm"`, a trainable biLSTM runs over each sentence's mixed vectors first (Lee et al.'s encoder, also per
    sentence). `(batch, tokens, characters)` reads each row as a document of one sentence.

    Simplifications of the paper's model at this scale: no speaker or genre features, and no rule against kept
    spans that cross each other; the distance is counted in kept spans, as the e2e-coref code counts it."""

    input_layout = "sentences"
    label_layout = "mentions"
    onnx_logits = None  # a document is a batch of sentences and the pruning a top-k per row: not one graph

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        width = self.representation_dim
        self.encoder = None
        if config.token_classifier_encoder == "lstm":
            self.encoder = nn.LSTM(width, self.head_hidden_size, batch_first=True, bidirectional=True)
            width = 2 * self.head_hidden_size
        features, hidden, dropout = config.coref_feature_size, config.coref_ffnn_size, FFNN_DROPOUT
        self.head_attention = nn.Linear(self.representation_dim, 1)
        self.width_embedding = nn.Embedding(config.coref_max_span_width, features)
        self.distance_embedding = nn.Embedding(DISTANCE_BUCKETS, features)
        self.span_width = 2 * width + self.representation_dim + features
        self.mention_scorer = _ffnn(self.span_width, hidden, dropout)
        self.antecedent_scorer = _ffnn(3 * self.span_width + features, hidden, dropout)
        self.post_init()

    # ------------------------------------------------------------------ the words of a document
    def document_words(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs):
        """The biLM over every sentence, then the words of each document in order: the head's inputs (B, N, D), the
        encoder's states (B, N, D'), each word's sentence (B, N), the words' mask (B, N), and the biLM layers of the
        real sentences (R, T, 2P)."""
        if input_ids is None or input_ids.dim() not in (3, 4):
            raise ValueError("input_ids must have shape (batch, sentences, tokens, characters) or (batch, tokens, "
                             f"characters), got {None if input_ids is None else tuple(input_ids.shape)}")
        if input_ids.dim() == 3:
            input_ids = input_ids.unsqueeze(1)
            attention_mask = None if attention_mask is None else attention_mask.unsqueeze(1)
        batch, sentences, tokens = input_ids.shape[:3]
        flat_ids = input_ids.reshape(batch * sentences, tokens, input_ids.shape[-1])
        flat_mask = (flat_ids != 0).any(-1) if attention_mask is None else attention_mask.reshape(-1, tokens).bool()
        real = flat_mask.any(1)  # padding sentences (a shorter document) never reach the biLM
        x, _, _, layers = self._task_inputs(flat_ids[real], flat_mask[real].long(), **kwargs)  # (R, T, D)
        words = flat_mask[real] & ~sentence_boundary_mask(flat_ids[real], self.config.sentence_boundary_rows).to(
            flat_mask.device)
        states = x
        if self.encoder is not None:
            lengths = flat_mask[real].sum(1).clamp(min=1)
            states = self.representation_dropout(run_lstm(self.encoder, x, lengths)[0])
        x_all = x.new_zeros(batch * sentences, tokens, x.shape[-1])
        x_all[real] = x
        states_all = states.new_zeros(batch * sentences, tokens, states.shape[-1])
        states_all[real] = states
        words_all = torch.zeros_like(flat_mask)
        words_all[real] = words
        words_all = words_all.view(batch, sentences * tokens)
        # the words of each row first, in their order (a stable sort of "is not a word"), then cut to the longest
        order = torch.argsort((~words_all).to(torch.int8), dim=1, stable=True)
        count = int(words_all.sum(1).max()) if words_all.numel() else 0
        order = order[:, :max(count, 1)]
        sentence_of = torch.div(order, tokens, rounding_mode="floor")
        mask = torch.gather(words_all, 1, order)

        def gather(values: torch.Tensor) -> torch.Tensor:
            values = values.view(batch, sentences * tokens, values.shape[-1])
            return torch.gather(values, 1, order.unsqueeze(-1).expand(-1, -1, values.shape[-1]))

        return gather(x_all), gather(states_all), sentence_of, mask, layers

    # ------------------------------------------------------------------ spans and their scores
    def candidate_spans(self, x: torch.Tensor, states: torch.Tensor, sentence_of: torch.Tensor, mask: torch.Tensor):
        """Every span of up to `coref_max_span_width` words within a sentence: its first and last word (B, S), its
        vector (B, S, G) and whether it is one (B, S), S = N * width, span s = start * width + (end - start)."""
        batch, words = mask.shape
        widths = self.config.coref_max_span_width
        starts = torch.arange(words, device=x.device).repeat_interleave(widths)  # (S,)
        offsets = torch.arange(widths, device=x.device).repeat(words)
        ends = starts + offsets
        inside = ends < words
        ends_c = ends.clamp(max=words - 1)
        valid = inside & mask[:, starts] & mask[:, ends_c] & (sentence_of[:, starts] == sentence_of[:, ends_c])
        # the head: attention over the span's words (Lee et al.'s head-finding attention)
        members = (starts.unsqueeze(1) + torch.arange(widths, device=x.device)).clamp(max=words - 1)  # (S, width)
        member_ok = (torch.arange(widths, device=x.device).unsqueeze(0) <= offsets.unsqueeze(1))  # (S, width)
        attention = self.head_attention(x).squeeze(-1)[:, members]  # (B, S, width)
        attention = attention.masked_fill(~member_ok, torch.finfo(attention.dtype).min).softmax(-1)
        head = torch.einsum("bsw,bswd->bsd", attention, x[:, members])
        width_vector = self.width_embedding(offsets).unsqueeze(0).expand(batch, -1, -1).to(x.dtype)
        spans = torch.cat([states[:, starts], states[:, ends_c], head, width_vector], dim=-1)
        return starts.expand(batch, -1), ends_c.expand(batch, -1), spans, valid

    def prune(self, scores: torch.Tensor, valid: torch.Tensor, words: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The kept spans of each row: the `coref_spans_per_word` * words best valid spans (at least one), in the
        order of the document (by start, then end). Returns their indices (B, K) and which are kept (B, K)."""
        keep = torch.minimum((words.float() * self.config.coref_spans_per_word).floor().long().clamp(min=1),
                             valid.sum(1))  # (B,)
        most = max(int(keep.max()), 1)
        masked = scores.masked_fill(~valid, torch.finfo(scores.dtype).min)
        best = masked.topk(most, dim=1).indices  # (B, K)
        kept = torch.arange(most, device=scores.device).unsqueeze(0) < keep.unsqueeze(1)
        # document order, the spans not kept last (their key past every index)
        keys = torch.where(kept, best, best.new_full(best.shape, scores.shape[1]) + best)
        keys, order = keys.sort(dim=1)
        return torch.gather(best, 1, order), torch.gather(kept, 1, order)

    def antecedent_scores(self, spans: torch.Tensor, mention: torch.Tensor, kept: torch.Tensor):
        """Each kept span against the `coref_max_antecedents` kept spans before it, nearest first: the logits (B, K,
        1 + A) with the dummy first, the antecedents' indices (K, A) and which are real (B, K, A)."""
        most = spans.shape[1]
        count = min(self.config.coref_max_antecedents, most - 1)
        distance = torch.arange(1, count + 1, device=spans.device)  # (A,), in kept spans
        index = torch.arange(most, device=spans.device).unsqueeze(1) - distance.unsqueeze(0)  # (K, A)
        real = (index >= 0).unsqueeze(0) & kept.unsqueeze(2) & kept[:, index.clamp(min=0)]  # (B, K, A)
        index = index.clamp(min=0)
        target = spans.unsqueeze(2).expand(-1, -1, count, -1)
        other = spans[:, index]  # (B, K, A, G)
        features = self.distance_embedding(bucket_distance(distance)).to(spans.dtype)
        pairs = torch.cat([target, other, target * other, features.expand(*target.shape[:3], -1)], dim=-1)
        scores = self.antecedent_scorer(pairs).squeeze(-1) + mention.unsqueeze(2) + mention[:, index]
        scores = scores.masked_fill(~real, torch.finfo(scores.dtype).min)
        return torch.cat([scores.new_zeros(*scores.shape[:2], 1), scores], dim=2), index, real

    # ------------------------------------------------------------------ loss and clusters
    def coreference_loss(self, logits, top_starts, top_ends, kept, index, real, labels) -> torch.Tensor:
        """The negative log of the summed probability of each kept span's gold antecedents (its dummy when none is
        kept), summed over the kept spans of a document, averaged over the documents. `labels` (B, M, 3): the gold
        mentions' first and last word and their cluster (1 or more; rows of -1 pad)."""
        labels = labels.to(logits.device)
        same = (top_starts.unsqueeze(2) == labels[:, None, :, 0]) & (top_ends.unsqueeze(2) == labels[:, None, :, 1])
        cluster = (same & (labels[:, None, :, 2] > 0)).long().mul(labels[:, None, :, 2]).amax(2)  # (B, K); 0 none
        gold = (cluster[:, index] == cluster.unsqueeze(2)) & (cluster.unsqueeze(2) > 0) & real  # (B, K, A)
        gold = torch.cat([~gold.any(2, keepdim=True), gold], dim=2)
        logits = logits.float()
        marginal = logits.masked_fill(~gold, torch.finfo(logits.dtype).min).logsumexp(2)
        losses = (logits.logsumexp(2) - marginal) * kept
        return losses.sum() / logits.shape[0]

    def _scores(self, input_ids, attention_mask, **kwargs):
        x, states, sentence_of, mask, layers = self.document_words(input_ids, attention_mask, **kwargs)
        starts, ends, spans, valid = self.candidate_spans(x, states, sentence_of, mask)
        mention = self.mention_scorer(spans).squeeze(-1)  # (B, S)
        best, kept = self.prune(mention, valid, mask.sum(1))
        spans, mention = spans[torch.arange(best.shape[0]).unsqueeze(1), best], torch.gather(mention, 1, best)
        top_starts = torch.gather(starts, 1, best).masked_fill(~kept, -1)
        top_ends = torch.gather(ends, 1, best).masked_fill(~kept, -1)
        logits, index, real = self.antecedent_scores(spans, mention, kept)
        return logits, top_starts, top_ends, kept, index, real, layers

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> ElmoCoreferenceOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, sentences, tokens, max_characters_per_token)`): each
                document's sentences as `ElmoTokenizer` gives them, padded with all-zero tokens and sentences.
            attention_mask (`torch.Tensor` of shape `(batch, sentences, tokens)`, *optional*): 1 for real tokens.
            labels (`torch.LongTensor` of shape `(batch, mentions, 3)`, *optional*): the gold mentions of each
                document, `(first word, last word, cluster)` with word positions over the document (from 0, `<S>` and
                `</S>` not counted) and clusters numbered from 1; rows of -1 pad.
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers, of shape `(real sentences,
                tokens, 2P)`, the sentences of the batch in order.
        """
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        logits, top_starts, top_ends, kept, index, real, layers = self._scores(input_ids, attention_mask, **kwargs)
        loss = None
        if labels is not None:
            if labels.dim() != 3 or labels.shape[0] != logits.shape[0] or labels.shape[2] != 3:
                raise ValueError(f"labels must have shape [batch, mentions, 3] (first word, last word, cluster), "
                                 f"batch {logits.shape[0]}, got {tuple(labels.shape)}")
            loss = self._regularized(self.coreference_loss(logits, top_starts, top_ends, kept, index, real, labels))
        return ElmoCoreferenceOutput(
            loss=loss, logits=logits, top_spans=torch.stack([top_starts, top_ends], dim=-1),
            antecedent_indices=index.unsqueeze(0).expand(logits.shape[0], -1, -1).clone(),
            hidden_states=layers if output_hidden_states else None)

    @torch.no_grad()
    def decode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               **kwargs) -> list[list[list[tuple[int, int]]]]:
        """The clusters of each row: lists of `(first word, last word)` spans, in the order of their first mention.
        Each kept span joins the cluster of its best antecedent, unless the dummy scores best."""
        output = self(input_ids, attention_mask=attention_mask, return_dict=True, **kwargs)
        return predicted_clusters(output.logits, output.top_spans, output.antecedent_indices)


def predicted_clusters(logits, top_spans, antecedent_indices) -> list[list[list[tuple[int, int]]]]:
    """Clusters from antecedent scores: a span whose best antecedent is a real one joins (or opens, with it) that
    one's cluster. Spans in document order, so an antecedent is placed before the spans that point to it."""
    best = logits.argmax(-1).tolist()
    spans, indices = top_spans.tolist(), antecedent_indices.tolist()
    documents = []
    for row in range(len(best)):
        cluster_of: dict[tuple[int, int], int] = {}
        clusters: list[list[tuple[int, int]]] = []
        for k, choice in enumerate(best[row]):
            if spans[row][k][0] < 0 or choice == 0:  # not a kept span, or no antecedent
                continue
            antecedent, span = tuple(spans[row][indices[row][k][choice - 1]]), tuple(spans[row][k])
            if antecedent not in cluster_of:
                cluster_of[antecedent] = len(clusters)
                clusters.append([antecedent])
            if span not in cluster_of:
                cluster_of[span] = cluster_of[antecedent]
                clusters[cluster_of[span]].append(span)
        documents.append(clusters)
    return documents


__all__ = ["ElmoForCoreference"]
