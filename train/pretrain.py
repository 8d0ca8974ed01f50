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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import HfArgumentParser

from modeling_elmo import ElmoConfig, ElmoForPreTraining
from modeling_elmo.configuration_elmo import PRESETS
from modeling_elmo.tools.hub_utils import HubPushError
from tokenization import WORD_SPLITTERS, ElmoTokenizer, build_vocab, check_word_split, write_vocab

from .data import (
    BatchEncoder,
    BatchLayout,
    CorpusStats,
    count_batches,
    epoch_batches,
    read_sentences,
    resolve_files,
    word_splitter,
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
        default=None, metadata={"help": "Word vocabulary, one token a line (<S>, </S>, <UNK> on any line; ids follow the file); built if absent."}
    )
    max_vocab_size: int = field(default=50000, metadata={"help": "Size of a vocabulary built from the corpus."})
    min_count: int = field(default=1, metadata={"help": "Minimum count of a word in a built vocabulary."})
    word_split: str = field(default="whitespace", metadata={
        "help": "How lines are split into words, a name in tokenization.WORD_SPLITTERS: whitespace, punctuation, or jieba "
                "(punctuation, with runs of Chinese ideographs segmented into words by jieba; needs pip install "
                "'elmo-hf[zh]'), or one registered there. Saved with the tokenizer."})
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
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"--preset must be one of {sorted(PRESETS)}, got {self.preset!r}")
        choices = {
            "softmax": ("full", "sampled", "adaptive"),
            "batch_mode": ("stream", "sentence"),
            "optimizer": ("adagrad", "adamw"),
            "mixed_precision": ("no", "bf16", "fp16"),
            "word_split": tuple(WORD_SPLITTERS),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"--{name} must be one of {allowed}, got {getattr(self, name)!r}")
        check_word_split(self.word_split, option="--word_split")  # a missing package (jieba): one line
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


def train(args: PretrainArguments) -> dict:
    """Pretrain, evaluate and save the model folder (and push it); return the run's summary and its perplexities.

    Read top to bottom: what is checked before anything is written, the set-up, the loop, the end. A run that fails
    before its first checkpoint leaves `--output_dir` as it found it."""
    check_output_dir(args)
    train_files = resolve_files(args.train_file)
    valid_files = resolve_files(args.validation_file) if args.validation_file else None
    check_model_source(args)
    accelerator = make_accelerator(args)
    undo = UndoUntilCheckpoint(Path(args.output_dir), accelerator.is_main_process)
    with undo:
        run = set_up(args, accelerator, train_files, valid_files)
        train_loop(run)
        results = finish(run)
    tear_down(run)
    return results


# --------------------------------------------------------------------------------------------------
# Before anything is written
# --------------------------------------------------------------------------------------------------


def check_output_dir(args: PretrainArguments) -> None:
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


def check_model_source(args: PretrainArguments) -> None:
    """The architecture given (--preset, --config_file or --init_from) must be usable, before any file is written."""
    if args.init_from:
        if not os.path.isfile(os.path.join(args.init_from, "config.json")):
            raise FileNotFoundError(f"--init_from {args.init_from}: not a model folder (no config.json)")
        ElmoConfig.from_pretrained(args.init_from)
    elif args.config_file:
        if not os.path.isfile(args.config_file):
            raise FileNotFoundError(f"--config_file {args.config_file}: no such file")
        ElmoConfig.from_json_file(args.config_file).validate()
    else:
        ElmoConfig.from_preset(args.preset)
    if args.softmax_weight_file and not os.path.isfile(args.softmax_weight_file):
        raise FileNotFoundError(f"--softmax_weight_file {args.softmax_weight_file}: no such file")


