"""Load allennlp 2.10.1's own `Elmo` on today's stack, as the anchor of speed and parity comparisons.

allennlp 2.10.1 pins torch < 1.13 and pulls spaCy, so it is installed without its dependencies
(`make anchors`, or `pip install --no-deps allennlp==2.10.1`). Importing `allennlp.modules.elmo` the normal way
then fails on spaCy and on allennlp's package `__init__` files, which import the whole library. This module runs
only the files `Elmo` needs (elmo.py, elmo_lstm.py, lstm_cell_with_projection.py, encoder_base.py, highway.py,
scalar_mix.py, nn/util.py, common/checks.py, the ELMo character indexer), unchanged, and stands in for the
rest (registries, file caching, the data pipeline of `batch_to_ids`) with inert stubs. What runs is allennlp's
arithmetic; what is stubbed does no arithmetic. Tests and benchmarks call `load_allennlp_elmo`, which returns
None when allennlp is not installed so that they can skip with a clear message, and `allennlp_char_ids`, which
turns this project's tokenizer output into the input allennlp's `Elmo` takes.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
import types
from pathlib import Path

# The real files, imported by dotted name from the installed package (their own imports are the reason for
# the stubs below).
_REAL_MODULES = (
    "allennlp.common.checks",
    "allennlp.nn.util",
    "allennlp.modules.encoder_base",
    "allennlp.modules.highway",
    "allennlp.modules.scalar_mix",
    "allennlp.modules.lstm_cell_with_projection",
    "allennlp.modules.elmo_lstm",
    "allennlp.data.token_indexers.elmo_indexer",
    "allennlp.modules.elmo",
)
# Packages whose __init__.py would import the whole library: registered as bare namespaces instead.
_PACKAGES = ("allennlp", "allennlp.common", "allennlp.data", "allennlp.data.token_indexers",
             "allennlp.modules", "allennlp.nn")


class _Inert:
    """A stand-in for allennlp's registrable bases and data classes: can be subclassed, registered, called."""

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def register(cls, *args, **kwargs):
        return lambda registered: registered


def _any_other_name(attribute: str):
    """A stub module's answer to any other name a real file imports from it (tools asking for dunders get none)."""
    if attribute.startswith("__"):
        raise AttributeError(attribute)
    return _Inert


def _stub(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__getattr__ = _any_other_name
    sys.modules[name] = module
    return module


def _lazy_groups_of(iterable, group_size):
    iterator = iter(iterable)
    while group := list(itertools.islice(iterator, group_size)):
        yield group


def _install_shims(root: Path) -> None:
    for name in _PACKAGES:
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = package
    _stub("allennlp.common", FromParams=_Inert, Registrable=_Inert)
    sys.modules["allennlp.common"].__path__ = [str(root / "common")]
    _stub("allennlp.common.file_utils", cached_path=lambda path, *args, **kwargs: str(path))
    import torch.distributed as dist

    def is_distributed() -> bool:
        return dist.is_available() and dist.is_initialized()

    _stub("allennlp.common.util", lazy_groups_of=_lazy_groups_of, is_distributed=is_distributed,
          is_global_primary=lambda: not is_distributed() or dist.get_rank() == 0,
          int_to_device=lambda device: device)
    # Initialises weights that the hdf5 file then overwrites: skipped.
    _stub("allennlp.nn.initializers", block_orthogonal=lambda tensor, split_sizes, gain=1.0: None)
    for name in ("allennlp.data.instance", "allennlp.data.tokenizers", "allennlp.data.tokenizers.token_class",
                 "allennlp.data.vocabulary", "allennlp.data.batch", "allennlp.data.fields",
                 "allennlp.data.token_indexers.token_indexer"):
        _stub(name)


def load_allennlp_elmo():
    """allennlp's `allennlp.modules.elmo` module, or None when allennlp is not installed."""
    if "allennlp.modules.elmo" in sys.modules:
        return sys.modules["allennlp.modules.elmo"]
    spec = importlib.util.find_spec("allennlp")
    if spec is None or not spec.submodule_search_locations:
        return None
    _install_shims(Path(next(iter(spec.submodule_search_locations))))
    for name in _REAL_MODULES:
        importlib.import_module(name)
    return sys.modules["allennlp.modules.elmo"]


def allennlp_char_ids(input_ids, attention_mask):
    """`ElmoTokenizer`'s character ids (B, T, 50), with `<S>`/`</S>`, as allennlp's `Elmo` takes them: without the
    sentence boundaries, which it adds itself (B, T - 2, 50). The ids themselves are the same (1-based, 0 = padding)."""
    import torch

    lengths = attention_mask.sum(1) - 2
    out = torch.zeros(input_ids.shape[0], input_ids.shape[1] - 2, input_ids.shape[2], dtype=input_ids.dtype)
    for row, n in enumerate(lengths.tolist()):
        out[row, :n] = input_ids[row, 1 : n + 1]
    return out
