"""A pretraining run of `elmo-pretrain`: what is checked before anything is written, the set-up, the loop, the
evaluation and the end (the model folder, the push). The command's row is in `cli/table.py`, its arguments in
`train/pretrain_args.py`; checkpoints, resuming and stopping on a signal in `train/checkpoints.py`.
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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import (
    DistributedDataParallelKwargs,
    InitProcessGroupKwargs,
    ProjectConfiguration,
    set_seed,
)
from safetensors import safe_open
from tqdm.auto import tqdm
from transformers.utils import cached_file
from transformers.utils import logging as hf_logging

from elmo_hf.modeling_elmo import ElmoConfig, ElmoForPreTraining
from elmo_hf.modeling_elmo.configuration_elmo import PRESETS
from elmo_hf.tokenization import (
    ElmoManyLangsTokenizer,
    ElmoTokenizer,
    build_vocab,
    check_word_split,
    save_with_fast_twin,
    split_name,
    write_vocab,
)
from elmo_hf.tokenization.word_splits_elmo import WordSplitError
from elmo_hf.tools.conversion.convert_allennlp_elmo import read_hdf5_softmax
from elmo_hf.tools.core.errors import InputError, RunFailed, reading, writing
from elmo_hf.tools.core.interrupts import Interrupted, InterruptGuard
from elmo_hf.tools.core.output_folders import run_lock
from elmo_hf.tools.core.output_paths import check_writable_folder
from elmo_hf.tools.core.text_files import check_decodes, resolve_files
from elmo_hf.tools.hub.hub_push import HubPushError, push_folder
from elmo_hf.tools.hub.model_card import write_model_card
from elmo_hf.tools.loading import load_elmo

from .checkpoints import (
    Progress,
    UndoUntilCheckpoint,
    agreed_stop,
    check_same_run,
    find_checkpoint,
    interrupted_message,
    resolved_resume,
    resume,
    save_checkpoint,
)
from .data import (
    BatchEncoder,
    BatchLayout,
    CorpusStats,
    count_batches,
    epoch_batches,
    read_sentences,
    word_splitter,
)
from .lr_schedule import check_schedule, make_scheduler
from .pretrain_args import PretrainArguments
from .pretrain_eval import evaluate
from .pretrain_word_split import chosen_word_split, warn_if_unsegmented
from .time_budget import TrainClock, format_duration, parse_duration

logger = logging.getLogger("elmo-pretrain")


class NonFiniteLossError(InputError):
    """The loss became NaN or infinite: settings the data cannot train with (a learning rate too high, ...)."""


def check_model_options(args: PretrainArguments) -> None:
    """The options that need the model's presets, the registered word splits or transformers' schedules (the
    arguments' own checks need none of them): an `InputError` in one line, before anything is written."""
    if args.preset is not None and args.preset not in PRESETS:
        raise InputError(f"--preset must be one of {sorted(PRESETS)}, got {args.preset!r}")
    if args.word_split is not None:  # a missing package (jieba), an unknown name: one line
        try:
            check_word_split(args.word_split, option="--word_split", allow_import=True)
        except WordSplitError as error:
            raise InputError(str(error)) from error
    check_schedule(args.lr_scheduler_type, args.warmup_steps)


def train(args: PretrainArguments, guard: InterruptGuard | None = None) -> dict:
    """Pretrain, evaluate and save the model folder (and push it); return the run's summary and its perplexities.

    Read top to bottom: what is checked before anything is written, the set-up, the loop, the end. A run that fails
    before its first checkpoint leaves `--output_dir` as it found it. SIGINT/SIGTERM (with `guard` installed): during
    the set-up the run stops at once and leaves the folder as it found it; during training every process stops at
    the next step boundary, after a checkpoint of that step; either way `Interrupted` is raised with the line that
    says what was kept as its `report` (on the first process; the others say nothing)."""
    guard = guard or InterruptGuard()
    output_dir, run = Path(args.output_dir), None
    is_main = os.environ.get("RANK", "0") == "0"  # until Accelerate says so
    check_model_options(args)
    try:
        # the options stay as given; what the run settles makes a new (frozen) copy of them, which every step reads
        auto = args.resume_from_checkpoint == "auto"
        args = replace(args, resume_from_checkpoint=resolved_resume(args))
        check_output_dir(args, auto=auto)
        check_same_run(args)
        train_files = resolve_files(args.train_file)
        valid_files = resolve_files(args.validation_file) if args.validation_file else None
        check_decodes(train_files + (valid_files or []), args.encoding)
        start = check_model_source(args)
        word_split = start.word_split if start is not None and args.word_split is None else \
            chosen_word_split(args, train_files, is_main)  # --init_from's model goes on splitting as it did
        args = replace(args, word_split=word_split)
        accelerator = make_accelerator(args)
        is_main = accelerator.is_main_process
        with UndoUntilCheckpoint(output_dir, is_main):
            run = set_up(args, accelerator, train_files, valid_files, guard, start)
            with guard.deferred():  # from here a signal is answered at the next step boundary
                train_loop(run)
                results = finish(run)
    except Interrupted as stop:
        stop.report = (interrupted_message(stop, output_dir, finished=run is not None and run.finished) if is_main
                       else None)
        if run is not None:
            tear_down(run)
        raise
    tear_down(run)
    return results


# --------------------------------------------------------------------------------------------------
# Before anything is written
# --------------------------------------------------------------------------------------------------


def check_output_dir(args: PretrainArguments, auto: bool = False) -> None:
    """--output_dir can be written (its parent exists and takes files) and holds no other run (unless told). `auto`:
    `--resume_from_checkpoint auto` found no checkpoint there (`args.resume_from_checkpoint` is then None)."""
    output_dir = Path(args.output_dir)
    check_writable_folder(output_dir, "--output_dir")  # an InputError in one line
    if (
        args.resume_from_checkpoint is None
        and output_dir.exists()
        and any(output_dir.iterdir())
        and not args.overwrite_output_dir
    ):
        if auto:  # e.g. an attempt killed before its first checkpoint left its vocabulary and logs
            raise InputError(f"{output_dir} exists, is not empty and holds no checkpoint for "
                             "--resume_from_checkpoint auto; add --overwrite_output_dir to start afresh there")
        raise InputError(
            f"{output_dir} exists and is not empty; use --overwrite_output_dir, or --resume_from_checkpoint latest"
        )


@dataclass
class StartModel:
    """What `--init_from` gives, read before anything is written: its config and its tokenizer."""

    config: Any
    tokenizer: Any
    word_split: str  # its tokenizer's, by name (checked to be registered here)


def check_model_source(args: PretrainArguments) -> StartModel | None:
    """The architecture given (--preset, --config_file or --init_from) must be usable, before any file is written.
    `--init_from` goes through `load_elmo`, as in every command: a folder, a Hub id or a preset."""
    if args.softmax_weight_file and not os.path.isfile(args.softmax_weight_file):
        raise InputError(f"--softmax_weight_file {args.softmax_weight_file}: no such file")
    if args.vocab_file and not os.path.isfile(args.vocab_file):
        raise InputError(f"--vocab_file {args.vocab_file}: no such file")
    if args.config_file:
        if not os.path.isfile(args.config_file):
            raise InputError(f"--config_file {args.config_file}: no such file")
        read_config_file(args.config_file)
    elif args.preset:
        ElmoConfig.from_preset(args.preset)
    if not args.init_from:
        return None
    model, tokenizer = load_elmo(args.init_from, trust_remote_code=args.trust_remote_code)  # the feature model
    config = model.config
    if getattr(config, "word_input_vocab_size", 0):
        raise InputError(
            f"--init_from {args.init_from}: the model reads words through its own input dictionary "
            f"({config.word_input_vocab_size - 1} words), which pretraining cannot extend to a new corpus; continue a "
            "model that reads characters only")
    word_split = split_name(tokenizer.word_split)
    if args.word_split is None:  # the model goes on reading text the way its tokenizer splits it
        try:
            check_word_split(word_split, option=f"the word split of {args.init_from} (--word_split to choose one)")
        except WordSplitError as error:
            raise InputError(str(error)) from error
    return StartModel(config, tokenizer, word_split)


def read_config_file(path: str, **overrides) -> ElmoConfig:
    """The configuration in --config_file, with `overrides`, checked: a file that cannot be read, is not JSON or
    holds a configuration `ElmoConfig.validate` refuses is an `InputError` naming it."""
    with reading(path, "--config_file"):
        try:
            config = ElmoConfig.from_json_file(path)
            for key, value in overrides.items():
                setattr(config, key, value)
            config.validate()
        except ValueError as error:  # json's JSONDecodeError, the configuration's own checks
            raise InputError(f"--config_file {path}: {str(error).strip().splitlines()[0]}") from error
    return config


# --------------------------------------------------------------------------------------------------
# Set-up
# --------------------------------------------------------------------------------------------------


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
    valid_perplexity: float | None = None  # the last --eval_steps evaluation's, shown on the progress bar
    # SIGINT/SIGTERM: the step boundary stops every process
    guard: InterruptGuard = field(default_factory=InterruptGuard)
    saved_step: int = -1  # the step of the last checkpoint written or resumed from
    start_step: int = 0  # the step this process started (or resumed) at
    clock: TrainClock = field(default_factory=TrainClock)  # --max_train_time, and the time spent against it
    finished: bool = False  # the model folder is written

    @property
    def output_dir(self) -> Path:
        return Path(self.args.output_dir)


def set_up(args: PretrainArguments, accelerator, train_files: list[str], valid_files: list[str] | None,
           guard: InterruptGuard, start: StartModel | None) -> Run:
    """The output folder, tokenizer, model, optimizer and schedule, resumed from a checkpoint when asked."""
    rank, world = accelerator.process_index, accelerator.num_processes
    layout = BatchLayout(args.batch_mode, args.per_device_batch_size, args.unroll_steps)
    split = word_splitter(args.word_split)
    words = vocabulary_words(args, train_files, accelerator, start)  # before the folder: an empty corpus writes nothing
    output_dir = Path(args.output_dir)
    if accelerator.is_main_process:
        with writing(output_dir, "--output_dir"):
            if args.overwrite_output_dir and args.resume_from_checkpoint is None and output_dir.exists():
                shutil.rmtree(output_dir)
            output_dir.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    logger.log(logging.INFO if world > 1 else logging.DEBUG, "distributed: %s, %d process(es), device %s",
               accelerator.distributed_type, world, accelerator.device)
    set_seed(args.seed)

    tokenizer = make_tokenizer(args, words, accelerator, start)
    model = make_model(args, tokenizer, start)
    optimizer = make_optimizer(args, model, accelerator.device.type)
    if args.max_steps > 0:
        total_steps = args.max_steps
    else:  # an estimate from the file order; the run stops at the end of the last epoch in any case
        count = count_batches(train_files, layout, split, rank=rank, world_size=world, encoding=args.encoding)
        per_epoch = accelerator.gather(torch.tensor([count], device=accelerator.device))
        total_steps = math.ceil(args.num_train_epochs * int(per_epoch.min()))
    clock = TrainClock(parse_duration(args.max_train_time) if args.max_train_time else None)
    scheduler = make_scheduler(args.lr_scheduler_type, optimizer, args.warmup_steps, total_steps,
                               time_share=clock.share if clock.budget else None)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    run = Run(args, accelerator, tokenizer, BatchEncoder(tokenizer), model, optimizer, scheduler, layout, split,
              train_files, valid_files, total_steps, Progress(), guard=guard, clock=clock)
    if args.resume_from_checkpoint:
        resume(run, find_checkpoint(output_dir, args.resume_from_checkpoint))
    run.start_step = run.progress.step
    clock.agreed = run.progress.train_seconds

    with contextlib.suppress(Exception):
        accelerator.init_trackers("elmo-pretrain", config={k: str(v) for k, v in asdict(args).items()})
    if accelerator.is_main_process and not args.disable_tqdm:
        run.progress_bar = tqdm(total=total_steps, initial=run.progress.step, desc="pretraining", unit="step",
                                dynamic_ncols=True)
    run.started = time.perf_counter() - run.progress.train_seconds
    run.window_start = time.perf_counter()
    model.train()
    return run


def make_accelerator(args: PretrainArguments):
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
    # NCCL refuses two processes on one GPU: where this node runs more processes than it has GPUs (Accelerate then
    # puts several on one), they talk through gloo, which reduces CUDA tensors too (tests/test_cuda.py).
    shared_gpus = not cpu and int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > torch.cuda.device_count()
    if shared_gpus:  # Accelerate takes LOCAL_RANK for the index of a process's GPU (its device, DDP's, its barriers)
        os.environ["LOCAL_RANK"] = str(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    handlers = [
        DistributedDataParallelKwargs(find_unused_parameters=args.softmax == "adaptive"),
        # A process that waits for a dead or stuck peer fails after this long instead of hanging.
        InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=args.ddp_timeout),
                               **({"backend": "gloo"} if shared_gpus else {})),
    ]
    return Accelerator(
        cpu=cpu,
        mixed_precision=args.mixed_precision,
        # The schedule counts optimizer steps (total_steps, --warmup_steps): one scheduler step each. Accelerate's
        # default steps it once per process, which with two processes ended a linear schedule half-way through.
        step_scheduler_with_optimizer=False,
        log_with=log_with,
        project_config=ProjectConfiguration(project_dir=args.output_dir,
                                            logging_dir=os.path.join(args.output_dir, "logs")),
        kwargs_handlers=handlers,
    )


