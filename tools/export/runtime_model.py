"""`ElmoModel`'s interface on ONNX Runtime or OpenVINO: for transformers' pipelines and the app.

`on_backend(model, "onnxruntime")` gives an `ElmoRuntimeModel`: a transformers model with the config of `model` and no
weights of its own, whose `forward(input_ids, attention_mask, output_hidden_states)` runs the model's exported graph
(`backends.runner_for`: exported once per weights) and returns `ElmoModelOutput` as `ElmoModel` does (the same vectors
to 1e-5 in float32). So `pipeline("feature-extraction", model=on_backend(model, "openvino"), tokenizer=tokenizer)`
and `elmo-app --backend openvino` compute in that runtime. Inference only, on the CPU, without `state`.
"""

from __future__ import annotations

import torch

from elmo_hf.modeling_elmo.character_ids import real_token_mask
from elmo_hf.modeling_elmo.modeling_elmo import ElmoModelOutput, ElmoPreTrainedModel

from ..core.backend_registry import BACKEND_NAMES, backend_row
from .backends import GraphRunner, runner_for


class ElmoRuntimeModel(ElmoPreTrainedModel):
    """`ElmoModel`'s outputs from its ONNX graph in a runtime (`runner`); holds no weights."""

    def __init__(self, config, runner: GraphRunner | None = None, parameter_count: int = 0):
        super().__init__(config)
        self.runner = runner
        self.parameter_count = parameter_count  # the graph's, for what the app shows
        # transformers reads a model's device and dtype from its parameters: an empty one says "float32, CPU"
        self.place = torch.nn.Parameter(torch.zeros(0), requires_grad=False)
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None, **kwargs):
        if input_ids is None:
            raise ValueError("ElmoRuntimeModel needs input_ids: character ids of shape [batch, tokens, 50]")
        if attention_mask is None:
            attention_mask = real_token_mask(input_ids)
        hidden = self.runner.run(input_ids.detach().cpu().long().numpy(), attention_mask.detach().cpu().long().numpy())
        layers = tuple(torch.from_numpy(hidden).unbind(1))  # L + 1 of (B, T, 2P)
        output_hidden_states = (output_hidden_states if output_hidden_states is not None
                                else self.config.output_hidden_states)
        out = ElmoModelOutput(last_hidden_state=layers[-1], hidden_states=layers if output_hidden_states else None)
        return out if return_dict is not False else out.to_tuple()


def on_backend(model, backend: str, dtype: str = "float32", folder=None, threads: int | None = None):
    """`model` (an `ElmoModel`) as an `ElmoRuntimeModel` on `backend` (a `graph` row of the backend table:
    "onnxruntime", "openvino"), or `model` itself for the backend that runs it ("torch"). `folder`: where the model
    was loaded from (its `onnx/model.onnx` is used when made from these weights). `backends.BackendError` in one line
    when the backend cannot run here (or is none)."""
    if backend in BACKEND_NAMES and not backend_row(backend).graph:
        return model
    runner = runner_for(backend, dtype, model, folder, threads or torch.get_num_threads())
    return ElmoRuntimeModel(model.config, runner, sum(p.numel() for p in model.parameters())).eval()
