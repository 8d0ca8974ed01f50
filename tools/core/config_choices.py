"""`ElmoConfig`'s choice fields and their values, for the commands' options: the model's own table
(`modeling_elmo/config_choices_elmo.py`, which the configuration checks with), read without importing the model
package (its `__init__` imports torch and transformers). The file is found through the package's import spec, which
locates a package without running it, and run alone: it imports nothing.

    from elmo_hf.tools.core.config_choices import CHOICES
    field(default=None, metadata={"help": ..., "choices": CHOICES["scalar_mix"]})

So a command refuses `--scalar_mix top5` when it parses its command line, listing the values the configuration
takes, before torch is imported. Standard library only.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

TABLE_FILE = "config_choices_elmo.py"


def _model_table():
    spec = importlib.util.find_spec("elmo_hf.modeling_elmo")  # where the package is; nothing of it runs
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    path = next((Path(folder) / TABLE_FILE for folder in folders if (Path(folder) / TABLE_FILE).is_file()), None)
    if path is None:
        raise ImportError(f"{TABLE_FILE} of elmo_hf.modeling_elmo not found (looked in {folders})")
    table_spec = importlib.util.spec_from_file_location("_elmo_config_choices", path)
    module = importlib.util.module_from_spec(table_spec)
    table_spec.loader.exec_module(module)
    return module


_TABLE = _model_table()
CHOICES: Mapping[str, tuple[str, ...]] = MappingProxyType(dict(_TABLE.CHOICES))


def choices_text(name: str) -> str:
    """The values of the choice field `name`, as a help text lists them: "mean, max, lstm or attention"."""
    values = CHOICES[name]
    return f"{', '.join(values[:-1])} or {values[-1]}" if len(values) > 1 else values[0]