def vocabulary_words(args: PretrainArguments, train_files: list[str], accelerator,
                     start: StartModel | None) -> list[str] | None:
    """The words of the vocabulary when it is not a file (main process only, in memory): the --init_from model's, or
    one built from the corpus. None with --vocab_file or a resumed run's own (`resumed_vocab`), and on the other
    processes."""
    if args.vocab_file is not None or resumed_vocab(args) is not None or not accelerator.is_main_process:
        return None
    if start is not None and start.tokenizer.word_vocab:
        return start.tokenizer.word_vocab
    texts = (example["text"] for example in read_sentences(train_files, encoding=args.encoding))
    words = build_vocab(texts, max_size=args.max_vocab_size, min_count=args.min_count, split=args.word_split)
    if len(words) <= 3:
        raise InputError(f"the training corpus {train_files} holds no words")
    warn_if_unsegmented(words, args.word_split)
    return words


def resumed_vocab(args: PretrainArguments) -> Path | None:
    """A resumed run's own vocab.txt, read as it is rather than built again: the softmax's rows are its words,
    whatever the corpus holds now (a corpus grown since would shift the word ids under the restored softmax)."""
    path = Path(args.output_dir) / "vocab.txt"
    return path if args.resume_from_checkpoint and path.is_file() else None


def make_tokenizer(args: PretrainArguments, words: list[str] | None, accelerator,
                   start: StartModel | None) -> ElmoTokenizer:
    """The tokenizer with its word vocabulary: --vocab_file, a resumed run's own, or the words of
    `vocabulary_words`, which the main process writes into the output folder for every process to read. A model
    continued with --init_from keeps its own character rows (an ELMoForManyLangs model its dictionaries) and
    `max_characters_per_token`."""
    resumed = resumed_vocab(args) if args.vocab_file is None else None
    vocab_path = args.vocab_file or resumed
    if vocab_path is None:
        vocab_path = os.path.join(args.output_dir, "vocab.txt")
        with accelerator.main_process_first():
            if accelerator.is_main_process:
                with writing(vocab_path):
                    write_vocab(words, vocab_path)
                source = f"of --init_from {args.init_from}" if start is not None and start.tokenizer.word_vocab else \
                    "built from the corpus"
                logger.info("a vocabulary of %d words %s: %s", len(words), source, vocab_path)
    kept = {}
    if start is not None:
        kept = {"max_characters_per_token": start.tokenizer.max_characters_per_token}
        if isinstance(start.tokenizer, ElmoManyLangsTokenizer):
            kept.update(char_dictionary=start.tokenizer.char_dictionary,
                        word_dictionary=start.tokenizer.word_dictionary)
    tokenizer_class = ElmoTokenizer if start is None else type(start.tokenizer)
    if args.vocab_file is None:  # written just now from words checked, or by the run resumed
        tokenizer = tokenizer_class(vocab_file=str(vocab_path), word_split=args.word_split, **kept)
        if resumed is not None and accelerator.is_main_process:
            logger.info("a vocabulary of %d words of the run resumed: %s", tokenizer.word_vocab_size, vocab_path)
        return tokenizer
    with reading(vocab_path, "--vocab_file"):
        try:
            return tokenizer_class(vocab_file=vocab_path, word_split=args.word_split, **kept)
        except ValueError as error:  # not UTF-8, or without the lines <S>, </S> and <UNK>
            raise InputError(f"--vocab_file: {str(error).strip().splitlines()[0]}") from error


