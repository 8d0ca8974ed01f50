"""The options of `elmo-demo`, with the standard library only: `--help` and a bad option answer
before torch is imported."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DemoArguments:
    output_dir: str | None = field(default=None, metadata={
        "help": "Where the corpus, model and plot go (default outputs/demo, outputs/demo_zh for --language zh)."})
    language: str = field(default="en", metadata={
        "help": "Language of the generated corpus: en (bank, bat, plant, spring) "
                "or zh (行, 长, 花, 打, 还, 好, 觉, 乐).",
        "choices": ["en", "zh"]})
    train_file: list[str] | None = field(default=None, metadata={"help": "Your corpus instead of the generated one."})
    validation_file: list[str] | None = field(default=None, metadata={
        "help": "Held-out text for the validation perplexity and the contextuality analysis (with --train_file)."})
    max_steps: int = field(default=500, metadata={"help": "Pretraining steps."})
    per_device_batch_size: int = field(default=32, metadata={"help": "Windows of text per step."})
    unroll_steps: int = field(default=20, metadata={"help": "Tokens per window (the LSTM's unrolled length)."})
    num_sentences: int = field(default=20000, metadata={"help": "Size of the generated corpus."})
    probes_per_sense: int = field(default=40, metadata={
        "help": "Held-out sentences per sense of each ambiguous word, for the sense scores."})
    analysis_lines: int = field(default=2000, metadata={"help": "Held-out lines for the contextuality analysis."})
    seed: int = field(default=0, metadata={"help": "Seed of the generated corpus, the weights and the data order."})
    disable_tqdm: bool = field(default=False, metadata={"help": "No progress bars."})
    resume_from_checkpoint: str | None = field(default=None, metadata={
        "help": "latest (or a checkpoint folder of OUTPUT_DIR/model): go on with an interrupted demo, pretraining "
                "from its checkpoint, or only scoring when its model was trained."})
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Train anew where OUTPUT_DIR/model holds a model trained with other settings (it is otherwise "
                "kept, and the demo refuses to start); a model of these settings is only scored again."})

    def __post_init__(self):
        for name, least in (("max_steps", 1), ("per_device_batch_size", 1), ("unroll_steps", 3),
                            ("num_sentences", 1), ("probes_per_sense", 2), ("analysis_lines", 1)):
            if getattr(self, name) < least:
                raise ValueError(f"--{name} must be at least {least}, got {getattr(self, name)}")
