"""Pretrain an ELMo biLM on a text corpus with Accelerate: CPU, one GPU, or many (DDP).

    python -m train.pretrain --train_file 'corpus/*.txt' --validation_file valid.txt --output_dir out \\
        --preset small --max_steps 10000
    accelerate launch -m train.pretrain ...        # or: torchrun --nproc_per_node N -m train.pretrain ...

The output folder is a Hugging Face model folder (`AutoModel` gives the feature model,
`AutoModelForPreTraining` the biLM with its softmax) with the tokenizer and the word vocabulary,
`eval_results.json`, `train_results.json`, `train_log.jsonl` and `checkpoints/`.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import json
import logging
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import HfArgumentParser

from modeling_elmo import ElmoConfig, ElmoForPreTraining
from modeling_elmo.hub_utils import HubPushError
from tokenization import ElmoTokenizer, build_vocab, write_vocab
from tokenization.tokenization_elmo import split_words

from .data import (
    BatchEncoder,
    CorpusStats,
    StreamBatcher,
    corpus_words,
    read_sentences,
    resolve_files,
    sentence_batches,
    stream_batches,
)

logger = logging.getLogger("train.pretrain")


@dataclass
class PretrainArguments:
    """Arguments of `python -m train.pretrain` (also readable from a JSON file given as the only argument)."""

    train_file: list[str] = field(metadata={"help": "Text files or globs, one sentence per line."})
    output_dir: str = field(metadata={"help": "Where the model folder, logs and checkpoints go."})
    validation_file: list[str] | None = field(default=None, metadata={"help": "Held-out text for perplexity."})
    preset: str | None = field(default=None, metadata={"help": "tiny, small, medium or original (ElmoConfig.from_preset)."})
    config_file: str | None = field(default=None, metadata={"help": "A config.json for ElmoConfig, instead of --preset."})
    init_from: str | None = field(
        default=None, metadata={"help": "A model folder (converted or trained) to continue training from."}
    )
    softmax_weight_file: str | None = field(
        default=None,
        metadata={"help": "An hdf5 file with softmax/W (V, P) and softmax/b (V,) for --init_from, in the order of the "
                          "vocabulary; without it a new softmax starts from the model's layer-0 vectors of the words."},
    )
    vocab_file: str | None = field(
        default=None, metadata={"help": "Word vocabulary (<S>, </S>, <UNK> first, then by frequency); built if absent."}
    )
    max_vocab_size: int = field(default=50000, metadata={"help": "Size of a vocabulary built from the corpus."})
    min_count: int = field(default=1, metadata={"help": "Minimum count of a word in a built vocabulary."})
    word_split: str = field(default="whitespace", metadata={"help": "How lines are split into words: whitespace or punctuation."})
    softmax: str = field(default="full", metadata={"help": "full, sampled or adaptive."})
    num_sampled: int = field(default=8192, metadata={"help": "Negatives per batch for the sampled softmax."})
    batch_mode: str = field(default="stream", metadata={"help": "stream (bilm-tf windows, state carried) or sentence."})
    unroll_steps: int = field(default=20, metadata={"help": "Window length in tokens (the longest sentence in sentence mode)."})
    per_device_batch_size: int = field(default=32, metadata={"help": "Rows per batch and process."})
    max_steps: int = field(default=-1, metadata={"help": "Optimizer steps; overrides num_train_epochs when > 0."})
    num_train_epochs: float = field(default=1.0, metadata={"help": "Passes over the corpus when max_steps <= 0."})
    optimizer: str = field(default="adagrad", metadata={"help": "adagrad (bilm-tf: lr 0.2, accumulator 1.0) or adamw."})
    learning_rate: float | None = field(default=None, metadata={"help": "Default 0.2 for adagrad, 1e-3 for adamw."})
    weight_decay: float = field(default=0.0)
    lr_scheduler_type: str = field(default="constant", metadata={"help": "A transformers scheduler name."})
    warmup_steps: int = field(default=0)
    max_grad_norm: float = field(default=10.0, metadata={"help": "Global-norm gradient clipping (bilm-tf: 10)."})
    dropout: float | None = field(default=None, metadata={"help": "Override the config's dropout (bilm-tf: 0.1)."})
    mixed_precision: str = field(default="no", metadata={"help": "no, bf16 or fp16."})
    seed: int = field(default=42)
    shuffle_buffer: int = field(default=10000, metadata={"help": "Sentences shuffled together; 1 keeps file order."})
    logging_steps: int = field(default=10)
    eval_steps: int = field(default=0, metadata={"help": "Evaluate every N steps (0: only at the end)."})
    max_eval_batches: int = field(default=0, metadata={"help": "Cap on evaluation batches (0: the whole file)."})
    save_steps: int = field(default=0, metadata={"help": "Checkpoint every N steps (0: only at the end)."})
    save_total_limit: int = field(default=2, metadata={"help": "Checkpoints kept."})
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "A checkpoint folder, or 'latest' for the newest in output_dir/checkpoints."}
    )
    report_to: str = field(default="auto", metadata={"help": "Accelerate tracker: auto (tensorboard if installed), none, ..."})
    overwrite_output_dir: bool = field(default=False)
    push_to_hub: bool = field(default=False)
    hub_model_id: str | None = field(default=None)
    hub_private_repo: bool = field(default=False)
    use_cpu: bool = field(default=False, metadata={"help": "Train on CPU even when a GPU is there."})
    ddp_timeout: int = field(
        default=1800,
        metadata={"help": "Seconds a process waits for the others in a collective before the run fails (as Trainer's)."},
    )
    disable_tqdm: bool = field(default=False)

    def __post_init__(self):
        if self.preset and self.config_file:
            raise ValueError("give --preset or --config_file, not both")
        if self.init_from and (self.preset or self.config_file):
            raise ValueError("--init_from takes its architecture from the model folder; drop --preset/--config_file")
        if not (self.preset or self.config_file or self.init_from):
            self.preset = "small"
        choices = {
            "softmax": ("full", "sampled", "adaptive"),
            "batch_mode": ("stream", "sentence"),
            "optimizer": ("adagrad", "adamw"),
            "mixed_precision": ("no", "bf16", "fp16"),
            "word_split": ("whitespace", "punctuation"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"--{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("unroll_steps", "per_device_batch_size", "logging_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.batch_mode == "sentence" and self.unroll_steps < 3:
            raise ValueError("--unroll_steps must be at least 3 in sentence mode (<S>, a word, </S>)")
        if self.max_steps <= 0 and self.num_train_epochs <= 0:
            raise ValueError("give --max_steps or a positive --num_train_epochs")
        if self.push_to_hub and not self.hub_model_id:
            raise ValueError("--push_to_hub needs --hub_model_id")
        if self.softmax_weight_file and not self.init_from:
            raise ValueError("--softmax_weight_file goes with --init_from (a converted model)")
        if self.softmax_weight_file and self.softmax == "adaptive":
            raise ValueError("--softmax_weight_file holds a full softmax; use --softmax full or sampled")
        if self.learning_rate is None:
            self.learning_rate = 0.2 if self.optimizer == "adagrad" else 1e-3


class NonFiniteLossError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------------
# Set-up
# --------------------------------------------------------------------------------------------------


def make_accelerator(args: PretrainArguments):
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs, ProjectConfiguration

    log_with = None
    if args.report_to == "auto":
        try:
            import tensorboard  # noqa: F401

            log_with = "tensorboard"
        except ImportError:
            log_with = None
    elif args.report_to != "none":
        log_with = args.report_to
    # Without cpu=True a CPU-only torchrun/accelerate launch silently gives independent single processes.
    cpu = args.use_cpu or not torch.cuda.is_available()
    handlers = [
        DistributedDataParallelKwargs(find_unused_parameters=args.softmax == "adaptive"),
        # A process that waits for a dead or stuck peer fails after this long instead of hanging.
        InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=args.ddp_timeout)),
    ]
    return Accelerator(
        cpu=cpu,
        mixed_precision=args.mixed_precision,
        log_with=log_with,
        project_config=ProjectConfiguration(project_dir=args.output_dir, logging_dir=os.path.join(args.output_dir, "logs")),
        kwargs_handlers=handlers,
    )


def prepare_tokenizer(args: PretrainArguments, train_files: list[str], accelerator) -> ElmoTokenizer:
    """The tokenizer with its word vocabulary: given, taken from --init_from, or built from the corpus."""
    vocab_path = args.vocab_file
    if vocab_path is None and args.init_from and os.path.exists(os.path.join(args.init_from, "vocab.txt")):
        vocab_path = os.path.join(args.init_from, "vocab.txt")
    if vocab_path is None:
        vocab_path = os.path.join(args.output_dir, "vocab.txt")
        with accelerator.main_process_first():
            if accelerator.is_main_process:
                splitter = "whitespace" if args.word_split == "whitespace" else "punctuation"
                texts = (example["text"] for example in read_sentences(train_files))
                words = build_vocab(texts, max_size=args.max_vocab_size, min_count=args.min_count, split=splitter)
                if len(words) <= 3:
                    raise ValueError(f"the training corpus {train_files} holds no words")
                write_vocab(words, vocab_path)
                logger.info("built a vocabulary of %d words from the corpus: %s", len(words), vocab_path)
    return ElmoTokenizer(vocab_file=vocab_path, word_split=args.word_split)


def make_model(args: PretrainArguments, tokenizer: ElmoTokenizer) -> ElmoForPreTraining:
    overrides = {"vocab_size": tokenizer.word_vocab_size, "softmax_type": args.softmax, "num_sampled": args.num_sampled}
    if args.dropout is not None:
        overrides["dropout"] = args.dropout
    if args.init_from:
        saved = ElmoConfig.from_pretrained(args.init_from)
        # The saved softmax is kept only when it predicts the same vocabulary in the same form.
        keep_softmax = (
            _has_softmax(args.init_from)
            and saved.vocab_size == tokenizer.word_vocab_size
            and (saved.softmax_type == "adaptive") == (args.softmax == "adaptive")
        )
        model = ElmoForPreTraining.from_pretrained(args.init_from, ignore_mismatched_sizes=not keep_softmax, **overrides)
        if args.softmax_weight_file:
            _load_hdf5_softmax(model, args.softmax_weight_file)
        elif not keep_softmax and args.softmax != "adaptive":
            # Published weights hold no softmax: start it from the model's own layer-0 vectors of the words.
            words = tokenizer.word_vocab
            char_ids = torch.tensor(tokenizer.convert_tokens_to_char_ids(words))
            model.initialize_softmax_from_token_embeddings(char_ids)
            logger.info("initialised the softmax from the layer-0 vectors of the %d vocabulary words", len(words))
        return model
    if args.config_file:
        config = ElmoConfig.from_json_file(args.config_file)
        for key, value in overrides.items():
            setattr(config, key, value)
        config.validate()
    else:
        config = ElmoConfig.from_preset(args.preset, **overrides)
    return ElmoForPreTraining(config)


def _load_hdf5_softmax(model: ElmoForPreTraining, path: str) -> None:
    from modeling_elmo.convert_allennlp_elmo import read_hdf5_softmax

    found = read_hdf5_softmax(path)
    if found is None:
        raise ValueError(f"{path} holds no softmax/W and softmax/b datasets")
    weight, bias = found
    expected = tuple(model.softmax.weight.shape)
    if tuple(weight.shape) != expected:
        raise ValueError(
            f"softmax/W in {path} has shape {tuple(weight.shape)}, but the vocabulary and the model need {expected}"
        )
    with torch.no_grad():
        model.softmax.weight.copy_(weight)
        model.softmax.bias.copy_(bias)
    logger.info("loaded the softmax from %s", path)


def _has_softmax(folder: str) -> bool:
    from safetensors import safe_open

    path = os.path.join(folder, "model.safetensors")
    if not os.path.exists(path):
        return False
    with safe_open(path, "pt") as handle:
        return any(key.startswith("softmax.") for key in handle.keys())


def make_optimizer(args: PretrainArguments, model):
    if args.optimizer == "adagrad":
        return torch.optim.Adagrad(
            model.parameters(), lr=args.learning_rate, initial_accumulator_value=1.0, weight_decay=args.weight_decay
        )
    return torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)


# --------------------------------------------------------------------------------------------------
# Data position and checkpoints
# --------------------------------------------------------------------------------------------------


@dataclass
class Progress:
    """Where training is: saved in every checkpoint, with the LSTM state of this process's rows."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0
    tokens_seen: int = 0
    train_seconds: float = 0.0


