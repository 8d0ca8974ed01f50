"""ELMo biLM (Peters et al. 2018, "Deep contextualized word representations") as a transformers model.

Read top to bottom: the outputs, layer 0 (the character encoder), the biLSTM with projection and the stack of
layers, the base `ElmoPreTrainedModel` (all initialisation, input checks), `ElmoModel`, then `ElmoForPreTraining`
(the softmax is in `softmax_elmo.py`); the task heads are in `modeling_elmo_heads.py`. The layers here are the
reference implementation, written for autograd. The kernels that run the same functions faster register themselves
in `kernels_elmo.py` (`ALL_LSTM_FUNCTIONS`, `ALL_CHAR_CNN_FUNCTIONS`) when their files are imported (all of them
are, below), and one function per layer kind names the kernel of a call (`lstm_implementation`,
`char_cnn_implementation`), run by `ElmoBiLm.forward` and `ElmoCharacterEncoder.forward`. The original model's quirks
are described in docs/original_model.md, the module layout and the fast paths in docs/architecture.md.

This file travels to the Hub as remote code with its siblings: it imports only torch, transformers and them.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput, logging

from .char_cnn_kernels_elmo import char_cnn_implementation
from .character_ids import real_token_mask
from .compat_elmo import (
    FROM_PRETRAINED_TAKES_KEY_MAPPING,
    INITIALIZE_WEIGHTS_ARGS,
    SAVE_PRETRAINED_KEEPS_NAMES,
    can_return_tuple,
    init,
    warn_dotted_folder,
)
from .config_choices_elmo import CHOICES  # noqa: F401
from .configuration_elmo import ElmoConfig
from .inputs_elmo import answer_layer_count_probe, check_inputs, check_state
from .kernels_elmo import ALL_CHAR_CNN_FUNCTIONS, ALL_LSTM_FUNCTIONS
from .lstm_graph_elmo import lstm_graph  # noqa: F401  (imported for its registration: the "graph" kernel)
from .lstm_inference_elmo import lstm_implementation, packed_index
from .lstm_training_elmo import lstm_training  # noqa: F401  (imported for its registration: the "training" kernel)
from .matmul_elmo import PackedWeights, float32_cudnn, forget_inference_copies, needs_grad
from .push_to_hub_elmo import ElmoPushToHubMixin
from .quantization_elmo import quantize_int8
from .remote_code_elmo import copy_model_code, is_remote_code
from .softmax_elmo import ElmoSoftmax, shifted_targets
from .token_cache_elmo import ElmoTokenCache, ElmoTokenCacheMixin
from .word_char_encoder import ElmoWordCharEncoder

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .lstm_triton_elmo import available  # noqa: F401

logger = logging.get_logger(__name__)

# The weights checkpoints saved by earlier releases name otherwise (regular expression -> today's name): the scalar
# mixes' scale was `gamma` (`downstream_elmo.ElmoScalarMix`).
OLD_WEIGHT_NAMES = {r"(scalar_mixes\.\d+)\.gamma$": r"\1.scale"}

# `state` is a pair (h, c): h of shape (L, 2, B, P), c of shape (L, 2, B, C); index 1 is the direction
# (0 = forward, 1 = backward), index 2 the batch row. The LSTM state, asked for with `return_state=True` or its
# transformers-style alias `use_cache=True`; not to be confused with the token cache of layer-0 vectors.
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
            layer 0 (the context-independent token embedding, duplicated to `2 * projection_dim`: the tensor
            the biLSTM reads, one half per direction, so gradients reach it), then every biLSTM layer.
        state (`tuple(torch.FloatTensor)`, with `return_state=True` / `use_cache=True`): `(h, c)` of shapes
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
# Layer 0: the context-independent character encoder (docs/original_model.md, "Character encoder")
# --------------------------------------------------------------------------------------------------


class ElmoHighway(nn.Module):
    """One highway layer: `y = g * relu(x W_t + b_t) + (1 - g) * x` with `g = sigmoid(x W_c + b_c)`.

    The leaf names keep bilm-tf's: its "carry" gate weights the *transform* branch (docs/original_model.md,
    "Highway carry gate"), and the transform is a ReLU whatever the CNN activation is.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        width = config.num_char_filters
        self.carry = nn.Linear(width, width)
        self.transform = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, linear=F.linear) -> torch.Tensor:
        """`linear` is `F.linear` or a function with its signature and values (training's fast path passes one)."""
        gate = torch.sigmoid(linear(x, self.carry.weight, self.carry.bias))
        return gate * F.relu(linear(x, self.transform.weight, self.transform.bias)) + (1.0 - gate) * x


