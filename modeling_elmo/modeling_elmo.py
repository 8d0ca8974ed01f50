"""ELMo biLM (Peters et al. 2018, "Deep contextualized word representations") as a transformers model.

Read top to bottom: the character encoder (layer 0), the biLSTM with projection, the base
`ElmoPreTrainedModel` (all initialisation), `ElmoModel`. Facts about the original TensorFlow model are
cited from `ELMO_SPEC.md` (shared docs) by section.

This file travels to the Hub as remote code: it imports only torch, transformers and its siblings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput, logging

from .configuration_elmo import ElmoConfig

logger = logging.get_logger(__name__)

# `state` is a pair (h, c): h of shape (L, 2, B, P), c of shape (L, 2, B, C); index 1 is the direction
# (0 = forward, 1 = backward), index 2 the batch row.
ElmoState = tuple[torch.Tensor, torch.Tensor]


# --------------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------------


@dataclass
class ElmoModelOutput(ModelOutput):
    """Output of `ElmoModel`.

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch, tokens, 2 * projection_dim)`):
            the top biLSTM layer, forward half first. Zeros at padding positions.
        hidden_states (`tuple(torch.FloatTensor)` of L + 1 tensors of that shape, with `output_hidden_states=True`):
            layer 0 (the context-independent token embedding, duplicated to `2 * projection_dim`), then
            every biLSTM layer.
        state (`tuple(torch.FloatTensor)`, with `use_cache=True`): `(h, c)` of shapes
            `(num_layers, 2, batch, projection_dim)` and `(num_layers, 2, batch, cell_size)`, the final LSTM
            states of every row, both directions (forward: after the row's last token; backward: after its
            first). Pass it back as `state=` to continue from there.
    """

    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: ElmoState | None = None


@dataclass
class ElmoForPreTrainingOutput(ModelOutput):
    """Output of `ElmoForPreTraining`.

    Args:
        loss (`torch.FloatTensor` of shape `()`): mean of the forward and backward LM losses.
        forward_loss, backward_loss (`torch.FloatTensor` of shape `()`): mean negative log-likelihood per
            predicted token of each direction; `exp` of either is its perplexity.
        forward_tokens, backward_tokens (`torch.LongTensor` of shape `()`): how many targets each loss averages.
        last_hidden_state, hidden_states, state: as in `ElmoModelOutput`.
    """

    loss: torch.FloatTensor | None = None
    forward_loss: torch.FloatTensor | None = None
    backward_loss: torch.FloatTensor | None = None
    forward_tokens: torch.LongTensor | None = None
    backward_tokens: torch.LongTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: ElmoState | None = None


# --------------------------------------------------------------------------------------------------
# Layer 0: the context-independent character encoder (ELMO_SPEC section 3)
# --------------------------------------------------------------------------------------------------


class ElmoHighway(nn.Module):
    """One highway layer: `y = g * relu(x W_t + b_t) + (1 - g) * x` with `g = sigmoid(x W_c + b_c)`.

    The leaf names keep bilm-tf's: its "carry" gate weights the *transform* branch (ELMO_SPEC 3.3), and the
    transform is a ReLU whatever the CNN activation is.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        width = config.num_char_filters
        self.carry = nn.Linear(width, width)
        self.transform = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.carry(x))
        return gate * F.relu(self.transform(x)) + (1.0 - gate) * x


class ElmoCharacterEncoder(nn.Module):
    """Characters of each token -> a token vector of size `projection_dim` (layer 0 of ELMo).

    Character embedding, one convolution per `[width, count]` filter, max-pooling over the character
    positions, the activation, highway layers, then a linear projection (absent when F == P).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        # Row 0 is the padding id and stays zero (the stored table has 261 rows, ELMO_SPEC 1).
        self.char_embedding = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, count, kernel_size=width) for width, count in config.char_cnn_filters
        )
        self.activation = torch.tanh if config.char_cnn_activation == "tanh" else F.relu
        self.highways = nn.ModuleList(ElmoHighway(config) for _ in range(config.num_highway_layers))
        filters = config.num_char_filters
        self.projection = nn.Linear(filters, config.projection_dim) if filters != config.projection_dim else None

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """`char_ids` (N, 50) of real tokens -> (N, P)."""
        chars = self.char_embedding(char_ids).transpose(1, 2)  # (N, d, 50)
        # Max-pool then activate: the same as activate then max-pool, both are monotone (ELMO_SPEC 3.2).
        pooled = [conv(chars).amax(dim=-1) for conv in self.convolutions]  # F_i x (N, n_i)
        x = self.activation(torch.cat(pooled, dim=-1))  # (N, F)
        for highway in self.highways:
            x = highway(x)
        if self.projection is not None:
            x = self.projection(x)  # (N, P)
        return x


# --------------------------------------------------------------------------------------------------
# The biLSTM with projection and clipping (ELMO_SPEC section 4)
# --------------------------------------------------------------------------------------------------


class ElmoBiLstmLayer(nn.Module):
    """One biLSTM layer: the forward and backward LSTM cells of one depth, stacked on a leading axis of 2.

    Parameters use `torch.nn.LSTM`'s names and gate order (i, f, g, o), with the forget-gate bias of
    +1 folded into `bias` (bilm-tf adds it at run time; the converter adds it when loading).

    - `weight_ih` (2, 4C, P), `weight_hh` (2, 4C, P), `bias` (2, 4C);
    - `weight_hr` (2, P, C): the projection of the cell output, no bias (absent when C == P).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        cell, proj = config.cell_size, config.projection_dim
        self.cell_size, self.projection_dim = cell, proj
        self.cell_clip, self.proj_clip = config.cell_clip, config.proj_clip
        self.weight_ih = nn.Parameter(torch.empty(2, 4 * cell, proj))
        self.weight_hh = nn.Parameter(torch.empty(2, 4 * cell, proj))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell))
        self.weight_hr = nn.Parameter(torch.empty(2, proj, cell)) if cell != proj else None

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """Run both directions over time-major, length-sorted input.

        Args:
            inputs: (2, T, B, P); direction 1 holds each row already reversed within its own length.
                Rows are sorted by decreasing length, so at step t only the first `batch_sizes[t]` rows
                are real and no work is spent on padding.
            batch_sizes: the number of real rows at each step, non-increasing.
            state: (h, c) of shapes (2, B, P) and (2, B, C).

        Returns:
            outputs (2, T, B, P), zero past each row's length, and the final (h, c) of every row.
        """
        h, c = state
        cell = self.cell_size
        # Input projections of every timestep in one matrix multiply (bias included).
        x_proj = torch.baddbmm(
            self.bias.unsqueeze(1), inputs.flatten(1, 2), self.weight_ih.transpose(1, 2)
        ).view(2, inputs.shape[1], inputs.shape[2], 4 * cell)  # (2, T, B, 4C)
        w_hh = self.weight_hh.transpose(1, 2)  # (2, P, 4C)
        w_hr = self.weight_hr.transpose(1, 2) if self.weight_hr is not None else None  # (2, C, P)
        outputs = []
        for t, active in enumerate(batch_sizes):
            h_t, c_t = h[:, :active], c[:, :active]
            gates = torch.baddbmm(x_proj[:, t, :active], h_t, w_hh)  # (2, b, 4C)
            in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)
            c_new = torch.sigmoid(forget_gate) * c_t + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
            if self.cell_clip is not None:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = torch.sigmoid(out_gate) * torch.tanh(c_new)  # (2, b, C)
            if w_hr is not None:
                h_new = torch.bmm(h_new, w_hr)  # (2, b, P)
            if self.proj_clip is not None:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h_new)
            if active == h.shape[1]:
                h, c = h_new, c_new
            else:  # rows past their length keep their state
                h = torch.cat([h_new, h[:, active:].to(h_new.dtype)], dim=1)
                c = torch.cat([c_new, c[:, active:].to(c_new.dtype)], dim=1)
        batch = inputs.shape[2]
        out = torch.stack([F.pad(o, (0, 0, 0, batch - o.shape[1])) for o in outputs], dim=1)  # (2, T, B, P)
        return out, (h, c)


def _reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of `x` (B, T, ...) within its own length; positions past it stay where they are."""
    batch, steps = x.shape[:2]
    positions = torch.arange(steps, device=x.device).expand(batch, steps)
    lengths = lengths.unsqueeze(1)
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)  # (B, T)
    index = index.view(batch, steps, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class ElmoBiLm(nn.Module):
    """L biLSTM layers over the token vectors, padding-aware, without sorting the caller's batch."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.layers = nn.ModuleList(ElmoBiLstmLayer(config) for _ in range(config.num_layers))
        self.use_skip_connections = config.use_skip_connections
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        state: ElmoState,
        backward_tokens: torch.Tensor | None = None,
    ) -> tuple[list[torch.Tensor], ElmoState]:
        """`tokens` (B, T, P), `lengths` (B,), `state` (h (L,2,B,P), c (L,2,B,C)) ->
        a list of L outputs (B, T, 2P) and the final state.

        `backward_tokens` (B, T, P), for stream training: the sequence the backward LSTM reads, already in
        its reading order (bilm-tf feeds it each sentence reversed); its outputs are then returned in that
        order instead of being aligned to `tokens`.
        """
        batch, steps, _ = tokens.shape
        # Sort rows by decreasing length so that each step only touches real rows (like packed sequences).
        order = torch.argsort(lengths, descending=True, stable=True)
        restore = torch.argsort(order)
        sorted_lengths = lengths[order]
        batch_sizes = (sorted_lengths.unsqueeze(0) > torch.arange(steps, device=lengths.device).unsqueeze(1)).sum(1)
        batch_sizes = [int(b) for b in batch_sizes.tolist() if b > 0]
        x = tokens[order]
        if backward_tokens is None:
            # Backward direction: each row reversed within its length, so it starts on its own last token.
            x = torch.stack([x, _reverse_within_lengths(x, sorted_lengths)])  # (2, B, T, P)
        else:
            x = torch.stack([x, backward_tokens[order]])  # (2, B, T, P)
        x = x[:, :, : len(batch_sizes)].transpose(1, 2)  # (2, T', B, P), time-major
        h0, c0 = state[0][:, :, order], state[1][:, :, order]

        layer_outputs, final_h, final_c = [], [], []
        for index, layer in enumerate(self.layers):
            out, (h, c) = layer(self.dropout(x), batch_sizes, (h0[index], c0[index]))
            if self.use_skip_connections and index > 0:  # the residual touches the output, not the state
                out = out + x  # both are zero past each row's length
            x = out
            final_h.append(h)
            final_c.append(c)
            layer_outputs.append(out)

        results = []
        for out in layer_outputs:
            out = out.transpose(1, 2)  # (2, B, T', P)
            out = F.pad(out, (0, 0, 0, steps - out.shape[2]))
            backward = out[1] if backward_tokens is not None else _reverse_within_lengths(out[1], sorted_lengths)
            results.append(torch.cat([out[0], backward], dim=-1)[restore])  # (B, T, 2P)
        h = torch.stack(final_h)[:, :, restore]
        c = torch.stack(final_c)[:, :, restore]
        return results, (h, c)


# --------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------


class ElmoPreTrainedModel(PreTrainedModel):
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = ["ElmoBiLstmLayer"]

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        model = super().from_pretrained(*args, **kwargs)
        # Weights memory-mapped from safetensors can sit at addresses that make the BLAS kernels take another
        # path, which changes results in the last bit. Copying them makes a loaded model give exactly the
        # outputs of the model that was saved.
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                if tensor.device.type == "cpu" and tensor.data_ptr() % 64:
                    tensor.data = tensor.data.clone()
        return model

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialise every parameter, as bilm-tf's training graph does where it is known."""
        std = self.config.initializer_range
        if isinstance(module, ElmoCharacterEncoder):
            init.uniform_(module.char_embedding.weight, -1.0, 1.0)
            # The padding row of the character table is zero (ELMO_SPEC 3.1).
            init.copy_(module.char_embedding.weight[0], torch.zeros_like(module.char_embedding.weight[0]))
            for conv in module.convolutions:
                init.uniform_(conv.weight, -0.05, 0.05)
                init.zeros_(conv.bias)
            if module.projection is not None:
                init.normal_(module.projection.weight, std=1.0 / math.sqrt(module.projection.in_features))
                init.zeros_(module.projection.bias)
        elif isinstance(module, ElmoHighway):
            width = module.carry.in_features
            init.normal_(module.carry.weight, std=1.0 / math.sqrt(width))
            init.constant_(module.carry.bias, -2.0)  # bilm-tf starts the highway mostly carrying x through
            init.normal_(module.transform.weight, std=1.0 / math.sqrt(width))
            init.zeros_(module.transform.bias)
        elif isinstance(module, ElmoBiLstmLayer):
            bound = 1.0 / math.sqrt(module.projection_dim)
            init.uniform_(module.weight_ih, -bound, bound)
            init.uniform_(module.weight_hh, -bound, bound)
            cell = module.cell_size
            bias = torch.zeros(2, 4 * cell)
            bias[:, cell : 2 * cell] = 1.0  # forget-gate bias of +1, as bilm-tf's LSTMCell(forget_bias=1.0)
            init.copy_(module.bias, bias)
            if module.weight_hr is not None:
                init.uniform_(module.weight_hr, -1.0 / math.sqrt(cell), 1.0 / math.sqrt(cell))
        elif isinstance(module, ElmoSoftmax) and module.softmax_type != "adaptive":
            init.normal_(module.weight, std=1.0 / math.sqrt(module.weight.shape[1]))
            init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):  # heads and the adaptive softmax
            init.normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, std=std)

    def _check_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Validate `input_ids` and `attention_mask`; return the token lengths (B,) of the right-padded rows."""
        config = self.config
        if not isinstance(input_ids, torch.Tensor):
            raise ValueError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dim() != 3 or input_ids.shape[-1] != config.max_characters_per_token:
            raise ValueError(
                "input_ids must be character ids of shape [batch, tokens, "
                f"{config.max_characters_per_token}] (ElmoTokenizer gives them), got shape {tuple(input_ids.shape)}"
            )
        if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
        if input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
            raise ValueError(f"input_ids is empty: shape {tuple(input_ids.shape)}; give at least one token per row")
        if not torch.compiler.is_compiling():
            low, high = int(input_ids.min()), int(input_ids.max())
            if low < 0 or high >= config.char_vocab_size:
                raise ValueError(
                    f"input_ids must lie in [0, {config.char_vocab_size}), got values from {low} to {high}"
                )
        token_mask = (input_ids > 0).any(-1)  # (B, T): a token is real iff any of its ids is > 0
        if attention_mask is None:
            attention_mask = token_mask
        elif attention_mask.shape != input_ids.shape[:2]:
            raise ValueError(
                f"attention_mask must have shape [batch, tokens] = {tuple(input_ids.shape[:2])}, "
                f"got {tuple(attention_mask.shape)}"
            )
        mask = attention_mask.bool()
        lengths = mask.sum(-1)
        if not torch.compiler.is_compiling():
            if bool((lengths == 0).any()):
                rows = (lengths == 0).nonzero().flatten().tolist()
                raise ValueError(f"rows {rows} have no tokens; every row needs at least one (e.g. <S> </S>)")
            steps = torch.arange(mask.shape[1], device=mask.device)
            if not bool((mask == (steps < lengths.unsqueeze(1))).all()):
                raise ValueError("attention_mask must be right-padded: ones for the real tokens first, then zeros")
            if bool((mask & ~token_mask).any()):
                raise ValueError("attention_mask marks positions as real whose character ids are all 0 (padding)")
        return lengths


class ElmoModel(ElmoPreTrainedModel):
    """The ELMo biLM without a softmax: character ids -> L + 1 layers of contextual token vectors.

    Stateless: every call starts from a zero LSTM state unless `state=` is given, so a sentence's vectors
    never depend on its batch, its row, its padding or earlier calls.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilm = ElmoBiLm(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.char_encoder.char_embedding

    def embed_tokens(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Layer 0 for the real positions only: (B, T, 50), (B, T) -> (B, T, P), zeros at padding."""
        flat_ids = input_ids[mask]  # (N, 50): no work on padding
        encoded = self.char_encoder(flat_ids.long())
        out = encoded.new_zeros(*mask.shape, encoded.shape[-1])
        out[mask] = encoded
        return out

    def zero_state(self, batch_size: int, device=None, dtype=torch.float32) -> ElmoState:
        c = self.config
        h = torch.zeros(c.num_layers, 2, batch_size, c.projection_dim, device=device, dtype=dtype)
        return h, torch.zeros(c.num_layers, 2, batch_size, c.cell_size, device=device, dtype=dtype)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        state: ElmoState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        backward_input_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> ElmoModelOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, tokens, max_characters_per_token)`):
                character ids from `ElmoTokenizer` (with `<S>`/`</S>`), right-padded with all-zero tokens.
            attention_mask (`torch.Tensor` of shape `(batch, tokens)`, *optional*):
                1 for real tokens; derived from `input_ids` when absent.
            state (`tuple(torch.FloatTensor)`, *optional*): `(h, c)` from a previous call's output with
                `use_cache=True`, to continue every row from where it stopped. Zeros when absent.
            use_cache (`bool`, *optional*): return the final LSTM states as `state`.
            output_hidden_states (`bool`, *optional*): return all L + 1 layers.
            backward_input_ids (`torch.LongTensor` of the shape of `input_ids`, *optional*): for training on
                token streams as bilm-tf did: what the backward LSTM reads, in its reading order (each sentence
                reversed), with the same lengths as `input_ids`. Its half of every output is then in that
                order. Leave it out to get ordinary contextual vectors.
        """
        if input_ids is None:
            raise ValueError("ElmoModel needs input_ids: character ids of shape [batch, tokens, 50]")
        unexpected = {k for k in kwargs if k not in ("token_type_ids", "position_ids")}
        if unexpected:
            raise TypeError(f"ElmoModel.forward got unexpected arguments {sorted(unexpected)}")
        config = self.config
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else config.return_dict
        use_cache = bool(use_cache)

        lengths = self._check_inputs(input_ids, attention_mask)
        batch, steps = input_ids.shape[:2]
        mask = torch.arange(steps, device=input_ids.device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)

        tokens = self.embed_tokens(input_ids, mask)  # (B, T, P)
        backward_tokens = None
        if backward_input_ids is not None:
            if backward_input_ids.shape != input_ids.shape:
                raise ValueError(
                    f"backward_input_ids must have the shape of input_ids {tuple(input_ids.shape)}, "
                    f"got {tuple(backward_input_ids.shape)}"
                )
            if not torch.equal(self._check_inputs(backward_input_ids, None), lengths):
                raise ValueError("backward_input_ids must have the same number of tokens as input_ids in every row")
            backward_tokens = self.embed_tokens(backward_input_ids, mask)
        if state is None:
            state = self.zero_state(batch, device=tokens.device, dtype=tokens.dtype)
        else:
            state = self._check_state(state, batch)
        layers, final_state = self.bilm(tokens, lengths, state, backward_tokens)

        last_hidden_state = layers[-1]
        hidden_states = None
        if output_hidden_states:
            hidden_states = (torch.cat([tokens, tokens], dim=-1), *layers)  # layer 0 duplicated to 2P
        final_state = final_state if use_cache else None
        if not return_dict:
            return tuple(v for v in (last_hidden_state, hidden_states, final_state) if v is not None)
        return ElmoModelOutput(last_hidden_state=last_hidden_state, hidden_states=hidden_states, state=final_state)

    def _check_state(self, state: ElmoState, batch: int) -> ElmoState:
        c = self.config
        if not isinstance(state, (tuple, list)) or len(state) != 2:
            raise ValueError("state must be the pair (h, c) returned as `state` by a call with use_cache=True")
        h, cell = state
        expected_h = (c.num_layers, 2, batch, c.projection_dim)
        expected_c = (c.num_layers, 2, batch, c.cell_size)
        if tuple(h.shape) != expected_h or tuple(cell.shape) != expected_c:
            raise ValueError(
                f"state shapes must be h {expected_h} and c {expected_c} for this batch, "
                f"got {tuple(h.shape)} and {tuple(cell.shape)}"
            )
        return h, cell


class ElmoSoftmax(nn.Module):
    """The word softmax shared by both LM directions: full, sampled (as bilm-tf trained) or adaptive.

    `weight` (V, P) and `bias` (V,) for "full" and "sampled"; "adaptive" uses
    `torch.nn.AdaptiveLogSoftmaxWithLoss` with `config.adaptive_cutoffs`.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        if config.vocab_size < 1:
            raise ValueError("ElmoForPreTraining needs a word vocabulary: set ElmoConfig.vocab_size > 0")
        self.softmax_type = config.softmax_type
        self.vocab_size = config.vocab_size
        self.num_sampled = config.num_sampled
        if self.softmax_type == "adaptive":
            cutoffs = config.adaptive_cutoffs or _default_cutoffs(config.vocab_size)
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(config.projection_dim, config.vocab_size, cutoffs, div_value=4.0)
        else:
            self.weight = nn.Parameter(torch.empty(config.vocab_size, config.projection_dim))
            self.bias = nn.Parameter(torch.empty(config.vocab_size))

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full log-probabilities over the vocabulary: (N, P) -> (N, V)."""
        if self.softmax_type == "adaptive":
            return self.adaptive.log_prob(hidden)
        return F.log_softmax(F.linear(hidden, self.weight, self.bias).float(), dim=-1)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of `targets` (N,) given `hidden` (N, P).

        While training with the sampled softmax, an estimate from `num_sampled` negatives shared by the
        batch (log-uniform over a frequency-sorted vocabulary, accidental hits removed, logits corrected by
        the log expected count), as TensorFlow's `sampled_softmax_loss` that bilm-tf used. Otherwise exact.
        """
        if self.softmax_type == "adaptive":
            return -self.adaptive(hidden, targets).output.float().sum()
        if self.softmax_type == "sampled" and self.training and self.num_sampled < self.vocab_size:
            return self._sampled_nll(hidden, targets)
        logits = F.linear(hidden, self.weight, self.bias).float()
        return F.cross_entropy(logits, targets, reduction="sum")

    def _log_uniform_log_q(self, ids: torch.Tensor, num_tries: int) -> torch.Tensor:
        """Log of the probability that `ids` is among the distinct ids of `num_tries` log-uniform draws."""
        ids = ids.double()
        prob = (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / math.log(self.vocab_size + 1.0)
        return torch.log(-torch.expm1(num_tries * torch.log1p(-prob))).float()

    def _sample_negatives(self, device: torch.device) -> tuple[torch.Tensor, int]:
        """`num_sampled` distinct ids from the log-uniform (Zipfian) distribution over a frequency-sorted
        vocabulary, P(k) = log((k + 2) / (k + 1)) / log(V + 1), and the number of draws it took."""
        draws = torch.rand(4 * self.num_sampled + 64, device=device, dtype=torch.float64)
        ids = (torch.exp(draws * math.log(self.vocab_size + 1.0)).floor().long() - 1).clamp_(0, self.vocab_size - 1)
        unique, inverse = torch.unique(ids, return_inverse=True)
        positions = torch.arange(ids.numel(), device=device)
        first = torch.full((unique.numel(),), ids.numel(), device=device).scatter_reduce(0, inverse, positions, "amin")
        first, order = first.sort()  # distinct ids in the order they were drawn
        count = min(self.num_sampled, unique.numel())
        num_tries = int(first[count - 1]) + 1 if count == self.num_sampled else ids.numel()
        return unique[order[:count]], num_tries

    def _sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        sampled, num_tries = self._sample_negatives(hidden.device)  # (S,)
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]  # (N,)
        true_logits = true_logits.float() - self._log_uniform_log_q(targets, num_tries)
        sampled_logits = F.linear(hidden, self.weight[sampled], self.bias[sampled]).float()  # (N, S)
        sampled_logits = sampled_logits - self._log_uniform_log_q(sampled, num_tries)
        hits = targets.unsqueeze(1) == sampled.unsqueeze(0)  # accidental hits: a target among the negatives
        sampled_logits = sampled_logits.masked_fill(hits, float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        return F.cross_entropy(logits, torch.zeros_like(targets), reduction="sum")


def _default_cutoffs(vocab_size: int) -> list[int]:
    cutoffs = [c for c in (2000, 10000, 50000) if c < vocab_size]
    return cutoffs or [max(1, vocab_size // 2)]


def _shifted_targets(labels: torch.Tensor, shift: int) -> torch.Tensor:
    """labels (B, T) -> the label `shift` positions later (+1) or earlier (-1), -100 past the ends."""
    out = torch.full_like(labels, -100)
    if shift > 0:
        out[:, :-shift] = labels[:, shift:]
    else:
        out[:, -shift:] = labels[:, :shift]
    return out


class ElmoForPreTraining(ElmoPreTrainedModel):
    """The biLM objective (Peters et al. 2018, section 3.1): the forward LM predicts the next word and the
    backward LM the previous one, each from its own direction's top layer, through one shared softmax.
    The loss is the mean of the two directions' mean losses.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        self.dropout = nn.Dropout(config.dropout)  # bilm-tf: dropout on the LSTM output before the softmax
        self.softmax = ElmoSoftmax(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        forward_labels: torch.Tensor | None = None,
        backward_labels: torch.Tensor | None = None,
        backward_input_ids: torch.Tensor | None = None,
        state: ElmoState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ElmoForPreTrainingOutput | tuple:
        r"""
        Args:
            labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*): the word-vocabulary id of
                every input token (-100 where there is none, e.g. padding), as `ElmoTokenizer` gives with a
                vocabulary. The forward target at position t is `labels[t + 1]`, the backward one `labels[t - 1]`.
            forward_labels, backward_labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*):
                explicit targets of each direction at each position, instead of `labels`: in stream training
                the last token of a window predicts the first of the next.
            backward_input_ids: see `ElmoModel.forward`.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        outputs = self.elmo(
            input_ids,
            attention_mask=attention_mask,
            state=state,
            use_cache=use_cache,
            output_hidden_states=output_hidden_states,
            backward_input_ids=backward_input_ids,
            return_dict=True,
            **kwargs,
        )
        if labels is not None:
            if forward_labels is not None or backward_labels is not None:
                raise ValueError("give either labels or forward_labels/backward_labels, not both")
            if labels.shape != outputs.last_hidden_state.shape[:2]:
                raise ValueError(f"labels must have shape [batch, tokens], got {tuple(labels.shape)}")
            forward_labels, backward_labels = _shifted_targets(labels, 1), _shifted_targets(labels, -1)
        loss = forward_loss = backward_loss = forward_tokens = backward_tokens = None
        if forward_labels is not None and backward_labels is not None:
            # no prediction from padding positions (a shifted label can land there)
            real = attention_mask.bool() if attention_mask is not None else (input_ids > 0).any(-1)
            forward_labels = forward_labels.masked_fill(~real, -100)
            backward_labels = backward_labels.masked_fill(~real, -100)
            p = self.config.projection_dim
            top = self.dropout(outputs.last_hidden_state)
            losses, counts = [], []
            for half, targets in ((top[..., :p], forward_labels), (top[..., p:], backward_labels)):
                valid = targets != -100
                chosen = targets[valid]
                if chosen.numel() and (int(chosen.min()) < 0 or int(chosen.max()) >= self.config.vocab_size):
                    raise ValueError(
                        f"labels must be word ids in [0, {self.config.vocab_size}) or -100, "
                        f"got values from {int(chosen.min())} to {int(chosen.max())}"
                    )
                count = valid.sum()
                losses.append(self.softmax.nll(half[valid], chosen) / count.clamp(min=1))
                counts.append(count)
            forward_loss, backward_loss = losses
            forward_tokens, backward_tokens = counts
            loss = 0.5 * (forward_loss + backward_loss)
        elif forward_labels is not None or backward_labels is not None:
            raise ValueError("give both forward_labels and backward_labels")

        output = ElmoForPreTrainingOutput(
            loss=loss,
            forward_loss=forward_loss,
            backward_loss=backward_loss,
            forward_tokens=forward_tokens,
            backward_tokens=backward_tokens,
            last_hidden_state=outputs.last_hidden_state,
            hidden_states=outputs.hidden_states,
            state=outputs.state,
        )
        return output if return_dict else output.to_tuple()

    @torch.no_grad()
    def initialize_softmax_from_token_embeddings(self, char_ids: torch.Tensor, batch_size: int = 4096) -> None:
        """Set the softmax to the model's own layer-0 vectors of the vocabulary words, and the bias to 0.

        A good start for continuing training from published weights, which hold no softmax.

        Args:
            char_ids (`torch.LongTensor` of shape `(vocab_size, max_characters_per_token)`): the character ids
                of every vocabulary word, in vocabulary order.
        """
        if self.softmax.softmax_type == "adaptive":
            raise ValueError("initialising from token embeddings needs the full or sampled softmax")
        if tuple(char_ids.shape) != (self.config.vocab_size, self.config.max_characters_per_token):
            raise ValueError(
                f"char_ids must have shape ({self.config.vocab_size}, {self.config.max_characters_per_token}), "
                f"got {tuple(char_ids.shape)}"
            )
        encoder = self.elmo.char_encoder
        vectors = [encoder(chunk.to(self.device)) for chunk in char_ids.split(batch_size)]
        self.softmax.weight.copy_(torch.cat(vectors))
        self.softmax.bias.zero_()


__all__ = [
    "ElmoModelOutput",
    "ElmoForPreTrainingOutput",
    "ElmoPreTrainedModel",
    "ElmoModel",
    "ElmoForPreTraining",
]
