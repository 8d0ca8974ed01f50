"""Random weights in the original layout of a published ELMo (bilm-tf's dump, as AllenNLP serves it): an
`options.json` and a `weights.hdf5`, for any size of `ElmoConfig.PRESETS` or any options, written from
docs/weight_layout.md ("options.json", "hdf5 datasets"). The tests and benchmarks that need a file of that layout
(the converter, the downloads, the comparison with allennlp) use it; only the cases that compare with outputs of the
trained TensorFlow model need the fixtures kept beside the checkout.

    python tests/original_layout.py OUT_DIR [--size small] [--seed 0]   # OUT_DIR/options.json, OUT_DIR/weights.hdf5

The values are random but large enough to reach the clips (cell and projection) and to saturate some gates, with
non-zero biases, so that a comparison of two implementations compares real arithmetic, not zeros.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

# The size of the bilm-tf test fixture (2 layers, C 64, P 16, five filter widths, two highways): the size of the
# converter's tests of bad inputs, whose messages quote its shapes.
FIXTURE_SIZED = {
    "lstm": {"dim": 64, "projection_dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
             "use_skip_connections": True},
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], "n_highway": 2,
                 "activation": "relu", "n_characters": 262, "max_characters_per_token": 50},
}

STORED_CHAR_ROWS = 261  # the file's character table has no padding row (docs/weight_layout.md, "Character embedding")


def options_for(preset: str) -> dict:
    """The `options.json` of a preset of `ElmoConfig.PRESETS` (`tiny`, `small`, `medium`, `original`): the table of
    docs/weight_layout.md, "options.json", read from the config's side."""
    from elmo_hf.modeling_elmo import ElmoConfig

    config = ElmoConfig.from_preset(preset)
    return {
        "lstm": {"dim": config.cell_size, "projection_dim": config.projection_dim, "n_layers": config.num_layers,
                 "cell_clip": config.cell_clip or 0, "proj_clip": config.proj_clip or 0,
                 "use_skip_connections": config.use_skip_connections},
        "char_cnn": {"embedding": {"dim": config.char_embedding_dim},
                     "filters": [list(f) for f in config.char_cnn_filters],
                     "n_highway": config.num_highway_layers, "activation": config.char_cnn_activation,
                     "n_characters": config.char_vocab_size,
                     "max_characters_per_token": config.max_characters_per_token},
    }


def write_weights(path: Path, options: dict, seed: int = 0) -> None:
    """Every dataset of docs/weight_layout.md, "hdf5 datasets", in its stored shape ((in, out) matrices, TF conv
    kernels (1, width, d, count), LSTM kernels (2P, 4C) over `[x ; h]`), random."""
    import h5py

    rng = np.random.default_rng(seed)
    lstm, cnn = options["lstm"], options["char_cnn"]
    d, cell, proj = cnn["embedding"]["dim"], lstm["dim"], lstm["projection_dim"]
    width = sum(n for _, n in cnn["filters"])  # F

    def normal(*shape, std=1.0, mean=0.0):
        return (mean + std * rng.standard_normal(shape)).astype(np.float32)

    with h5py.File(path, "w") as h:
        h["char_embed"] = rng.uniform(-1, 1, (STORED_CHAR_ROWS, d)).astype(np.float32)
        for i, (w, n) in enumerate(cnn["filters"]):
            h[f"CNN/W_cnn_{i}"] = normal(1, w, d, n, std=0.4)
            h[f"CNN/b_cnn_{i}"] = normal(n, std=0.1)
        for k in range(cnn.get("n_highway") or 0):
            h[f"CNN_high_{k}/W_carry"] = normal(width, width, std=width**-0.5)
            h[f"CNN_high_{k}/b_carry"] = normal(width, std=0.5, mean=-1.0)
            h[f"CNN_high_{k}/W_transform"] = normal(width, width, std=width**-0.5)
            h[f"CNN_high_{k}/b_transform"] = normal(width, std=0.1)
        if width != proj:  # F == P: no projection group
            h["CNN_proj/W_proj"] = normal(width, proj, std=width**-0.5)
            h["CNN_proj/b_proj"] = normal(proj, std=0.1)
        for direction in range(2):
            for layer in range(lstm.get("n_layers", 1)):
                prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                h[f"{prefix}/W_0"] = normal(2 * proj, 4 * cell, std=1.5 * proj**-0.5)
                h[f"{prefix}/B"] = normal(4 * cell, std=0.5)
                if cell != proj:  # C == P: no projection inside the cell
                    h[f"{prefix}/W_P_0"] = normal(cell, proj, std=cell**-0.5)


def write_original_layout(folder: Path, options: dict | str, seed: int = 0) -> tuple[Path, Path]:
    """`folder/options.json` and `folder/weights.hdf5` for `options` (a dict, or a preset name); returns both paths."""
    options = options_for(options) if isinstance(options, str) else options
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    options_file, weight_file = folder / "options.json", folder / "weights.hdf5"
    options_file.write_text(json.dumps(options, indent=1), encoding="utf-8")
    write_weights(weight_file, options, seed)
    return options_file, weight_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="random ELMo weights in the original layout (options.json + hdf5)")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--size", default="small", help="a preset of ElmoConfig: tiny, small, medium, original")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere
    write_original_layout(args.out_dir, args.size, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