def make_model(args: PretrainArguments, tokenizer: ElmoTokenizer, start: StartModel | None) -> ElmoForPreTraining:
    softmax = args.softmax
    if softmax == "sampled" and args.num_sampled >= tokenizer.word_vocab_size:
        # The sampled softmax trains as the full one when it cannot leave a word out (softmax_elmo.py): the saved
        # config says what was trained, not what was asked (the run's args.json keeps that).
        softmax = "full"
    overrides = {"vocab_size": tokenizer.word_vocab_size, "softmax_type": softmax, "num_sampled": args.num_sampled}
    if args.dropout is not None:
        overrides["dropout"] = args.dropout
    if start is not None:
        saved = start.config
        # The saved softmax is kept only when it predicts the same vocabulary in the same form.
        keep_softmax = (
            _has_softmax(args.init_from)
            and saved.vocab_size == tokenizer.word_vocab_size
            and (saved.softmax_type == "adaptive") == (args.softmax == "adaptive")
        )
        with _quiet_load_report():
            model, _ = load_elmo(args.init_from, task="pre-training", config_overrides=overrides,
                                 ignore_mismatched_sizes=not keep_softmax, trust_remote_code=args.trust_remote_code)
        model.train()
        if args.softmax_weight_file:
            _load_hdf5_softmax(model, args.softmax_weight_file)
        elif not keep_softmax and args.softmax != "adaptive":
            # Published weights hold no softmax: start it from the model's own layer-0 vectors of the words.
            words = tokenizer.word_vocab
            char_ids = torch.tensor(BatchEncoder(tokenizer).char_ids(words))
            model.initialize_softmax_from_token_embeddings(char_ids)
            logger.info("%s has no softmax for this vocabulary: initialised one from the layer-0 vectors of the %d "
                        "vocabulary words", args.init_from, len(words))
        elif not keep_softmax:
            logger.info("%s has no softmax for this vocabulary: the adaptive softmax starts from random weights",
                        args.init_from)
        return model
    if args.config_file:
        config = read_config_file(args.config_file, **overrides)
    else:
        config = ElmoConfig.from_preset(args.preset, **overrides)
    return ElmoForPreTraining(config)


