"""The runtime core: what the command layer imports before torch and transformers (errors, interrupts, options and
their parsing, text files, output paths and folders, the checks every command makes before loading a model).

The standard library only (charset-normalizer for the encoding guess, filelock for the run lock), and nothing of the
rest of `elmo_hf.tools`: the features (embedding, backends, export, conversion, the app) import the core, never the
other way round (tests/test_layout.py). This file imports nothing.
"""
