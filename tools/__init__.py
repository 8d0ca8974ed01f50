"""The tools around the ELMo model, for the people who use it: the one loader of every command
(`elmo_hf.tools.loading.load_elmo`), the runs of the console commands `elmo-embed`, `elmo-analyze`, `elmo-convert`,
`elmo-export` and `elmo-app` (their options in `core.command_options`; the commands themselves are rows of
`elmo_hf.cli`), the converters of the original weights (`convert`,
`convert_allennlp_elmo`, `convert_elmoformanylangs`, sharing `convert_common`: `conversion/`), the downloads of the
published models (`conversion.download`, `core.published_models`), bulk embedding and sentence vectors
(`embedding/`), the ONNX export and its runtimes (`export/`), the contextuality measures (`analysis`), the model card
and the Hub push (`hub/`) and the demo page (`app/`).

`core/` is the runtime core the command layer imports before torch: errors, interrupts, options and their parsing,
text files, output paths, the early checks and the table of backends (`core.backend_registry`), on the standard
library alone; the features beside it import it, never the reverse (tests/test_layout.py).

None of it travels to the Hub as remote code: it sits beside `modeling_elmo/` (the model, which travels) and imports
it, never the other way round. This file imports nothing, so that a command's options are parsed before torch loads.
Each module imports what it needs at its top, but for the optional dependencies, imported in the functions that use
them so that everything else works without them: h5py, pyarrow and datasets (the `train` and `convert` extras),
matplotlib and gradio (`app`), sentence-transformers.
"""