def _splitter(args):
    return (lambda text: text.split()) if args.word_split == "whitespace" else split_words


def batches_for_epoch(args, files, encoder, epoch, rank, world, stats, skip=0):
    """This process's batches of one epoch, the first `skip` of them passed over without encoding."""
    words = corpus_words(files, _splitter(args), seed=args.seed, epoch=epoch, shuffle_buffer=args.shuffle_buffer,
                         rank=rank, world_size=world, stats=stats)
    if args.batch_mode == "stream":
        return stream_batches(StreamBatcher(words, args.per_device_batch_size, args.unroll_steps), encoder, skip=skip)
    return sentence_batches(words, encoder, args.per_device_batch_size, args.unroll_steps, stats=stats, skip=skip)


def count_batches(args, files, rank, world) -> int:
    """Batches in one epoch of this shard, in file order, without encoding characters."""
    words = corpus_words(files, _splitter(args), seed=args.seed, epoch=0, shuffle_buffer=1, rank=rank, world_size=world)
    if args.batch_mode == "stream":
        batcher = StreamBatcher(words, args.per_device_batch_size, args.unroll_steps)
        count = 0
        while batcher.next_windows() is not None:
            count += 1
        return count
    return math.ceil(sum(1 for _ in words) / args.per_device_batch_size)