@contextlib.contextmanager
def _quiet_load_report():
    """transformers reports the weights a checkpoint lacks (here the softmax, which is then made) as a WARNING table;
    `make_model` says it in one line instead."""
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)


def _load_hdf5_softmax(model: ElmoForPreTraining, path: str) -> None:
    with reading(path, "--softmax_weight_file"):  # not HDF5, or cut short
        found = read_hdf5_softmax(path)
    if found is None:
        raise InputError(f"--softmax_weight_file {path} holds no softmax/W and softmax/b datasets")
    weight, bias = found
    expected = tuple(model.softmax.weight.shape)
    if tuple(weight.shape) != expected:
        raise InputError(
            f"softmax/W in {path} has shape {tuple(weight.shape)}, but the vocabulary and the model need {expected}"
        )
    with torch.no_grad():
        model.softmax.weight.copy_(weight)
        model.softmax.bias.copy_(bias)
    logger.info("loaded the softmax from %s", path)


def _has_softmax(name: str) -> bool:
    """Whether the saved weights of `name` (a folder, or a Hub id that `load_elmo` has fetched) hold a softmax."""
    if name in PRESETS and not os.path.exists(name):
        return False  # random weights, drawn with the model
    path = cached_file(name, "model.safetensors", _raise_exceptions_for_missing_entries=False)
    if path is None:
        return False
    with safe_open(path, "pt") as handle:
        return any(key.startswith("softmax.") for key in handle.keys())


