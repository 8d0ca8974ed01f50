"""The biLM as one fixed-shape computation that graph exporters can follow: `ExportableElmo`.

`ElmoModel.forward` sorts rows by length, packs them and reads the lengths as Python numbers (`.tolist()`) to know
how many rows each step runs: fast in PyTorch, but a graph exporter (`torch.export`, hence `torch.onnx.export`)
stops there (a data-dependent guard). `ExportableElmo` computes the same function on the padded batch instead:

- layer 0 (the character CNN, or ELMoForManyLangs' word + character encoder) runs on every position of the
  (B, T) grid, and the padding positions are set to zero afterwards, as the model leaves them;
- each biLSTM layer runs both directions in one recurrence over the T steps, carried by
  `torch._higher_order_ops.scan` (which `torch.onnx.export` writes as an ONNX `Scan`: the graph carries the loop,
  whatever T is). At step t a row past its length keeps its state (h, c) and outputs zeros, so its final state and
  its outputs are those of the packed loop. Cell and projection clipping are applied at every step, as in
  `lstm_cell_step`, which the step calls;
- the backward direction reads each row reversed within its own length (`reverse_within_lengths`, a gather), as
  `ElmoBiLm` does, and its outputs are reversed back.

It reads the model's layer-0 parameters and the scalar mix as they are, and copies the biLSTM's weights once, per
direction, as the 2-D matrices its multiplies take (make a new one after the weights change). It computes in the
model's dtype and takes `input_ids` (B, T, token_row_width) and `attention_mask` (B, T) (1 for the real tokens,
right-padded), and returns `hidden_states` (B, L + 1, T, 2P): layer 0 written twice, then every biLSTM layer; with a
scalar mix (`mix`, the first of a task head's `scalar_mixes`), also `mixed` (B, T, 2P), the mix the head reads.
Tested against `ElmoModel`'s reference in tests/test_onnx_export.py. Inference only: no dropout, no state in or out.
"""

from __future__ import annotations

import torch
from torch import nn
from torch._higher_order_ops import scan