def save_checkpoint(accelerator, args, progress: Progress, lstm_state) -> str:
    """Write a checkpoint atomically: into a temporary folder, then renamed into place."""
    root = Path(args.output_dir) / "checkpoints"
    final = root / f"step-{progress.step:08d}"
    tmp = root / f".tmp-step-{progress.step:08d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    state = None if lstm_state is None else tuple(t.detach().cpu() for t in lstm_state)
    torch.save({"progress": asdict(progress), "lstm_state": state}, tmp / f"progress_rank{accelerator.process_index}.pt")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / "args.json").write_text(json.dumps(asdict(args), indent=2))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        kept = sorted(p for p in root.glob("step-*") if p.is_dir())
        for old in kept[: max(0, len(kept) - args.save_total_limit)]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return str(final)


def find_checkpoint(args) -> Path:
    if args.resume_from_checkpoint == "latest":
        kept = sorted(p for p in (Path(args.output_dir) / "checkpoints").glob("step-*") if p.is_dir())
        if not kept:
            raise FileNotFoundError(f"no checkpoint in {Path(args.output_dir) / 'checkpoints'} to resume from")
        return kept[-1]
    path = Path(args.resume_from_checkpoint)
    if not (path / "progress_rank0.pt").exists():
        raise FileNotFoundError(f"{path} is not a checkpoint folder of train.pretrain (no progress_rank0.pt)")
    return path