class UndoUntilCheckpoint:
    """Leaves the output folder as it was found when the run fails before it wrote its first checkpoint: a folder
    the run created is removed, and from one that was there only what the run added (the vocabulary, logs).
    Then the corrected command can simply be run again. Only the main process writes, so only it cleans up."""

    def __init__(self, output_dir: Path, is_main_process: bool):
        self.output_dir, self.is_main_process = output_dir, is_main_process
        self.existed = output_dir.exists()
        self.entries = set(os.listdir(output_dir)) if self.existed else set()
        self.checkpoints = self._checkpoints()

    def _checkpoints(self) -> set[str]:
        return {p.name for p in (self.output_dir / "checkpoints").glob("step-*") if p.is_dir()}

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or not isinstance(error, Exception) or not self.is_main_process:
            return False
        if self._checkpoints() - self.checkpoints:
            return False  # the run saved a checkpoint: keep it to resume from
        if not self.existed:
            shutil.rmtree(self.output_dir, ignore_errors=True)
        elif self.output_dir.is_dir():
            for name in set(os.listdir(self.output_dir)) - self.entries:
                path = self.output_dir / name
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return False


# --------------------------------------------------------------------------------------------------
# Set-up
# --------------------------------------------------------------------------------------------------


@dataclass
class Progress:
    """Where training is: saved in every checkpoint, with the LSTM state of this process's rows."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0
    tokens_seen: int = 0
    train_seconds: float = 0.0


@dataclass
class Run:
    """What the loop, the evaluation and the checkpoints work with; made once by `set_up`."""

    args: PretrainArguments
    accelerator: Any
    tokenizer: ElmoTokenizer
    encoder: BatchEncoder
    model: Any  # ElmoForPreTraining, wrapped by Accelerate (DDP) when there are several processes
    optimizer: torch.optim.Optimizer
    scheduler: Any
    layout: BatchLayout
    split: Callable[[str], list[str]]
    train_files: list[str]
    valid_files: list[str] | None
    total_steps: int
    progress: Progress
    lstm_state: tuple | None = None  # stream mode: carried from one window to the next
    stats: CorpusStats = field(default_factory=CorpusStats)
    progress_bar: Any = None
    started: float = 0.0  # perf_counter at the start, less the training time of the run resumed
    window_tokens: int = 0  # tokens since the last log line, and when that was
    window_start: float = 0.0

    @property
    def output_dir(self) -> Path:
        return Path(self.args.output_dir)


def set_up(args: PretrainArguments, accelerator, train_files: list[str], valid_files: list[str] | None) -> Run:
    """The output folder, tokenizer, model, optimizer and schedule, resumed from a checkpoint when asked."""
    from accelerate.utils import set_seed
    from transformers import get_scheduler

    rank, world = accelerator.process_index, accelerator.num_processes
    layout = BatchLayout(args.batch_mode, args.per_device_batch_size, args.unroll_steps)
    split = word_splitter(args.word_split)
    words = corpus_vocabulary(args, train_files, accelerator)  # before the folder: an empty corpus writes nothing
    output_dir = Path(args.output_dir)
    if accelerator.is_main_process:
        if args.overwrite_output_dir and args.resume_from_checkpoint is None and output_dir.exists():
            shutil.rmtree(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    logger.info("distributed: %s, %d process(es), device %s", accelerator.distributed_type, world, accelerator.device)
    set_seed(args.seed)

    tokenizer = make_tokenizer(args, words, accelerator)
    model = make_model(args, tokenizer)
    optimizer = make_optimizer(args, model, accelerator.device.type)
    if args.max_steps > 0:
        total_steps = args.max_steps
    else:  # an estimate from the file order; the run stops at the end of the last epoch in any case
        count = count_batches(train_files, layout, split, rank=rank, world_size=world)
        per_epoch = accelerator.gather(torch.tensor([count], device=accelerator.device))
        total_steps = math.ceil(args.num_train_epochs * int(per_epoch.min()))
    scheduler = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=args.warmup_steps,
                              num_training_steps=total_steps)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    run = Run(args, accelerator, tokenizer, BatchEncoder(tokenizer), model, optimizer, scheduler, layout, split,
              train_files, valid_files, total_steps, Progress())
    if args.resume_from_checkpoint:
        resume(run, find_checkpoint(output_dir, args.resume_from_checkpoint))

    with contextlib.suppress(Exception):
        accelerator.init_trackers("elmo-pretrain", config={k: str(v) for k, v in asdict(args).items()})
    if accelerator.is_main_process and not args.disable_tqdm:
        from tqdm.auto import tqdm

        run.progress_bar = tqdm(total=total_steps, initial=run.progress.step, desc="pretraining", unit="step",
                                dynamic_ncols=True)
    run.started = time.perf_counter() - run.progress.train_seconds
    run.window_start = time.perf_counter()
    model.train()
    return run


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


def vocabulary_file(args: PretrainArguments) -> str | None:
    """The word vocabulary given, or the one of --init_from; None when it is built from the corpus."""
    if args.vocab_file is None and args.init_from and os.path.exists(os.path.join(args.init_from, "vocab.txt")):
        return os.path.join(args.init_from, "vocab.txt")
    return args.vocab_file


def corpus_vocabulary(args: PretrainArguments, train_files: list[str], accelerator) -> list[str] | None:
    """The words of a vocabulary built from the corpus (main process only, in memory); None when one is given."""
    if vocabulary_file(args) is not None or not accelerator.is_main_process:
        return None
    texts = (example["text"] for example in read_sentences(train_files))
    words = build_vocab(texts, max_size=args.max_vocab_size, min_count=args.min_count, split=args.word_split)
    if len(words) <= 3:
        raise ValueError(f"the training corpus {train_files} holds no words")
    return words


def make_tokenizer(args: PretrainArguments, built_words: list[str] | None, accelerator) -> ElmoTokenizer:
    """The tokenizer with its word vocabulary: given, taken from --init_from, or the one built from the corpus,
    which the main process writes into the output folder for every process to read."""
    vocab_path = vocabulary_file(args)
    if vocab_path is None:
        vocab_path = os.path.join(args.output_dir, "vocab.txt")
        with accelerator.main_process_first():
            if accelerator.is_main_process:
                write_vocab(built_words, vocab_path)
                logger.info("built a vocabulary of %d words from the corpus: %s", len(built_words), vocab_path)
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
    from modeling_elmo.tools.convert_allennlp_elmo import read_hdf5_softmax

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


def make_optimizer(args: PretrainArguments, model, device_type: str = "cpu"):
    # Training on the CPU uses torch's fused kernels (one pass over each parameter instead of a dozen tensor ops):
    # at the `small` preset a step of AdamW 45 -> 5.5 ms, of Adagrad 17 -> 4.7 ms (benchmarks/results_pretrain.md). Fused
    # Adagrad exists only for the CPU, so other devices keep torch's default.
    fused = {"fused": True} if device_type == "cpu" else {}
    if args.optimizer == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=args.learning_rate, initial_accumulator_value=1.0,
                                   weight_decay=args.weight_decay, **fused)
    return torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay, **fused)


# --------------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------------


def train_loop(run: Run) -> None:
    """Epochs until `total_steps`, or until the last epoch ends when --num_train_epochs sets the length."""
    args, progress = run.args, run.progress
    while progress.step < run.total_steps:
        batches = epoch_batches(run.train_files, run.encoder, run.layout, run.split, seed=args.seed,
                                epoch=progress.epoch, shuffle_buffer=args.shuffle_buffer,
                                rank=run.accelerator.process_index, world_size=run.accelerator.num_processes,
                                stats=run.stats, skip=progress.batches_in_epoch)
        if not run_epoch(run, batches):
            return  # total_steps reached
        if progress.batches_in_epoch == 0:
            raise ValueError(
                f"the training corpus gives no full batch of {args.per_device_batch_size} x {args.unroll_steps} "
                f"tokens per process; use a larger corpus or a smaller --per_device_batch_size / --unroll_steps"
            )
        if args.max_steps <= 0 and progress.epoch + 1 >= math.ceil(args.num_train_epochs):
            return
        progress.epoch += 1
        progress.batches_in_epoch = 0
        run.lstm_state = None  # a new pass over the corpus starts from a zero state


def run_epoch(run: Run, batches) -> bool:
    """Train on `batches`: True when they ran out (on any process), False when `total_steps` was reached."""
    accelerator, args, progress = run.accelerator, run.args, run.progress
    while progress.step < run.total_steps:
        batch = next(batches, None)
        # Every process must take the same steps: the epoch ends for all when one shard runs out.
        have = accelerator.reduce(torch.tensor([float(batch is not None)], device=accelerator.device), "sum")
        if int(have.item()) < accelerator.num_processes:
            return True
        out = training_step(run, batch)
        if progress.step % args.logging_steps == 0 or progress.step == run.total_steps:
            log_step(run, out)
        if run.progress_bar is not None:
            run.progress_bar.update(1)
        if run.valid_files and args.eval_steps and progress.step % args.eval_steps == 0:
            results = evaluate(run)
            accelerator.log({f"eval/{k}": v for k, v in results.items()}, step=progress.step)
            logger.info("step %d: %s", progress.step, _format(results))
        if args.save_steps and progress.step % args.save_steps == 0:
            progress.train_seconds = time.perf_counter() - run.started
            save_checkpoint(run)
    return False


def training_step(run: Run, batch: dict):
    """One optimizer step on `batch`; returns the model's output (losses and token counts)."""
    accelerator, args, progress = run.accelerator, run.args, run.progress
    batch = {k: v.to(accelerator.device) for k, v in batch.items()}
    with accelerator.autocast():
        out = run.model(**batch, state=run.lstm_state, use_cache=args.batch_mode == "stream")
    loss = out.loss
    finite = accelerator.reduce(torch.isfinite(loss.detach()).float().reshape(1), reduction="sum")
    if int(finite.item()) != accelerator.num_processes:
        raise NonFiniteLossError(
            f"non-finite loss ({loss.item()}) at step {progress.step + 1} (epoch {progress.epoch}); "
            "nothing after the last checkpoint was saved. Lower the learning rate or check the data."
        )
    accelerator.backward(loss)
    if args.max_grad_norm > 0:
        accelerator.clip_grad_norm_(run.model.parameters(), args.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    if args.batch_mode == "stream":  # truncated backpropagation: carry the state, not its graph
        run.lstm_state = tuple(t.detach() for t in out.state)

    progress.step += 1
    progress.batches_in_epoch += 1
    tokens = int(accelerator.reduce(out.forward_tokens.detach().reshape(1), reduction="sum").item())
    progress.tokens_seen += tokens
    run.window_tokens += tokens
    return out


def log_step(run: Run, out) -> None:
    """Losses averaged over processes, and tokens/s since the last log line: to the trackers, train_log.jsonl and
    the progress bar."""
    accelerator, progress = run.accelerator, run.progress
    losses = accelerator.reduce(
        torch.stack([out.loss.detach(), out.forward_loss.detach(), out.backward_loss.detach()]).float(),
        reduction="mean",
    ).tolist()
    elapsed = time.perf_counter() - run.window_start
    record = {
        "step": progress.step,
        "epoch": progress.epoch,
        "loss": losses[0],
        "forward_loss": losses[1],
        "backward_loss": losses[2],
        "perplexity": math.exp(min(losses[0], 50.0)),
        "tokens_per_second": run.window_tokens / max(elapsed, 1e-9),
        "learning_rate": run.scheduler.get_last_lr()[0],
    }
    run.window_tokens, run.window_start = 0, time.perf_counter()
    accelerator.log({f"train/{k}": v for k, v in record.items() if k != "step"}, step=progress.step)
    if accelerator.is_main_process:
        with open(run.output_dir / "train_log.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
        if run.progress_bar is not None:
            run.progress_bar.set_postfix(loss=f"{record['loss']:.3f}", ppl=f"{record['perplexity']:.1f}",
                                         tok_s=f"{record['tokens_per_second']:.0f}")


# --------------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate(run: Run) -> dict[str, float]:
    """Forward, backward and average perplexity with the full softmax over this process's shard, summed
    over processes. Stream layout with the state carried, like bilm-tf's run_test."""
    accelerator, model, files = run.accelerator, run.model, run.valid_files
    model.eval()
    batches = epoch_batches(files, run.encoder, run.layout, run.split, seed=0, epoch=0, shuffle_buffer=1,
                            rank=accelerator.process_index, world_size=accelerator.num_processes)
    totals = torch.zeros(4, dtype=torch.float64, device=accelerator.device)  # nll_f, n_f, nll_b, n_b
    state = None
    for index, batch in enumerate(batches):
        if run.args.max_eval_batches and index >= run.args.max_eval_batches:
            break
        batch = {k: v.to(accelerator.device) for k, v in batch.items()}
        with accelerator.autocast():
            out = model(**batch, state=state, use_cache=run.layout.mode == "stream")
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
# Checkpoints
# --------------------------------------------------------------------------------------------------


def save_checkpoint(run: Run) -> str:
    """Write a checkpoint atomically: into a temporary folder, then renamed into place."""
    accelerator, progress = run.accelerator, run.progress
    root = run.output_dir / "checkpoints"
    final = root / f"step-{progress.step:08d}"
    tmp = root / f".tmp-step-{progress.step:08d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    state = None if run.lstm_state is None else tuple(t.detach().cpu() for t in run.lstm_state)
    torch.save({"progress": asdict(progress), "lstm_state": state}, tmp / f"progress_rank{accelerator.process_index}.pt")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / "args.json").write_text(json.dumps(asdict(run.args), indent=2))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        kept = sorted(p for p in root.glob("step-*") if p.is_dir())
        for old in kept[: max(0, len(kept) - run.args.save_total_limit)]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return str(final)


def find_checkpoint(output_dir: Path, resume_from_checkpoint: str) -> Path:
    if resume_from_checkpoint == "latest":
        kept = sorted(p for p in (output_dir / "checkpoints").glob("step-*") if p.is_dir())
        if not kept:
            raise FileNotFoundError(f"no checkpoint in {output_dir / 'checkpoints'} to resume from")
        return kept[-1]
    path = Path(resume_from_checkpoint)
    if not (path / "progress_rank0.pt").exists():
        raise FileNotFoundError(f"{path} is not a checkpoint folder of train.pretrain (no progress_rank0.pt)")
    return path


def resume(run: Run, checkpoint: Path) -> None:
    """Model, optimizer, schedule and RNG states, the data position and this process's LSTM state."""
    run.accelerator.load_state(str(checkpoint))
    saved = torch.load(checkpoint / f"progress_rank{run.accelerator.process_index}.pt", weights_only=False)
    run.progress = Progress(**saved["progress"])
    if saved["lstm_state"] is not None:
        run.lstm_state = tuple(t.to(run.accelerator.device) for t in saved["lstm_state"])
    logger.info("resumed from %s at step %d", checkpoint, run.progress.step)


# --------------------------------------------------------------------------------------------------
# The end: last evaluation and checkpoint, the model folder, the push, the teardown
# --------------------------------------------------------------------------------------------------


def finish(run: Run) -> dict:
    accelerator, args, progress = run.accelerator, run.args, run.progress
    if run.progress_bar is not None:
        run.progress_bar.close()
    progress.train_seconds = time.perf_counter() - run.started
    eval_results: dict = {}
    if run.valid_files:
        eval_results = evaluate(run)
        accelerator.log({f"eval/{k}": v for k, v in eval_results.items()}, step=progress.step)
    if not (args.save_steps and progress.step % args.save_steps == 0):
        save_checkpoint(run)
    summary = {
        "steps": progress.step,
        "epochs_started": progress.epoch + (1 if progress.batches_in_epoch else 0),
        "tokens_seen": progress.tokens_seen,
        "train_seconds": round(progress.train_seconds, 2),
        "tokens_per_second": round(progress.tokens_seen / max(progress.train_seconds, 1e-9), 1),
        "processes": accelerator.num_processes,
        "parameters_identical_across_processes": replicas_identical(run),
        "skipped_invalid_utf8_lines": run.stats.invalid_utf8,
        "truncated_sentences": run.stats.truncated,
    }
    if accelerator.is_main_process:
        write_model_folder(run, summary, eval_results)
        if args.push_to_hub:
            _push(run.output_dir, args)
    accelerator.wait_for_everyone()
    return {**summary, **eval_results}


def replicas_identical(run: Run) -> bool:
    """DDP keeps replicas identical; check it, since a wrong launch gives independent runs that drift apart."""
    checksum = torch.stack([torch.stack([p.detach().double().sum(), p.detach().double().pow(2).sum()])
                            for p in run.model.parameters()]).flatten()
    gathered = run.accelerator.gather(checksum.unsqueeze(0))
    return bool((gathered == gathered[0]).all().item())


def write_model_folder(run: Run, summary: dict, eval_results: dict) -> None:
    """The model, tokenizer, results and model card (main process)."""
    output_dir = run.output_dir
    unwrapped = run.accelerator.unwrap_model(run.model)
    unwrapped.save_pretrained(output_dir, save_function=run.accelerator.save)
    run.tokenizer.save_pretrained(output_dir)
    (output_dir / "train_results.json").write_text(json.dumps(summary, indent=2))
    if eval_results:
        (output_dir / "eval_results.json").write_text(json.dumps(eval_results, indent=2))
    _write_card(output_dir, unwrapped, run.args, summary, eval_results)
    if run.stats.invalid_utf8:
        logger.warning("skipped %d lines that are not valid UTF-8 (e.g. %s)", run.stats.invalid_utf8,
                       ", ".join(run.stats.bad_examples))
    logger.info("trained %d steps, %d tokens in %.1f s (%.0f tokens/s)", summary["steps"], summary["tokens_seen"],
                summary["train_seconds"], summary["tokens_per_second"])
    if eval_results:
        logger.info("validation: %s", _format(eval_results))
    logger.info("wrote the model folder to %s", output_dir.resolve())


def tear_down(run: Run) -> None:
    accelerator = run.accelerator
    # Tear down in this order: the DDP wrapper first, while the process group is still registered, then the
    # group. Otherwise the wrapper's reducer drops the group's last reference when `train` returns and runs its
    # destructor holding the GIL, while a gloo worker thread that is still freeing the tensors of a finished
    # collective waits for the GIL: a deadlock, seen in about 1 of 20 two-process runs. destroy_process_group
    # releases the GIL while the group is destroyed.
    run.model = run.optimizer = run.scheduler = None  # the run holds the only other references to the wrapper
    accelerator.free_memory()
    gc.collect()
    accelerator.end_training()


def _format(results: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in results.items())


def _write_card(output_dir: Path, model, args, summary, eval_results) -> None:
    """README.md of the model folder; a card that cannot be written must not cost the trained model."""
    try:
        from modeling_elmo.tools.hub_utils import write_model_card

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
    from modeling_elmo.tools.hub_utils import push_folder

    # push_folder leaves the run's checkpoints/ (optimizer, RNG states) and logs out: model, tokenizer, card, code.
    info = push_folder(output_dir, args.hub_model_id, private=args.hub_private_repo or None,
                       commit_message="Upload ELMo trained with train.pretrain")
    logger.info("pushed %s to %s (commit %s)", output_dir, args.hub_model_id, info.oid)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    for noisy in ("accelerate", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parser = HfArgumentParser(PretrainArguments)
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) == 1 and argv[0].endswith(".json"):
            (args,) = parser.parse_json_file(argv[0])
        else:
            (args,) = parser.parse_args_into_dataclasses(args=argv)
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