def make_optimizer(args: PretrainArguments, model, device_type: str = "cpu"):
    # Training on the CPU uses torch's fused kernels (one pass over each parameter instead of a dozen tensor ops):
    # at the `small` preset a step of AdamW 45 -> 5.5 ms, of Adagrad 17 -> 4.7 ms (benchmarks/results_pretrain.md).
    # Fused Adagrad exists only for the CPU, so other devices keep torch's default.
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
                                stats=run.stats, skip=progress.batches_in_epoch, encoding=args.encoding)
        if not run_epoch(run, batches):
            return  # total_steps reached
        if progress.batches_in_epoch == 0:
            raise InputError(
                f"the training corpus gives no full batch of {args.per_device_batch_size} x {args.unroll_steps} "
                f"tokens per process; use a larger corpus or a smaller --per_device_batch_size / --unroll_steps"
            )
        if args.max_steps <= 0 and progress.epoch + 1 >= math.ceil(args.num_train_epochs):
            return
        progress.epoch += 1
        progress.batches_in_epoch = 0
        run.lstm_state = None  # a new pass over the corpus starts from a zero state


def run_epoch(run: Run, batches) -> bool:
    """Train on `batches`: True when they ran out (on any process), False when `total_steps` was reached or
    --max_train_time spent."""
    accelerator, args, progress = run.accelerator, run.args, run.progress
    while progress.step < run.total_steps:
        if time_spent(run):
            return False
        batch = next(batches, None)
        # Every process must take the same steps: the epoch ends for all when one shard runs out, and a signal to
        # any process stops all of them here, between two steps.
        have, signum = agreed_stop(accelerator, run.guard, batch is not None)
        if signum:
            stop(run, signum)
        if have < accelerator.num_processes:
            return True
        out = training_step(run, batch)
        if progress.step % args.logging_steps == 0 or progress.step == run.total_steps:
            log_step(run, out)
        if run.progress_bar is not None:
            run.progress_bar.update(1)
        if run.valid_files and args.eval_steps and progress.step % args.eval_steps == 0:
            results = evaluate(run)
            if results is not None:  # None: cut short by a signal, which the next step boundary answers
                accelerator.log({f"eval/{k}": v for k, v in results.items()}, step=progress.step)
                logger.info("step %d: %s", progress.step, _format(results))
                run.valid_perplexity = results["average_perplexity"]
        if args.save_steps and progress.step % args.save_steps == 0:
            progress.train_seconds = time.perf_counter() - run.started
            save_checkpoint(run)
    return False