# --------------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate(args, accelerator, model, files, encoder) -> dict[str, float]:
    """Forward, backward and average perplexity with the full softmax over this process's shard, summed
    over processes. Stream layout with the state carried, like bilm-tf's run_test."""
    model.eval()
    words = corpus_words(files, _splitter(args), seed=0, epoch=0, shuffle_buffer=1,
                         rank=accelerator.process_index, world_size=accelerator.num_processes)
    if args.batch_mode == "stream":
        batches = stream_batches(StreamBatcher(words, args.per_device_batch_size, args.unroll_steps), encoder)
    else:
        batches = sentence_batches(words, encoder, args.per_device_batch_size, args.unroll_steps)
    totals = torch.zeros(4, dtype=torch.float64, device=accelerator.device)  # nll_f, n_f, nll_b, n_b
    state = None
    for index, batch in enumerate(batches):
        if args.max_eval_batches and index >= args.max_eval_batches:
            break
        batch = {k: v.to(accelerator.device) for k, v in batch.items()}
        with accelerator.autocast():
            out = model(**batch, state=state, use_cache=args.batch_mode == "stream")
        state = out.state
        totals += torch.stack([
            out.forward_loss.double() * out.forward_tokens, out.forward_tokens.double(),
            out.backward_loss.double() * out.backward_tokens, out.backward_tokens.double(),
        ])
    totals = accelerator.reduce(totals, reduction="sum")
    model.train()
    nll_f, n_f, nll_b, n_b = totals.tolist()
    if n_f == 0:
        raise ValueError(f"the validation data {files} gave no batch; use a smaller --per_device_batch_size or --unroll_steps")
    loss_f, loss_b = nll_f / n_f, nll_b / n_b
    return {
        "forward_perplexity": math.exp(loss_f),
        "backward_perplexity": math.exp(loss_b),
        "average_perplexity": math.exp(0.5 * (loss_f + loss_b)),
        "eval_tokens": int(n_f),
    }


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------


