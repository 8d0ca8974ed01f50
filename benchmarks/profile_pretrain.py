"""Where a training step's time goes: `elmo-pretrain` run with timers on its parts (`bench_pretrain.py profile` runs
it).

    python benchmarks/profile_pretrain.py STEPS.json ELMO-PRETRAIN-ARGS...

writes, for every training step, the wall-clock seconds of each part:

* forward: `char_cnn` (the character CNN: embedding, convolutions, max-pooling; `ElmoCharacterEncoder.forward` less
  `from_pooled`), `highway_projection` (`from_pooled`: activation, highways, projection), `lstm_forward` (`ElmoBiLm`,
  both directions and layers), `softmax_forward` (`ElmoSoftmax.mean_nll`, both directions), `other_forward` (the rest
  of the model's call: dropout, masks, targets);
* backward, split by when the gradient reaches each part's input (tensor hooks: autograd runs the parts in reverse):
  `softmax_backward` (from `backward()` to the later of the two softmax inputs' gradients), `lstm_backward` (to the
  biLSTM's input's), `highway_projection_backward` (to the pooled features'), `char_cnn_backward` (the rest of
  `backward()`: the convolutions' and the embedding's gradients);
* `clip_grad_norm`, `optimizer_step` (the optimizer and the scheduler), `other_step` (the rest of `training_step`:
  the loss check, zero_grad, the token count);
* `data_loading`: from the end of one step to the start of the next (the next batch from the loader and its collation,
  the stop agreement, the log line every `--logging_steps`).

The timers read `time.perf_counter` only (no synchronisation: this is for the CPU). The hooks return nothing, so the
gradients are untouched; a part's split is where autograd happens to run its nodes, so a few of one part's
weight-gradient nodes may be counted in the next (the order is reverse creation order, one thread).
"""

from __future__ import annotations

import functools
import json
import sys
import time

FORWARD_PARTS = ("char_cnn", "highway_projection", "lstm_forward", "softmax_forward", "other_forward")
BACKWARD_PARTS = ("softmax_backward", "lstm_backward", "highway_projection_backward", "char_cnn_backward")
STEP_PARTS = ("clip_grad_norm", "optimizer_step", "other_step", "data_loading")
PARTS = FORWARD_PARTS + BACKWARD_PARTS + STEP_PARTS


class Recorder:
    """The current step's forward times (summed over calls) and the times gradients reached each part's input."""

    def __init__(self):
        self.steps: list[dict] = []
        self.reset()

    def reset(self) -> None:
        self.forward = dict.fromkeys(("encoder", "highway_projection", "lstm_forward", "softmax_forward", "model"), 0.0)
        self.arrivals: dict[str, float] = {}
        self.spans = dict.fromkeys(("backward", "clip_grad_norm", "optimizer_step"), 0.0)
        self.backward_start = 0.0

    def timed(self, key: str, function):
        """`function`, its time added to `self.forward[key]`."""
        recorder = self

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            out = function(*args, **kwargs)
            recorder.forward[key] += time.perf_counter() - start
            return out

        return wrapper

    def arrival(self, key: str, tensor) -> None:
        """Note when the gradient reaches `tensor` (the latest of several such tensors under one key)."""
        if getattr(tensor, "requires_grad", False):
            tensor.register_hook(lambda grad: self.arrivals.__setitem__(key, time.perf_counter()))

    def step_parts(self, wall: float, gap: float) -> dict:
        f, s, a = self.forward, self.spans, self.arrivals
        start, end = self.backward_start, self.backward_start + s["backward"]
        soft = a.get("softmax", start)
        lstm = max(a.get("lstm", soft), soft)
        highway = max(a.get("highway_projection", lstm), lstm)
        parts = {
            "char_cnn": f["encoder"] - f["highway_projection"],
            "highway_projection": f["highway_projection"],
            "lstm_forward": f["lstm_forward"],
            "softmax_forward": f["softmax_forward"],
            "other_forward": f["model"] - f["encoder"] - f["lstm_forward"] - f["softmax_forward"],
            "softmax_backward": soft - start,
            "lstm_backward": lstm - soft,
            "highway_projection_backward": highway - lstm,
            "char_cnn_backward": end - highway,
            "clip_grad_norm": s["clip_grad_norm"],
            "optimizer_step": s["optimizer_step"],
            "data_loading": gap,
        }
        parts["other_step"] = wall - sum(parts.values()) + gap
        return {**parts, "step": wall}


def install(recorder: Recorder) -> None:
    """Timers and hooks on the model's classes, accelerate's backward and clipping, and the optimizer's step."""
    import accelerate
    import accelerate.optimizer

    import elmo_hf.modeling_elmo.modeling_elmo as modeling
    import elmo_hf.modeling_elmo.softmax_elmo as softmax
    import elmo_hf.train.pretrain_run as pretrain_run

    encoder = modeling.ElmoCharacterEncoder
    encoder.forward = recorder.timed("encoder", encoder.forward)
    from_pooled = encoder.from_pooled

    def hooked_from_pooled(self, pooled, *args, **kwargs):
        recorder.arrival("highway_projection", pooled)
        return from_pooled(self, pooled, *args, **kwargs)

    encoder.from_pooled = recorder.timed("highway_projection", hooked_from_pooled)
    bilm_forward = modeling.ElmoBiLm.forward

    def hooked_bilm(self, tokens, *args, **kwargs):
        recorder.arrival("lstm", tokens)
        return bilm_forward(self, tokens, *args, **kwargs)

    modeling.ElmoBiLm.forward = recorder.timed("lstm_forward", hooked_bilm)
    mean_nll = softmax.ElmoSoftmax.mean_nll

    def hooked_nll(self, hidden, targets):
        recorder.arrival("softmax", hidden)
        return mean_nll(self, hidden, targets)

    softmax.ElmoSoftmax.mean_nll = recorder.timed("softmax_forward", hooked_nll)
    modeling.ElmoForPreTraining.forward = recorder.timed("model", modeling.ElmoForPreTraining.forward)

    def span(key: str, function, mark_start: bool = False):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            if mark_start:
                recorder.backward_start = start
            out = function(*args, **kwargs)
            recorder.spans[key] += time.perf_counter() - start
            return out

        return wrapper

    accelerate.Accelerator.backward = span("backward", accelerate.Accelerator.backward, mark_start=True)
    accelerate.Accelerator.clip_grad_norm_ = span("clip_grad_norm", accelerate.Accelerator.clip_grad_norm_)
    accelerate.optimizer.AcceleratedOptimizer.step = span("optimizer_step",
                                                          accelerate.optimizer.AcceleratedOptimizer.step)
    step, last_end = pretrain_run.training_step, [None]

    def timed_step(run, batch):
        start = time.perf_counter()
        gap = start - last_end[0] if last_end[0] is not None else 0.0
        recorder.reset()
        scheduler_step = run.scheduler.step
        run.scheduler.step = span("optimizer_step", scheduler_step)
        out = step(run, batch)
        run.scheduler.step = scheduler_step
        last_end[0] = time.perf_counter()
        parts = recorder.step_parts(last_end[0] - start, gap)
        parts["tokens"] = int(out.forward_tokens)
        recorder.steps.append(parts)
        return out

    pretrain_run.training_step = timed_step


def main() -> int:
    from elmo_hf.cli import run

    recorder = Recorder()
    install(recorder)
    code = run("elmo-pretrain", sys.argv[2:])
    with open(sys.argv[1], "w", encoding="utf-8") as handle:
        json.dump(recorder.steps, handle)
    return code


if __name__ == "__main__":
    sys.exit(main())