def time_spent(run: Run) -> bool:
    """--max_train_time: whether the run's training time (the resumed checkpoint's included) is spent. The processes
    agree on the time (one collective: the longest of theirs), so that all of them stop at the same step boundary
    and the schedule gives all of them the same rate."""
    if run.clock.budget is None:
        return False
    seconds = time.perf_counter() - run.started
    if run.accelerator.num_processes > 1:
        seconds = run.accelerator.gather(torch.tensor([seconds], device=run.accelerator.device)).max().item()
    run.clock.agreed = seconds
    spent = seconds >= run.clock.budget
    if spent:
        logger.info("--max_train_time %s is spent at step %d: saving, evaluating and writing the model folder",
                    format_duration(run.clock.budget), run.progress.step)
    return spent


def stop(run: Run, signum: int) -> None:
    """Every process, at the same step boundary: a checkpoint of the step reached (unless there is one, or no step
    was taken since the start), then `Interrupted`."""
    if run.progress.step not in (run.saved_step, run.start_step):
        run.progress.train_seconds = time.perf_counter() - run.started
        save_checkpoint(run)
    if run.progress_bar is not None:
        run.progress_bar.close()
    raise Interrupted(signum)


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
    the progress bar.

    No perplexity: the training loss is not one. The sampled softmax's (the default recipe's) estimates the loss from
    a few negatives and reads far below the model's perplexity (the demo's model on PTB at step 1,000: exp(loss) 97,
    the validation 270), and either softmax trains on the free boundary targets the evaluation leaves out. A training
    "perplexity" beside the validation's would suggest overfitting that is not there. The bar shows the evaluation's."""
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
        "tokens_per_second": run.window_tokens / max(elapsed, 1e-9),
        "learning_rate": run.scheduler.get_last_lr()[0],
    }
    run.window_tokens, run.window_start = 0, time.perf_counter()
    accelerator.log({f"train/{k}": v for k, v in record.items() if k != "step"}, step=progress.step)
    if accelerator.is_main_process:
        with writing(run.output_dir / "train_log.jsonl"), open(run.output_dir / "train_log.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
        if run.progress_bar is not None:
            show_progress(run, loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_second']:.0f}")


def show_progress(run: Run, **values: str) -> None:
    """The progress bar's figures: the last log line's, and the last evaluation's perplexity once there is one."""
    if run.valid_perplexity is not None:
        values["valid_ppl"] = f"{run.valid_perplexity:.1f}"
    run.progress_bar.set_postfix(values)


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
        if eval_results is None:  # a signal cut it short: keep the last step as a checkpoint and stop
            stop(run, agreed_stop(accelerator, run.guard)[1])
        accelerator.log({f"eval/{k}": v for k, v in eval_results.items()}, step=progress.step)
    if run.saved_step != progress.step:
        save_checkpoint(run)
    summary = {
        "steps": progress.step,
        "epochs_started": progress.epoch + (1 if progress.batches_in_epoch else 0),
        "tokens_seen": progress.tokens_seen,
        "train_seconds": round(progress.train_seconds, 2),
        "tokens_per_second": round(progress.tokens_seen / max(progress.train_seconds, 1e-9), 1),
        "processes": accelerator.num_processes,
        "parameters_identical_across_processes": replicas_identical(run),
        "truncated_sentences": run.stats.truncated,
    }
    if accelerator.is_main_process:
        write_model_folder(run, summary, eval_results)
        if args.push_to_hub:
            _push(run.output_dir, args)
    accelerator.wait_for_everyone()
    run.finished = True
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
    with writing(output_dir, "--output_dir"):
        unwrapped.save_pretrained(output_dir, save_function=run.accelerator.save)
        save_with_fast_twin(run.tokenizer, output_dir)  # transformers' example scripts ask for a fast tokenizer
        (output_dir / "train_results.json").write_text(json.dumps(summary, indent=2))
        if eval_results:
            (output_dir / "eval_results.json").write_text(json.dumps(eval_results, indent=2))
    _write_card(output_dir, unwrapped, run.args, summary, eval_results)
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
    # push_folder leaves the run's checkpoints/ (optimizer, RNG states) and logs out: model, tokenizer, card, code.
    info = push_folder(output_dir, args.hub_model_id, private=args.hub_private_repo or None,
                       commit_message="Upload ELMo trained with elmo-pretrain")
    logger.info("pushed %s to %s (commit %s)", output_dir, args.hub_model_id, info.oid)


def run(args: PretrainArguments, guard: InterruptGuard | None = None) -> None:
    """`elmo-pretrain`: `train`, holding its output folder's lock (a second run of the folder is refused), with a
    failed push said as what it is (the model folder is written)."""
    try:
        with run_lock(Path(args.output_dir), "elmo-pretrain"):
            train(args, guard)
    except HubPushError as error:  # the model folder is written: a run that failed, not bad input
        raise RunFailed(f"the model folder is in {args.output_dir}, but the push failed: {error}") from error
