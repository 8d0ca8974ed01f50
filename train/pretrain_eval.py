"""elmo-pretrain's evaluation: forward, backward and average perplexity of the run's model on its validation files,
scored as language models are compared (the boundaries that cost nothing to predict left out). Called by the loop
(`--eval_steps`) and at the end (train/pretrain_run.py); `run` is that file's `Run`."""

from __future__ import annotations

import math

import torch

from elmo_hf.tools.core.errors import InputError

from .data import BOS, EOS, BatchEncoder, epoch_batches


@torch.no_grad()
def evaluate(run) -> dict[str, float] | None:
    """Forward, backward and average perplexity with the full softmax over this process's shard, summed
    over processes. Stream layout with the state carried, like bilm-tf's run_test. None on every process when a
    signal cut the evaluation short on any.

    Scored as language models are compared (word_language_model, the papers on Penn Treebank): every word and every
    sentence end, but not the boundary that always follows one in the stream (`<S>` after `</S>` for the forward LM,
    `</S>` after `<S>` for the backward one), which costs nothing to predict. bilm-tf's run_test scored those too: its
    figures are lower (on PTB about a fifth, a sentence being about 22 tokens; benchmarks/results_quality.md)."""
    accelerator, model, files = run.accelerator, run.model, run.valid_files
    model.eval()
    batches = epoch_batches(files, run.encoder, run.layout, run.split, seed=0, epoch=0, shuffle_buffer=1,
                            rank=accelerator.process_index, world_size=accelerator.num_processes,
                            encoding=run.args.encoding)
    totals = torch.zeros(5, dtype=torch.float64, device=accelerator.device)  # nll_f, n_f, nll_b, n_b, stopped
    state = None
    for index, batch in enumerate(batches):
        if run.args.max_eval_batches and index >= run.args.max_eval_batches:
            break
        if run.guard.received:  # a signal: this process stops evaluating; the sum below tells the others
            totals[4] = 1
            break
        batch = without_free_boundaries({k: v.to(accelerator.device) for k, v in batch.items()}, run.encoder)
        with accelerator.autocast():
            out = model(**batch, state=state, use_cache=run.layout.mode == "stream")
        state = out.state
        totals[:4] += torch.stack([
            out.forward_loss.double() * out.forward_tokens, out.forward_tokens.double(),
            out.backward_loss.double() * out.backward_tokens, out.backward_tokens.double(),
        ])
    totals = accelerator.reduce(totals, reduction="sum")
    model.train()
    nll_f, n_f, nll_b, n_b, stopped = totals.tolist()
    if stopped:
        return None
    if n_f == 0:
        raise InputError(
            f"the validation data {files} gave no batch; use a smaller --per_device_batch_size or --unroll_steps")
    loss_f, loss_b = nll_f / n_f, nll_b / n_b
    return {
        "forward_perplexity": math.exp(loss_f),
        "backward_perplexity": math.exp(loss_b),
        "average_perplexity": math.exp(0.5 * (loss_f + loss_b)),
        "eval_tokens": int(n_f),
    }


def without_free_boundaries(batch: dict, encoder: BatchEncoder) -> dict:
    """`batch` with the targets that cost nothing to predict unscored (-100): `<S>` in the forward labels (it only
    ever follows `</S>`) and `</S>` in the backward ones (it only ever follows `<S>` in the backward LM's reading)."""
    bos, eos = encoder.vocab_ids([BOS, EOS])
    batch = dict(batch)
    for key, free in (("forward_labels", bos), ("backward_labels", eos)):
        if key in batch:
            batch[key] = batch[key].masked_fill(batch[key] == free, -100)
    return batch