def train(args: PretrainArguments) -> dict:
    from accelerate.utils import set_seed
    from transformers import get_scheduler

    output_dir = Path(args.output_dir)
    if (
        args.resume_from_checkpoint is None
        and output_dir.exists()
        and any(output_dir.iterdir())
        and not args.overwrite_output_dir
    ):
        raise FileExistsError(
            f"{output_dir} exists and is not empty; use --overwrite_output_dir, or --resume_from_checkpoint latest"
        )
    train_files = resolve_files(args.train_file)
    valid_files = resolve_files(args.validation_file) if args.validation_file else None

    accelerator = make_accelerator(args)
    rank, world = accelerator.process_index, accelerator.num_processes
    if accelerator.is_main_process:
        if args.overwrite_output_dir and args.resume_from_checkpoint is None and output_dir.exists():
            shutil.rmtree(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    logger.info("distributed: %s, %d process(es), device %s", accelerator.distributed_type, world, accelerator.device)
    set_seed(args.seed)

    tokenizer = prepare_tokenizer(args, train_files, accelerator)
    encoder = BatchEncoder(tokenizer)
    model = make_model(args, tokenizer)
    optimizer = make_optimizer(args, model)

    if args.max_steps > 0:
        total_steps = args.max_steps
    else:  # an estimate from the file order; the run stops at the end of the last epoch in any case
        per_epoch = accelerator.gather(torch.tensor([count_batches(args, train_files, rank, world)], device=accelerator.device))
        total_steps = math.ceil(args.num_train_epochs * int(per_epoch.min()))
    scheduler = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=args.warmup_steps,
                              num_training_steps=total_steps)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)

    progress, lstm_state = Progress(), None
    if args.resume_from_checkpoint:
        checkpoint = find_checkpoint(args)
        accelerator.load_state(str(checkpoint))
        saved = torch.load(checkpoint / f"progress_rank{rank}.pt", weights_only=False)
        progress = Progress(**saved["progress"])
        if saved["lstm_state"] is not None:
            lstm_state = tuple(t.to(accelerator.device) for t in saved["lstm_state"])
        logger.info("resumed from %s at step %d", checkpoint, progress.step)

    with contextlib.suppress(Exception):
        accelerator.init_trackers("elmo-pretrain", config={k: str(v) for k, v in asdict(args).items()})

    stats = CorpusStats()
    log_path = output_dir / "train_log.jsonl"
    progress_bar = None
    if accelerator.is_main_process and not args.disable_tqdm:
        from tqdm.auto import tqdm

        progress_bar = tqdm(total=total_steps, initial=progress.step, desc="pretraining", unit="step", dynamic_ncols=True)
    started = time.perf_counter() - progress.train_seconds
    window_tokens, window_start = 0, time.perf_counter()
    eval_results: dict = {}
    model.train()

    while progress.step < total_steps:
        batches = batches_for_epoch(args, train_files, encoder, progress.epoch, rank, world, stats,
                                    skip=progress.batches_in_epoch)
        while progress.step < total_steps:
            batch = next(batches, None)
            # Every process must take the same steps: the epoch ends for all when one shard runs out.
            have = accelerator.reduce(torch.tensor([float(batch is not None)], device=accelerator.device), "sum")
            if int(have.item()) < world:
                break
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            with accelerator.autocast():
                out = model(**batch, state=lstm_state, use_cache=args.batch_mode == "stream")
            loss = out.loss
            finite = accelerator.reduce(torch.isfinite(loss.detach()).float().reshape(1), reduction="sum")
            if int(finite.item()) != world:
                raise NonFiniteLossError(
                    f"non-finite loss ({loss.item()}) at step {progress.step + 1} (epoch {progress.epoch}); "
                    "nothing after the last checkpoint was saved. Lower the learning rate or check the data."
                )
            accelerator.backward(loss)
            if args.max_grad_norm > 0:
                accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            if args.batch_mode == "stream":  # truncated backpropagation: carry the state, not its graph
                lstm_state = tuple(t.detach() for t in out.state)

            progress.step += 1
            progress.batches_in_epoch += 1
            tokens = int(accelerator.reduce(out.forward_tokens.detach().reshape(1), reduction="sum").item())
            progress.tokens_seen += tokens
            window_tokens += tokens

            if progress.step % args.logging_steps == 0 or progress.step == total_steps:
                losses = accelerator.reduce(
                    torch.stack([out.loss.detach(), out.forward_loss.detach(), out.backward_loss.detach()]).float(),
                    reduction="mean",
                ).tolist()
                elapsed = time.perf_counter() - window_start
                record = {
                    "step": progress.step,
                    "epoch": progress.epoch,
                    "loss": losses[0],
                    "forward_loss": losses[1],
                    "backward_loss": losses[2],
                    "perplexity": math.exp(min(losses[0], 50.0)),
                    "tokens_per_second": window_tokens / max(elapsed, 1e-9),
                    "learning_rate": scheduler.get_last_lr()[0],
                }
                window_tokens, window_start = 0, time.perf_counter()
                accelerator.log({f"train/{k}": v for k, v in record.items() if k != "step"}, step=progress.step)
                if accelerator.is_main_process:
                    with open(log_path, "a") as handle:
                        handle.write(json.dumps(record) + "\n")
                    if progress_bar is not None:
                        progress_bar.set_postfix(loss=f"{record['loss']:.3f}", ppl=f"{record['perplexity']:.1f}",
                                                 tok_s=f"{record['tokens_per_second']:.0f}")
            if progress_bar is not None:
                progress_bar.update(1)
            if valid_files and args.eval_steps and progress.step % args.eval_steps == 0:
                eval_results = evaluate(args, accelerator, model, valid_files, encoder)
                accelerator.log({f"eval/{k}": v for k, v in eval_results.items()}, step=progress.step)
                logger.info("step %d: %s", progress.step, _format(eval_results))
            if args.save_steps and progress.step % args.save_steps == 0:
                progress.train_seconds = time.perf_counter() - started
                save_checkpoint(accelerator, args, progress, lstm_state)
        else:
            break  # total_steps reached
        if progress.batches_in_epoch == 0:
            raise ValueError(
                f"the training corpus gives no full batch of {args.per_device_batch_size} x {args.unroll_steps} "
                f"tokens per process; use a larger corpus or a smaller --per_device_batch_size / --unroll_steps"
            )
        if args.max_steps <= 0 and progress.epoch + 1 >= math.ceil(args.num_train_epochs):
            break
        progress.epoch += 1
        progress.batches_in_epoch = 0
        lstm_state = None  # a new pass over the corpus starts from a zero state

    if progress_bar is not None:
        progress_bar.close()
    progress.train_seconds = time.perf_counter() - started
    if valid_files:
        eval_results = evaluate(args, accelerator, model, valid_files, encoder)
        accelerator.log({f"eval/{k}": v for k, v in eval_results.items()}, step=progress.step)
    if not (args.save_steps and progress.step % args.save_steps == 0):
        save_checkpoint(accelerator, args, progress, lstm_state)
    # DDP keeps replicas identical; check it, since a wrong launch gives independent runs that drift apart.
    checksum = torch.stack([torch.stack([p.detach().double().sum(), p.detach().double().pow(2).sum()])
                            for p in model.parameters()]).flatten()
    gathered = accelerator.gather(checksum.unsqueeze(0))
    identical = bool((gathered == gathered[0]).all().item())

    summary = {
        "steps": progress.step,
        "epochs_started": progress.epoch + (1 if progress.batches_in_epoch else 0),
        "tokens_seen": progress.tokens_seen,
        "train_seconds": round(progress.train_seconds, 2),
        "tokens_per_second": round(progress.tokens_seen / max(progress.train_seconds, 1e-9), 1),
        "processes": world,
        "parameters_identical_across_processes": identical,
        "skipped_invalid_utf8_lines": stats.invalid_utf8,
        "truncated_sentences": stats.truncated,
    }
    if accelerator.is_main_process:
        unwrapped = accelerator.unwrap_model(model)
        unwrapped.save_pretrained(output_dir, save_function=accelerator.save)
        tokenizer.save_pretrained(output_dir)
        (output_dir / "train_results.json").write_text(json.dumps(summary, indent=2))
        if eval_results:
            (output_dir / "eval_results.json").write_text(json.dumps(eval_results, indent=2))
        _write_card(output_dir, unwrapped, args, summary, eval_results)
        if stats.invalid_utf8:
            logger.warning("skipped %d lines that are not valid UTF-8 (e.g. %s)", stats.invalid_utf8,
                           ", ".join(stats.bad_examples))
        logger.info("trained %d steps, %d tokens in %.1f s (%.0f tokens/s)", summary["steps"], summary["tokens_seen"],
                    summary["train_seconds"], summary["tokens_per_second"])
        if eval_results:
            logger.info("validation: %s", _format(eval_results))
        logger.info("wrote the model folder to %s", output_dir.resolve())
        if args.push_to_hub:
            _push(output_dir, args)
    accelerator.wait_for_everyone()
    # Tear down in this order: the DDP wrapper first, while the process group is still registered, then the
    # group. Otherwise the wrapper's reducer drops the group's last reference when `train` returns and runs its
    # destructor holding the GIL, while a gloo worker thread that is still freeing the tensors of a finished
    # collective waits for the GIL: a deadlock, seen in about 1 of 20 two-process runs. destroy_process_group
    # releases the GIL while the group is destroyed.
    del model
    accelerator.free_memory()
    gc.collect()
    accelerator.end_training()
    return {**summary, **eval_results}


