"""The arguments of `elmo-pretrain`, one dataclass field per option.

Nothing heavy is imported here: `elmo-pretrain --help` builds its parser from this dataclass (`tools/core/arguments.py`)
before torch or transformers is loaded. A field's own check (the encoding, the time budget, the choices) is in its
metadata (`elmo_hf.tools.core.arguments`); the checks that need the project (presets, word splits) are the run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elmo_hf.tools.core.arguments import check_fields
from elmo_hf.tools.core.command_options import encoding_option
from elmo_hf.tools.core.config_choices import CHOICES, choices_text

from .time_budget import max_train_time_option

# The defaults each recipe gives the options it names (an option given explicitly wins). "default": AdamW at 3e-3
# with the sampled softmax of 1,024 negatives (the full one for vocabularies of up to 1,024 words), the best measured
# for the corpus sizes a CPU or one GPU trains on (benchmarks/results_quality.md, Penn Treebank: AdamW 2.3 times
# lower perplexity than Adagrad at 0.2 in equal minutes, runs P2 and P3; the sampled softmax ahead of the full one at
# every minute of 20 and 60, runs S2 and S3). "bilm-tf": the original training's (bilm-tf's train_elmo.py: Adagrad
# 0.2, 8192 sampled negatives, 128 windows of 20 tokens a GPU), made for a billion words over days.
RECIPES = {
    "default": {"optimizer": "adamw", "learning_rate": 3e-3, "softmax": "sampled", "num_sampled": 1024,
                "per_device_batch_size": 32},
    "bilm-tf": {"optimizer": "adagrad", "learning_rate": 0.2, "softmax": "sampled", "num_sampled": 8192,
                "per_device_batch_size": 128},
}
LEARNING_RATES = {"adamw": 3e-3, "adagrad": 0.2}  # an optimizer chosen apart from its recipe starts here


@dataclass(frozen=True)
class PretrainArguments:
    """Arguments of `elmo-pretrain` (also readable from a JSON file given as the only argument)."""

    train_file: list[str] = field(metadata={"help": "Text files or globs, one sentence per line."})
    output_dir: str = field(metadata={"help": "Where the model folder, logs and checkpoints go."})
    validation_file: list[str] | None = field(default=None, metadata={"help": "Held-out text for perplexity."})
    preset: str | None = field(default=None,
                               metadata={"help": "tiny, small, medium or original (ElmoConfig.from_preset)."})
    config_file: str | None = field(default=None,
                                    metadata={"help": "A config.json for ElmoConfig, instead of --preset."})
    init_from: str | None = field(
        default=None, metadata={"help": "A model to continue training: a folder (converted, pretrained or fine-tuned), "
                                        "a Hub id, or a preset (random weights), as every command loads models."}
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "Let an --init_from Hub model run its own code."})
    softmax_weight_file: str | None = field(
        default=None,
        metadata={"help": "An hdf5 file with softmax/W (V, P) and softmax/b (V,) for --init_from, in the order of the "
                          "vocabulary; without it a new softmax starts from the model's layer-0 vectors of the words."},
    )
    vocab_file: str | None = field(
        default=None,
        metadata={
            "help": "Word vocabulary, one token a line (<S>, </S>, <UNK> on any line; ids follow the file); built if "
                    "absent."}
    )
    max_vocab_size: int = field(default=50000, metadata={"help": "Size of a vocabulary built from the corpus."})
    min_count: int = field(default=1, metadata={"help": "Minimum count of a word in a built vocabulary."})
    word_split: str | None = field(default=None, metadata={
        "help": "How lines are split into words, a name in tokenization.WORD_SPLITTERS: whitespace, punctuation, or "
                "jieba "
                "(punctuation, with runs of Chinese ideographs segmented into words by jieba; needs pip install "
                "'elmo-hf[zh]'), one registered there, or module:function (a function of yours, imported). Saved "
                "with the tokenizer. Default: the split of the --init_from model's tokenizer, else punctuation (a "
                "token per "
                "CJK character) when most of the corpus is Chinese or Japanese without spaces, else whitespace."})
    encoding: str = encoding_option("the training and validation files")
    recipe: str = field(default="default", metadata={
        "help": "The defaults of --optimizer, --learning_rate, --softmax, --num_sampled and --per_device_batch_size: "
                "default (AdamW at 3e-3, the sampled softmax of 1024 negatives, 32 rows: the best measured on a CPU or "
                "one GPU, docs/pretraining.md) or bilm-tf (the original's: Adagrad at 0.2, the sampled softmax of 8192 "
                "negatives, 128 rows a process). An option given explicitly wins over its recipe.",
        "choices": tuple(RECIPES)})
    softmax: str | None = field(default=None, metadata={
        "help": f"{choices_text('softmax_type')} (default: the recipe's).", "choices": CHOICES["softmax_type"]})
    num_sampled: int | None = field(default=None, metadata={
        "help": "Negatives per batch for the sampled softmax (default: the recipe's, 1024 or bilm-tf's 8192; a "
                "vocabulary of no more words is trained with the full softmax)."})
    batch_mode: str = field(default="stream", metadata={"help": "stream (bilm-tf windows, state carried) or sentence.",
                                                         "choices": ("stream", "sentence")})
    unroll_steps: int = field(default=20,
                              metadata={"help": "Window length in tokens (the longest sentence in sentence mode)."})
    per_device_batch_size: int | None = field(default=None, metadata={
        "help": "Rows per batch and process (default: the recipe's)."})
    max_steps: int = field(default=-1, metadata={"help": "Optimizer steps; overrides num_train_epochs when > 0."})
    num_train_epochs: float = field(default=1.0, metadata={"help": "Passes over the corpus when max_steps <= 0."})
    max_train_time: str | None = max_train_time_option(
        "then save, evaluate and write the model folder as at the end. Counted over the whole run like --max_steps (a "
        "resumed run goes on with the time its checkpoint had spent); whichever of --max_train_time, --max_steps and "
        "--num_train_epochs comes first ends the run.")
    optimizer: str | None = field(default=None, metadata={
        "help": "adamw or adagrad (initial accumulator 1.0); default: the recipe's.", "choices": ("adagrad", "adamw")})
    learning_rate: float | None = field(default=None, metadata={
        "help": "Default: the recipe's with its optimizer, else 3e-3 for adamw and 0.2 for adagrad."})
    weight_decay: float = field(default=0.0)
    lr_scheduler_type: str = field(default="constant", metadata={
        "help": "A transformers scheduler name. With --max_train_time it ends when the run does, whichever of the "
                "time and the steps ends it (train/lr_schedule.py)."})
    warmup_steps: int = field(default=0)
    max_grad_norm: float = field(default=10.0, metadata={"help": "Global-norm gradient clipping (bilm-tf: 10)."})
    dropout: float | None = field(default=None, metadata={"help": "Override the config's dropout (bilm-tf: 0.1)."})
    mixed_precision: str = field(default="no",
                                 metadata={"help": "no, bf16 or fp16.", "choices": ("no", "bf16", "fp16")})
    seed: int = field(default=42)
    shuffle_buffer: int = field(default=10000, metadata={"help": "Sentences shuffled together; 1 keeps file order."})
    logging_steps: int = field(default=10)
    eval_steps: int = field(default=0, metadata={"help": "Evaluate every N steps (0: only at the end)."})
    max_eval_batches: int = field(default=0, metadata={"help": "Cap on evaluation batches (0: the whole file)."})
    save_steps: int = field(default=0, metadata={"help": "Checkpoint every N steps (0: only at the end)."})
    save_total_limit: int = field(default=2, metadata={"help": "Checkpoints kept."})
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "A checkpoint folder, 'latest' for the newest in output_dir/checkpoints, or "
                                        "'auto': the newest if there is one, else a fresh start (for a launcher that "
                                        "restarts its workers, torchrun --max_restarts, or a requeued job)."}
    )
    report_to: str = field(default="auto",
                           metadata={"help": "Accelerate tracker: auto (tensorboard if installed), none, ..."})
    overwrite_output_dir: bool = field(default=False)
    push_to_hub: bool = field(default=False)
    hub_model_id: str | None = field(default=None)
    hub_private_repo: bool = field(default=False)
    use_cpu: bool = field(default=False, metadata={"help": "Train on CPU even when a GPU is there."})
    ddp_timeout: int = field(
        default=1800,
        metadata={
            "help": "Seconds a process waits for the others in a collective before the run fails (as Trainer's)."},
    )
    disable_tqdm: bool = field(default=False)
    verbose: bool = field(default=False, metadata={"help": "Also log what the libraries say (Accelerate, datasets, "
                                                            "transformers) and their progress bars."})

    def __post_init__(self):
        """What can be checked from the options alone (standard library): the command's `--help` and its usage
        errors answer before torch is imported. The preset's name and the word split are checked by the run
        (`pretrain_run.check_model_options`), which knows the presets and the registered splits."""
        check_fields(self)  # the fields' converters and choices (--encoding, --max_train_time, --softmax ...)
        self._apply_recipe()
        if self.preset and self.config_file:
            raise ValueError("give --preset or --config_file, not both")
        if self.init_from and (self.preset or self.config_file):
            raise ValueError("--init_from takes its architecture from the model folder; drop --preset/--config_file")
        if not (self.preset or self.config_file or self.init_from):
            object.__setattr__(self, "preset", "small")  # frozen: filled here, as a field's default, or never
        # no --word_split: the run chooses (train/pretrain_word_split.py, `chosen_word_split`): the --init_from
        # model's own, else punctuation for Chinese or Japanese written without spaces, else whitespace
        for name in ("unroll_steps", "per_device_batch_size", "logging_steps", "num_sampled"):
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

    def _apply_recipe(self) -> None:
        """Fill the options left unset from `--recipe`; a learning rate follows the optimizer actually used."""
        recipe = RECIPES[self.recipe]
        for name in ("optimizer", "softmax", "num_sampled", "per_device_batch_size"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, recipe[name])
        if self.learning_rate is None:
            same = self.optimizer == recipe["optimizer"]
            rate = recipe["learning_rate"] if same else LEARNING_RATES[self.optimizer]
            object.__setattr__(self, "learning_rate", rate)