from elmo_hf.modeling_elmo.character_ids import real_token_mask
from elmo_hf.modeling_elmo.downstream_elmo import ElmoScalarMix, sentence_boundary_mask
from elmo_hf.modeling_elmo.modeling_elmo import ElmoModel, lstm_cell_step


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of `x` (B, T, ...) within its own length (B,); positions past it stay where they are."""
    steps = x.shape[1]
    positions = torch.arange(steps, device=x.device).unsqueeze(0)  # (1, T)
    lengths = lengths.unsqueeze(1)  # (B, 1)
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)  # (B, T)
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class DirectionWeights(nn.Module):
    """One direction's LSTM weights of one layer, transposed for `x @ w`: `w_ih` (P, 4C), `bias` (4C), `w_hh` (P, 4C),
    `w_hr` (C, P) or None. Copies (buffers), taken when made."""

    def __init__(self, layer, direction: int):
        super().__init__()
        with torch.no_grad():
            self.register_buffer("w_ih", layer.weight_ih[direction].t().contiguous())
            self.register_buffer("bias", layer.bias[direction].clone())
            self.register_buffer("w_hh", layer.weight_hh[direction].t().contiguous())
            hr = layer.weight_hr
            self.register_buffer("w_hr", hr[direction].t().contiguous() if hr is not None else None)


class ExportableElmo(nn.Module):
    """`ElmoModel`'s function on padded batches, without data-dependent control flow (module docstring)."""

    def __init__(self, model: ElmoModel, mix: ElmoScalarMix | None = None):
        super().__init__()
        self.model = model.eval()
        self.eval()
        self.mix = mix
        self.config = model.config
        # Each direction's LSTM weights as the 2-D matrices its multiplies take, copied once: in an exported graph
        # they are plain weights (which ONNX Runtime packs once, and its int8 quantization recognises), and the
        # loop reads no two views of one tensor (scan's rule).
        self.lstm_weights = nn.ModuleList(
            DirectionWeights(layer, d) for layer in model.bilm.layers for d in range(2)
        )

    # Layer 0 ---------------------------------------------------------------------------------------------------

    def encode_tokens(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, token_row_width) ids -> (N, P): the reference character encoder (`ElmoCharacterEncoder.encode`), or
        ELMoForManyLangs' word + character encoder, written out with the same layers."""
        encoder = self.model.char_encoder
        if self.config.token_encoder != "word_char":
            return encoder.encode(rows)
        parts = []
        if encoder.word_embedding is not None:  # their order: the word embedding first, then the CNN
            parts.append(encoder.word_embedding(rows[:, -1]))
        if encoder.char_cnn is not None:
            parts.append(encoder.char_cnn.encode(rows[:, : encoder.char_width]))
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return encoder.projection(x)

    # The biLSTM ------------------------------------------------------------------------------------------------

    def run_layer(self, i: int, inputs: list[torch.Tensor], mask: torch.Tensor) -> list[torch.Tensor]:
        """Both directions of biLSTM layer `i`: `inputs` [forward (B, T, P), backward (B, T, P), the latter already
        reversed within each row's length], `mask` (B, T) bool -> the two directions' outputs (B, T, P), zeros past
        each row's length."""
        layer = self.model.bilm.layers[i]
        weights = [self.lstm_weights[2 * i + d] for d in range(2)]
        cell_clip, proj_clip = layer.cell_clip, layer.proj_clip
        # Input projections of every step in one multiply per direction, bias included: (B, T, 4C).
        projected = [torch.matmul(x, w.w_ih) + w.bias for x, w in zip(inputs, weights)]

        def cell(w, gates_in, h, c):
            c_new, h_new = lstm_cell_step(gates_in + torch.matmul(h, w.w_hh), c, cell_clip)
            if w.w_hr is not None:
                h_new = torch.matmul(h_new, w.w_hr)
            if proj_clip is not None:
                h_new = h_new.clamp(-proj_clip, proj_clip)
            return h_new, c_new

        def step(carry, step_inputs):
            *gates_in, real = step_inputs  # (B, 4C) per direction, (B, 1) bool
            new_carry, outputs = [], []
            for d, w in enumerate(weights):
                h, c = carry[2 * d], carry[2 * d + 1]  # (B, P), (B, C)
                h_new, c_new = cell(w, gates_in[d], h, c)
                # A row past its length keeps its state and outputs zeros.
                new_carry += [torch.where(real, h_new, h), torch.where(real, c_new, c)]
                outputs.append(torch.where(real, h_new, 0.0))
            return tuple(new_carry), tuple(outputs)

        batch = inputs[0].shape[0]
        h0 = inputs[0].new_zeros(batch, layer.projection_dim)
        c0 = inputs[0].new_zeros(batch, layer.cell_size)
        steps_first = [p.transpose(0, 1) for p in projected]  # (T, B, 4C)
        real = mask.transpose(0, 1).unsqueeze(-1)  # (T, B, 1)
        carry, inputs = (h0, c0, h0.clone(), c0.clone()), (*steps_first, real)
        if torch.compiler.is_compiling() or torch.compiler.is_exporting():
            _, outputs = scan(step, carry, inputs)  # (T, B, P) each: the graph's Scan
        else:  # eager: the same steps in a Python loop (scan would compile the step first, for every new shape)
            steps = []
            for t in range(real.shape[0]):
                carry, out = step(carry, [x[t] for x in inputs])
                steps.append(out)
            outputs = [torch.stack(direction) for direction in zip(*steps)]
        return [out.transpose(0, 1) for out in outputs]

    # The whole model ------------------------------------------------------------------------------------------

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        batch, steps, width = input_ids.shape
        mask = attention_mask.bool()  # (B, T), right-padded
        lengths = mask.sum(1)
        encoded = self.encode_tokens(input_ids.reshape(batch * steps, width)).view(batch, steps, -1)
        tokens = torch.where(mask.unsqueeze(-1), encoded, 0.0)  # (B, T, P), zeros at padding as the model has
        x = [tokens, reverse_within_lengths(tokens, lengths)]  # what each direction reads, in its reading order
        layers = [torch.cat([tokens, tokens], dim=-1)]
        for i in range(len(self.model.bilm.layers)):
            out = self.run_layer(i, x, mask)
            if self.config.use_skip_connections and i > 0:  # the residual touches the output, not the state
                out = [o + previous for o, previous in zip(out, x)]
            x = out
            layers.append(torch.cat([out[0], reverse_within_lengths(out[1], lengths)], dim=-1))  # (B, T, 2P)
        hidden_states = torch.stack(layers, dim=1)  # (B, L + 1, T, 2P)
        if self.mix is None:
            return hidden_states
        return hidden_states, scalar_mix(self.mix, hidden_states, words_to_pool(input_ids, mask, self.config))