def _format(results: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in results.items())


def _write_card(output_dir: Path, model, args, summary, eval_results) -> None:
    """README.md of the model folder; a card that cannot be written must not cost the trained model."""
    try:
        from modeling_elmo.hub_utils import write_model_card

        write_model_card(
            output_dir,
            config=model.config,
            base_model=args.init_from,
            training={**summary, "corpus": [os.path.basename(p) for p in args.train_file]},
            results=eval_results or None,
        )
    except Exception as error:  # noqa: BLE001
        logger.warning("could not write the model card: %s", error)


def _push(output_dir: Path, args) -> None:
    from modeling_elmo.hub_utils import push_folder

    info = push_folder(output_dir, args.hub_model_id, private=args.hub_private_repo or None,
                       commit_message="Upload ELMo trained with train.pretrain")
    logger.info("pushed %s to %s (commit %s)", output_dir, args.hub_model_id, info.oid)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    for noisy in ("accelerate", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parser = HfArgumentParser(PretrainArguments)
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].endswith(".json"):
        (args,) = parser.parse_json_file(argv[0])
    else:
        (args,) = parser.parse_args_into_dataclasses(args=argv)
    try:
        train(args)
    except (FileNotFoundError, FileExistsError, IsADirectoryError, ValueError, NonFiniteLossError) as error:
        logger.error("%s", error)
        return 2
    except HubPushError as error:
        logger.error("the model folder is in %s, but the push failed: %s", args.output_dir, error)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