class ElmoCharacterEncoder(nn.Module):
    """Characters of each token -> a token vector of size `projection_dim` (layer 0 of ELMo).

    Character embedding, one convolution per `[width, count]` filter, max-pooling over the character
    positions, the activation, highway layers, then a linear projection (absent when F == P).

    `encode` is the reference; `forward` runs the kernel `char_cnn_kernels_elmo.char_cnn_implementation` names:
    training encodes each distinct token of a batch once, inference goes through the token cache when there is one
    (`ElmoModel.enable_token_cache`) and oneDNN on the CPU. Layer 0 is context-independent, so every way gives the
    vectors of `encode` (tested); `lstm_implementation="reference"` takes `encode` itself.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        # Row 0 is the padding id and stays zero (the stored table has 261 rows: docs/weight_layout.md,
        # "Character embedding").
        self.char_embedding = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, count, kernel_size=width) for width, count in config.char_cnn_filters
        )
        self.config = config  # `lstm_implementation="reference"` also turns the fast paths off here
        self.activation = torch.tanh if config.char_cnn_activation == "tanh" else F.relu
        self.highways = nn.ModuleList(ElmoHighway(config) for _ in range(config.num_highway_layers))
        filters = config.num_char_filters
        self.projection = nn.Linear(filters, config.projection_dim) if filters != config.projection_dim else None
        self.token_cache: ElmoTokenCache | None = None  # not a parameter or buffer: never saved
        self._inference_weights = PackedWeights()  # oneDNN copies for CPU inference, never saved
        self._int8_weights = PackedWeights()  # int8 copies for `lstm_implementation="int8"`, never saved

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """`char_ids` (N, 50) of real tokens -> (N, P)."""
        if needs_grad(*self.parameters()):  # training: the weights are about to change
            forget_inference_copies(self)
        return ALL_CHAR_CNN_FUNCTIONS[char_cnn_implementation(self, char_ids)](self, char_ids)

    def encode(self, char_ids: torch.Tensor) -> torch.Tensor:
        """The character CNN itself (the reference), without the cache: (N, 50) -> (N, P)."""
        chars = self.char_embedding(char_ids).transpose(1, 2)  # (N, d, 50)
        # Max-pool then activate: the same as activate then max-pool, both are monotone (docs/original_model.md,
        # "Max-pool before the activation").
        pooled = [conv(chars).amax(dim=-1) for conv in self.convolutions]  # F_i x (N, n_i)
        return self.from_pooled(torch.cat(pooled, dim=-1))

    def from_pooled(self, pooled: torch.Tensor, linear=F.linear) -> torch.Tensor:
        """The layers after the max-pooling: activation, highways, projection. (N, F) -> (N, P). `linear` is
        `F.linear` or a function with its signature and values (training's fast path passes one)."""
        x = self.activation(pooled)
        for highway in self.highways:
            x = highway(x, linear)
        if self.projection is not None:
            x = linear(x, self.projection.weight, self.projection.bias)  # (N, P)
        return x

    def _load_from_state_dict(self, *args, **kwargs):
        forget_inference_copies(self)
        super()._load_from_state_dict(*args, **kwargs)


# --------------------------------------------------------------------------------------------------
# The biLSTM with projection and clipping (docs/original_model.md, "biLSTM")
# --------------------------------------------------------------------------------------------------


def lstm_cell_step(
    gates: torch.Tensor, c: torch.Tensor, cell_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the LSTM cell from its pre-activation `gates` (..., 4C) in torch's order (i, f, g, o) and the
    previous cell state `c` (..., C): the new cell state (clipped when `cell_clip`) and `sigmoid(o) * tanh(c)`, the
    output before the projection. The inference loops of `lstm_inference_elmo.py` run the same functions in place."""
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)
    c = torch.sigmoid(forget_gate) * c + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
    if cell_clip is not None:
        c = c.clamp(-cell_clip, cell_clip)
    return c, torch.sigmoid(out_gate) * torch.tanh(c)


class ElmoBiLstmLayer(nn.Module):
    """One biLSTM layer: the forward and backward LSTM cells of one depth, stacked on a leading axis of 2.

    Parameters use `torch.nn.LSTM`'s names and gate order (i, f, g, o), with the forget-gate bias of
    +1 folded into `bias` (bilm-tf adds it at run time; the converter adds it when loading).

    - `weight_ih` (2, 4C, P), `weight_hh` (2, 4C, P), `bias` (2, 4C);
    - `weight_hr` (2, P, C): the projection of the cell output, no bias (absent when C == P).

    `forward` is the reference recurrence; `ElmoBiLm` may run a fast path with these parameters instead
    (a kernel of `kernels_elmo.ALL_LSTM_FUNCTIONS`, same signature: `fn(layer, inputs, batch_sizes, state)`).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        cell, proj = config.cell_size, config.projection_dim
        self.cell_size, self.projection_dim = cell, proj
        # TF's LSTMCell clips the projected state only when there is a projection (C != P).
        self.cell_clip = config.cell_clip
        self.proj_clip = config.proj_clip if cell != proj else None
        self.config = config
        self.weight_ih = nn.Parameter(torch.empty(2, 4 * cell, proj))
        self.weight_hh = nn.Parameter(torch.empty(2, 4 * cell, proj))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell))
        self.weight_hr = nn.Parameter(torch.empty(2, proj, cell)) if cell != proj else None
        self._inference_weights = PackedWeights()  # oneDNN copies for the CPU loop, never saved
        self._int8_weights = PackedWeights()  # int8 copies for `lstm_implementation="int8"`, never saved

    @property
    def clipped(self) -> bool:
        return self.cell_clip is not None or self.proj_clip is not None

    def implementation(self, inputs: torch.Tensor, state: ElmoState) -> str:
        """Which kernel of `ALL_LSTM_FUNCTIONS` a call with these arguments runs (a query: no side effect)."""
        return lstm_implementation(self.config, inputs, state, [self])

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """Run both directions over packed, length-sorted input (the reference, written for autograd).

        Args:
            inputs: (2, N, P), packed: row `sum(batch_sizes[:t]) + r` is batch row r at step t, rows sorted by
                decreasing length, so step t holds rows `0 .. batch_sizes[t] - 1` and no work is spent on padding.
                Direction 1 holds each row already reversed within its own length.
            batch_sizes: the number of real rows at each step, non-increasing.
            state: (h, c) of shapes (2, B, P) and (2, B, C).

        Returns:
            outputs (2, N, P), packed the same way, and the final (h, c) of every row.
        """
        h, c = state
        # Input projections of every step in one matrix multiply (bias included).
        x_proj = torch.baddbmm(self.bias.unsqueeze(1), inputs, self.weight_ih.transpose(1, 2))  # (2, N, 4C)
        w_hh = self.weight_hh.transpose(1, 2)  # (2, P, 4C)
        w_hr = self.weight_hr.transpose(1, 2) if self.weight_hr is not None else None  # (2, C, P)
        outputs, offset = [], 0
        for active in batch_sizes:
            gates = torch.baddbmm(x_proj[:, offset : offset + active], h[:, :active], w_hh)  # (2, b, 4C)
            c_new, h_new = lstm_cell_step(gates, c[:, :active], self.cell_clip)  # (2, b, C) each
            if w_hr is not None:
                h_new = torch.bmm(h_new, w_hr)  # (2, b, P)
            if self.proj_clip is not None:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h_new)
            offset += active
            if active == h.shape[1]:
                h, c = h_new, c_new
            else:  # rows past their length keep their state
                h = torch.cat([h_new, h[:, active:].to(h_new.dtype)], dim=1)
                c = torch.cat([c_new, c[:, active:].to(c_new.dtype)], dim=1)
        return torch.cat(outputs, dim=1), (h, c)

    def _load_from_state_dict(self, *args, **kwargs):
        forget_inference_copies(self)
        super()._load_from_state_dict(*args, **kwargs)


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
        self.config = config  # `lstm_implementation` is read at every call: it can be switched on a live model
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

        `tokens` may also be (B, T, 2P), layer 0 as `ElmoModel` returns it: the forward LSTM then reads the first
        half and the backward LSTM the second, so that the returned layer 0 is what the biLSTM consumes and its
        gradient shows each direction's dependence on it (the same values: both halves are the token vectors).

        `backward_tokens` (B, T, P), for stream training: the sequence the backward LSTM reads, already in
        its reading order (bilm-tf feeds it each sentence reversed); its outputs are then returned in that
        order instead of being aligned to `tokens`.
        """
        batch, steps, _ = tokens.shape
        # Sort rows by decreasing length and pack them, so that each step only touches real rows.
        order = torch.argsort(lengths, descending=True, stable=True)
        restore = torch.argsort(order)
        sorted_lengths = lengths[order]
        batch_sizes = (sorted_lengths.unsqueeze(0) > torch.arange(steps, device=lengths.device).unsqueeze(1)).sum(1)
        batch_sizes = [int(b) for b in batch_sizes.tolist() if b > 0]
        forward_tokens, backward_half = (
            tokens.chunk(2, dim=-1) if tokens.shape[-1] == 2 * self.config.projection_dim else (tokens, tokens)
        )  # (B, T, P) each
        x = forward_tokens[order]
        if backward_tokens is None:
            # Backward direction: each row reversed within its length, so it starts on its own last token.
            x = torch.stack([x, _reverse_within_lengths(backward_half[order], sorted_lengths)])  # (2, B, T, P)
        else:
            x = torch.stack([x, backward_tokens[order]])  # (2, B, T, P)
        index = packed_index(batch_sizes, steps).to(x.device)  # packed row -> position r * T + t
        x = x.flatten(1, 2)[:, index]  # (2, N, P)
        h0, c0 = state[0][:, :, order], state[1][:, :, order]

        # The one place the LSTM kernel is chosen (see lstm_inference_elmo.lstm_implementation).
        lstm_forward = ALL_LSTM_FUNCTIONS[lstm_implementation(self.config, x, (h0, c0), self.layers)]
        if needs_grad(*self.parameters()):  # training: the weights are about to change
            forget_inference_copies(*self.layers)
        results, final_h, final_c = [], [], []
        for i, layer in enumerate(self.layers):
            out, (h, c) = lstm_forward(layer, self.dropout(x), batch_sizes, (h0[i], c0[i]))
            if self.use_skip_connections and i > 0:  # the residual touches the output, not the state
                out = out + x
            x = out
            final_h.append(h)
            final_c.append(c)
            padded = out.new_zeros(2, batch * steps, out.shape[-1])  # (2, N, P) -> (2, B, T, P), zeros past lengths
            padded[:, index] = out
            padded = padded.view(2, batch, steps, -1)
            backward = padded[1] if backward_tokens is not None else _reverse_within_lengths(padded[1], sorted_lengths)
            results.append(torch.cat([padded[0], backward], dim=-1)[restore])  # (B, T, 2P)
        h = torch.stack(final_h)[:, :, restore]
        c = torch.stack(final_c)[:, :, restore]
        return results, (h, c)


# --------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------


def _refuse_old_weight_names(loading_info: dict, name) -> None:
    """A checkpoint whose weights carry names of `OLD_WEIGHT_NAMES`, loaded by a transformers that cannot rename
    them (4.46 - 4.49; up to 4.48 it also renames every weight named gamma to weight), would leave them untrained:
    an OSError in one line instead."""
    old = [key for key in loading_info.get("unexpected_keys", [])
           if re.search(r"scalar_mixes\.\d+\.(gamma|weight)$", key)]
    if old:
        raise OSError(
            f"{name} was saved by an earlier release, which named the scale of its scalar mix gamma ({old[0]}): "
            "transformers 4.50 and later load it; or load it there and save it again for this one")


def weights_as_readable_as_config(folder: Path) -> None:
    """safetensors writes its files private (0600), transformers writes config.json as any file (0666 less the
    umask): the weights in `folder` get config.json's mode, so that a model folder shared on a machine is readable
    whole by whoever may read its configuration."""
    config = folder / "config.json"
    if config.is_file():
        mode = config.stat().st_mode & 0o777
        for weights in folder.glob("*.safetensors"):
            os.chmod(weights, mode)


class ElmoPreTrainedModel(ElmoPushToHubMixin, PreTrainedModel):
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = ["ElmoBiLstmLayer"]
    # A pretraining folder opens as the feature model or a task model: its softmax is simply not used.
    _keys_to_ignore_on_load_unexpected = [r"^softmax\."]
    # What a class reads and learns from, for the code that handles every Elmo class alike (transformers' common tests,
    # tests/test_transformers_common.py) without naming one: `input_layout` "tokens" ([batch, tokens, characters]),
    # "choices" or "sentences" ([batch, choices or sentences, tokens, characters]), "question-passage" or "predicate"
    # (token_type_ids, predicate_mask); `label_layout` None (no `labels`), "sentence" (an id per row), "token" (an id
    # per token), "choice" (an index), "vocabulary" (word ids) or "mentions" ([batch, mentions, first/last/cluster]).
    input_layout = "tokens"
    label_layout = None

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`; a weight file it cannot read (truncated by an interrupted copy or
        download) is an `OSError` naming it, as a missing file is, not safetensors' own error."""
        wants_info = kwargs.get("output_loading_info", False)
        if FROM_PRETRAINED_TAKES_KEY_MAPPING:
            kwargs["key_mapping"] = {**OLD_WEIGHT_NAMES, **(kwargs.get("key_mapping") or {})}
        else:
            kwargs["output_loading_info"] = True  # to refuse a checkpoint of old names, which this transformers renames
        try:
            loaded = super().from_pretrained(*args, **kwargs)
        except SafetensorError as error:
            name = str(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
            files = sorted(Path(name).glob("*.safetensors")) if Path(name).is_dir() else []
            where = ", ".join(str(file) for file in files) or name
            raise OSError(f"cannot read the weights of {name} ({where}): {str(error).splitlines()[0]}; the file is "
                          "damaged or incomplete (an interrupted copy or download?)") from None
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # output_loading_info=True gives a pair
        if not FROM_PRETRAINED_TAKES_KEY_MAPPING:
            _refuse_old_weight_names(loaded[1], args[0] if args else kwargs.get("pretrained_model_name_or_path"))
            loaded = loaded if wants_info else model
        # Weights memory-mapped from safetensors can sit at addresses that make the BLAS kernels take another
        # path, which changes results in the last bit. Copying them makes a loaded model give exactly the
        # outputs of the model that was saved.
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                if tensor.device.type == "cpu" and tensor.data_ptr() % 64:
                    tensor.data = tensor.data.clone()
        return loaded

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, after checking the configuration (a field may have been set to a bad
        value since loading: a refused save writes nothing), with every travelling file of the model copied first
        (`remote_code_elmo.py`): the class is registered for remote code (`import elmo_hf.modeling_elmo` does it) or was
        loaded as remote code (which transformers 4.x does not mark so). Loaded as remote code, the files transformers
        did not fetch (the pipelines', the other heads') come from where the model was loaded from. config.json then
        names only Auto classes and pipelines whose files the folder holds. `Trainer.save_model` and `push_to_hub`
        save through here. The weights are then as readable as config.json (safetensors writes them 0600)."""
        saved = self._save_pretrained_with_code(save_directory, *args, **kwargs)
        weights_as_readable_as_config(Path(save_directory))
        return saved

    def _save_pretrained_with_code(self, save_directory, *args, **kwargs):
        self.config.validate()
        kwargs = {**SAVE_PRETRAINED_KEEPS_NAMES, **kwargs}  # today's weight names, also after loading old ones
        target = Path(save_directory)
        if self._auto_class is None and not is_remote_code(type(self)) or target.is_file():  # a file: refused
            return super().save_pretrained(save_directory, *args, **kwargs)
        warn_dotted_folder(target)
        saved_map, saved_pipelines = self.config.auto_map or {}, getattr(self.config, "custom_pipelines", None)
        left_out = copy_model_code(target, saved_map, origin=getattr(self.config, "_name_or_path", None),
                                   custom_pipelines=saved_pipelines,
                                   revision=getattr(self.config, "_commit_hash", None))
        self.config.auto_map = {key: value for key, value in saved_map.items() if key not in left_out}
        if saved_pipelines:
            self.config.custom_pipelines = {task: entry for task, entry in saved_pipelines.items()
                                            if f"pipeline {task}" not in left_out}
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.config.auto_map = saved_map  # another folder may hold them all
            if saved_pipelines:
                self.config.custom_pipelines = saved_pipelines

    def quantize_int8(self) -> ElmoPreTrainedModel:
        """Run inference with int8 matrix multiplies on the CPU (torch's fbgemm kernels): the biLSTM and the
        character CNN's highways and projection, activations quantized per row so that a sentence's vectors still
        never depend on its batch. Sets `config.lstm_implementation = "int8"` (saved with the model; "auto" goes
        back to float32) after checking that this CPU and torch can run it (else a one-line RuntimeError).
        Inference only. Returns the model: `ElmoModel.from_pretrained(path).quantize_int8()`. The deviation from
        float32: docs/models.md ("int8 inference")."""
        return quantize_int8(self)

    def _initialize_weights(self, module, *args, **kwargs):
        # transformers 5 skips `_init_weights` for a module of custom code that has no parameters of its own
        # (ElmoCharacterEncoder, ElmoHighway), so their initialisation below would never run: without that shortcut
        # (`INITIALIZE_WEIGHTS_ARGS`), since every write in `_init_weights` leaves loaded tensors alone.
        super()._initialize_weights(module, *INITIALIZE_WEIGHTS_ARGS)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialise every parameter, as bilm-tf's training graph does where it is known."""
        std = self.config.initializer_range
        if isinstance(module, ElmoCharacterEncoder):
            table = module.char_embedding.weight
            values = torch.empty_like(table).uniform_(-1.0, 1.0)
            values[0] = 0.0  # the padding row of the character table is zero
            init.copy_(table, values)
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
        return check_inputs(self.config, input_ids, attention_mask)


class ElmoModel(ElmoTokenCacheMixin, ElmoPreTrainedModel):
    """The ELMo biLM without a softmax: character ids -> L + 1 layers of contextual token vectors.

    Stateless: every call starts from a zero LSTM state unless `state=` is given, so a sentence's vectors
    never depend on its batch, its row, its padding or earlier calls.

    Speed: under `torch.no_grad()` / `torch.inference_mode()` the model takes its inference paths (see
    `ElmoBiLstmLayer` and `config.lstm_implementation`; on the CPU, oneDNN multiplies with packed copies of the
    weights, about as much memory again as the weights, kept while they do not change). `enable_token_cache` adds
    a cache of layer-0 vectors. Results equal the reference implementation's to rounding (tests/test_fast_paths.py).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        if config.token_encoder == "word_char":  # ELMoForManyLangs: a word embedding beside the character CNN
            self.char_encoder = ElmoWordCharEncoder(config, ElmoCharacterEncoder)
        else:
            self.char_encoder = ElmoCharacterEncoder(config)
        self.bilm = ElmoBiLm(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.char_encoder.char_embedding

    def resize_token_embeddings(self, new_num_tokens: int | None = None, *args, **kwargs) -> nn.Module:
        """The input embeddings as they are: ELMo's input ids are characters, and every word, one added to the tokenizer
        too, is read from its bytes (`ElmoTokenizer.add_tokens` adds nothing), so no row is ever missing. flair asks
        for a resize after adding its separator token."""
        if new_num_tokens is not None and new_num_tokens != self.get_input_embeddings().num_embeddings:
            logger.info("resize_token_embeddings(%d) leaves ELMo's input embeddings as they are: its ids are "
                        "characters, and every token is read from its bytes", new_num_tokens)
        return self.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.char_encoder.char_embedding = value
        self.clear_token_cache()  # its vectors came from the table replaced

    def embed_tokens(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Layer 0 for the real positions only: (B, T, 50), (B, T) -> (B, T, P), zeros at padding."""
        return self._embed_streams([input_ids], mask)[0]

    def _embed_streams(self, streams: list[torch.Tensor], mask: torch.Tensor) -> list[torch.Tensor]:
        """`embed_tokens` of several id tensors with the same padding (the forward and the backward stream of
        stream training) in one pass of the character encoder, so that a word both streams hold is encoded once."""
        flat = [ids[mask] for ids in streams]  # (N, 50) each: no work on padding
        encoded = self.char_encoder((torch.cat(flat) if len(flat) > 1 else flat[0]).long())
        outputs = []
        for part in encoded.split([f.shape[0] for f in flat]):
            out = part.new_zeros(*mask.shape, part.shape[-1])
            out[mask] = part
            outputs.append(out)
        return outputs

    def zero_state(self, batch_size: int, device=None, dtype=torch.float32) -> ElmoState:
        c = self.config
        h = torch.zeros(c.num_layers, 2, batch_size, c.projection_dim, device=device, dtype=dtype)
        return h, torch.zeros(c.num_layers, 2, batch_size, c.cell_size, device=device, dtype=dtype)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        state: ElmoState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        backward_input_ids: torch.Tensor | None = None,
        return_state: bool | None = None,
        **kwargs,
    ) -> ElmoModelOutput | tuple:
        r"""
        `return_dict=False` (or `config.return_dict=False`) gives the output as a tuple of its fields that are set
        (`can_return_tuple`).

        Args:
            input_ids (`torch.LongTensor` of shape `(batch, tokens, max_characters_per_token)`):
                character ids from `ElmoTokenizer` (with `<S>`/`</S>`), right-padded with all-zero tokens.
            attention_mask (`torch.Tensor` of shape `(batch, tokens)`, *optional*):
                1 for real tokens; derived from `input_ids` when absent.
            state (`tuple(torch.FloatTensor)`, *optional*): `(h, c)` from a previous call's output with
                `use_cache=True`, to continue every row from where it stopped. Zeros when absent.
            return_state (`bool`, *optional*): return the final LSTM states as `state`. `use_cache` is the same
                (transformers' name; it has nothing to do with the token cache of `enable_token_cache`).
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
        use_cache = bool(use_cache or return_state)
        if attention_mask is None and state is None:  # flair's layers="all" probe runs as <S> </S> (inputs_elmo)
            input_ids = answer_layer_count_probe(config, input_ids)

        with float32_cudnn(getattr(input_ids, "device", torch.device("cpu"))):  # a wrong type is reported below
            return self._forward(input_ids, attention_mask, state, use_cache, output_hidden_states, backward_input_ids)

    def _forward(self, input_ids, attention_mask, state, use_cache, output_hidden_states, backward_input_ids):
        lengths = self._check_inputs(input_ids, attention_mask)
        batch, steps = input_ids.shape[:2]
        mask = torch.arange(steps, device=input_ids.device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)

        backward_tokens = None
        if backward_input_ids is not None:
            if backward_input_ids.shape != input_ids.shape:
                raise ValueError(
                    f"backward_input_ids must have the shape of input_ids {tuple(input_ids.shape)}, "
                    f"got {tuple(backward_input_ids.shape)}"
                )
            if not torch.equal(self._check_inputs(backward_input_ids, None), lengths):
                raise ValueError("backward_input_ids must have the same number of tokens as input_ids in every row")
            tokens, backward_tokens = self._embed_streams([input_ids, backward_input_ids], mask)  # (B, T, P) each
        else:
            tokens = self.embed_tokens(input_ids, mask)  # (B, T, P)
        if state is None:
            state = self.zero_state(batch, device=tokens.device, dtype=tokens.dtype)
        else:
            state = self._check_state(state, batch)
        if output_hidden_states:
            # Layer 0 duplicated to 2P, and the very tensor the biLSTM reads (one half per direction), so that it is
            # part of the graph: gradients reach it from every output.
            tokens = torch.cat([tokens, tokens], dim=-1)  # (B, T, 2P)
        layers, final_state = self.bilm(tokens, lengths, state, backward_tokens)

        last_hidden_state = layers[-1]
        hidden_states = (tokens, *layers) if output_hidden_states else None
        final_state = final_state if use_cache else None
        return ElmoModelOutput(last_hidden_state=last_hidden_state, hidden_states=hidden_states, state=final_state)

    def _check_state(self, state: ElmoState, batch: int) -> ElmoState:
        return check_state(self.config, state, batch)


class ElmoForPreTraining(ElmoPreTrainedModel):
    """The biLM objective (Peters et al. 2018, section 3.1): the forward LM predicts the next word and the
    backward LM the previous one, each from its own direction's top layer, through one shared softmax.
    The loss is the mean of the two directions' mean losses.
    """

    label_layout = "vocabulary"

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        self.dropout = nn.Dropout(config.dropout)  # bilm-tf: dropout on the LSTM output before the softmax
        self.softmax = ElmoSoftmax(config)
        self.post_init()

    @can_return_tuple
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
        return_state: bool | None = None,
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
        outputs = self.elmo(
            input_ids,
            attention_mask=attention_mask,
            state=state,
            use_cache=use_cache,
            return_state=return_state,
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
            forward_labels, backward_labels = shifted_targets(labels, 1), shifted_targets(labels, -1)
        loss = forward_loss = backward_loss = forward_tokens = backward_tokens = None
        if forward_labels is not None and backward_labels is not None:
            # no prediction from padding positions (a shifted label can land there)
            real = attention_mask.bool() if attention_mask is not None else real_token_mask(input_ids)
            forward_labels = forward_labels.masked_fill(~real, -100)
            backward_labels = backward_labels.masked_fill(~real, -100)
            p = self.config.projection_dim
            top = self.dropout(outputs.last_hidden_state)
            losses, counts = zip(*(self.softmax.mean_nll(half, targets) for half, targets in
                                   ((top[..., :p], forward_labels), (top[..., p:], backward_labels))))
            forward_loss, backward_loss = losses
            forward_tokens, backward_tokens = counts
            loss = 0.5 * (forward_loss + backward_loss)
        elif forward_labels is not None or backward_labels is not None:
            raise ValueError("give both forward_labels and backward_labels")

        return ElmoForPreTrainingOutput(
            loss=loss,
            forward_loss=forward_loss,
            backward_loss=backward_loss,
            forward_tokens=forward_tokens,
            backward_tokens=backward_tokens,
            last_hidden_state=outputs.last_hidden_state,
            hidden_states=outputs.hidden_states,
            state=outputs.state,
        )

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