def words_to_pool(input_ids: torch.Tensor, mask: torch.Tensor, config) -> torch.Tensor:
    """`downstream_elmo.word_mask_of` with logical operators only (ONNX Runtime has no `Where` on booleans): the real
    tokens without `<S>`/`</S>` unless kept; a row with no word keeps its boundaries."""
    if config.keep_sentence_boundaries:
        return mask
    words = mask & ~sentence_boundary_mask(input_ids, config.sentence_boundary_rows)
    empty = ~words.any(1, keepdim=True)
    return words | (empty & mask)


def scalar_mix(mix: ElmoScalarMix, hidden_states: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
    """`ElmoScalarMix.forward` on (B, L + 1, T, D) layers, written with the operators ONNX Runtime has for float64
    (the layer norm's statistics are float64 sums: `max` where the model clamps, which it has no float64 kernel for)."""
    weights = mix.normalized_weights()
    mixed = None
    for k in range(hidden_states.shape[1]):
        layer = hidden_states[:, k]
        if mix.do_layer_norm:
            x = layer.float()
            elements = word_mask.unsqueeze(-1).to(torch.float64)  # (B, T, 1)
            count = torch.maximum(elements.sum((-2, -1), keepdim=True) * x.shape[-1], torch.ones_like(elements[:1, :1]))
            mean = (x.to(torch.float64) * elements).sum((-2, -1), keepdim=True) / count
            variance = (((x.to(torch.float64) - mean) * elements) ** 2).sum((-2, -1), keepdim=True) / count
            layer = ((x - mean.float()) / torch.sqrt(variance + mix.eps).float()).to(layer.dtype)
        term = weights[k].to(layer.dtype) * layer
        mixed = term if mixed is None else mixed + term
    return mix.gamma.to(mixed.dtype) * mixed


def padded_inputs(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """`(input_ids, attention_mask)` as the exported graph takes them: int64, the mask derived where absent."""
    if attention_mask is None:
        attention_mask = real_token_mask(input_ids)
    return input_ids.long(), attention_mask.long()


__all__ = ["ExportableElmo", "padded_inputs", "reverse_within_lengths"]


def head_unexportable_reason(head) -> str | None:
    """Why a task head's logits cannot be part of the graph (one line), or None: the head says it
    (`ElmoPreTrainedModelForTasks.onnx_logits` and `onnx_unexportable_reason`). Exported: sentence classification
    pooled by mean, max or attention, one sentence a row; token classification by a linear layer."""
    return head.onnx_unexportable_reason()


class ExportableHead(nn.Module):
    """A task head on `ExportableElmo`: `hidden_states`, the head's first scalar mix `mixed`, and its `logits`
    ((B, num_labels) for sentence classification, (B, T, num_labels) for token classification), as the head's
    `forward` computes them in eval mode (`head_unexportable_reason` says which heads)."""

    def __init__(self, head):
        super().__init__()
        reason = head_unexportable_reason(head)
        if reason is not None:
            raise ValueError(reason)
        self.head = head.eval()
        self.bilm = ExportableElmo(head.elmo, head.scalar_mixes[0])

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        hidden_states, mixed = self.bilm(input_ids, attention_mask)
        head, config = self.head, self.head.config
        mask = attention_mask.bool()
        word_mask = words_to_pool(input_ids, mask, config)
        x = mixed
        if head.word_embedding is not None:
            x = torch.cat([x, head.word_embedding(input_ids).to(x.dtype)], dim=-1)
        logits = head.classifier(head.pool(x, word_mask) if head.onnx_logits == "sentence" else x)
        return hidden_states, mixed, logits
