"""transformers' own common model tests (`ModelTesterMixin`, `ConfigTester`) on every Elmo class of `AUTO_CLASSES`.

Every model inside transformers passes `tests/test_modeling_common.py` and `tests/test_configuration_common.py`: the
ecosystem's definition of "follows the PreTrainedModel API" (save/load, safetensors, loading info, determinism,
hidden states, training, embeddings accessors, ...). Both files ship in the source distribution of transformers on
the package index, not in its wheel: the first run fetches them for the installed version with pip into
`~/.cache/elmo-hf/` (`$XDG_CACHE_HOME` is honoured), later runs read them from there. Without the index the module
skips, saying so. The source distribution lacks three modules they import (the export and generation mixins, a
dict of config kwargs); empty ones stand in for them, which is what they are for a model that neither exports
through those paths nor generates. Where `parameterized` (a test dependency of transformers) is not installed, a
stand-in gives its one use here, `parameterized.expand`.

Skips come from the mixin's flags, set below to what ELMo is (no attention, no resizable token embedding), or from
overrides with a one-line reason, as transformers' own model test files do.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import subprocess
import sys
import tarfile
import tempfile
import types
import unittest
import unittest.mock
import warnings
from pathlib import Path

import pytest
import torch
import transformers
from conftest import random_char_ids

from modeling_elmo import AUTO_CLASSES, ElmoConfig
from modeling_elmo.configuration_elmo import PRESETS

COMMON_FILES = ("test_modeling_common.py", "test_configuration_common.py")
PACKAGE = "elmo_hf_transformers_tests"  # the name the fetched files are imported under (they import relatively)


def _cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "elmo-hf" / f"transformers-{transformers.__version__}-tests"


def _fetch(folder: Path) -> str | None:
    """Put the two common test files of the installed transformers in `folder`; None, or why they could not be."""
    if folder.is_dir():
        return None
    version = transformers.__version__
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
                   "--timeout", "15", "--retries", "0", "-d", download, f"transformers=={version}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        archives = list(Path(download).glob(f"transformers-{version}.tar.gz"))
        if done.returncode != 0 or not archives:
            last = (done.stderr.strip().splitlines() or ["no archive"])[-1]
            return f"pip could not download the source distribution of transformers=={version}: {last}"
        # Written beside the cache folder, then renamed into place: a run cut short leaves no half-written cache.
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", dir=folder.parent))
        with tarfile.open(archives[0]) as archive:
            for name in COMMON_FILES:
                (partial / name).write_bytes(archive.extractfile(f"transformers-{version}/tests/{name}").read())
        (partial / "__init__.py").touch()
        if not folder.is_dir():
            partial.rename(folder)
    return None


def _import_common_tests(folder: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """Import the fetched files as a package, with empty stand-ins for the modules the source distribution lacks."""
    spec = importlib.util.spec_from_file_location(
        PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
    stand_ins = {
        "exporters.test_export": {"ExportTesterMixin": type("ExportTesterMixin", (), {})},
        "generation.test_utils": {"GenerationTesterMixin": type("GenerationTesterMixin", (), {})},
        "utils.test_configuration_utils": {"config_common_kwargs": {}},
    }
    for dotted, names in stand_ins.items():
        parent = dotted.split(".")[0]
        for name in (f"{PACKAGE}.{parent}", f"{PACKAGE}.{dotted}"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules[f"{PACKAGE}.{dotted}"].__dict__.update(names)
    if importlib.util.find_spec("parameterized") is None:
        sys.modules["parameterized"] = _parameterized_stand_in()
    with warnings.catch_warnings():  # marks of transformers' own pytest configuration (flash_attn_test, ...)
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        return tuple(importlib.import_module(f"{PACKAGE}.{name[:-3]}") for name in COMMON_FILES)


def _parameterized_stand_in() -> types.ModuleType:
    """`parameterized.expand` (the one use the common tests make of the package, a test dependency of transformers,
    not of this project): one test method per case, named `<test>_<index>`, in the class being defined."""

    def expand(cases):
        def decorate(function):
            namespace = sys._getframe(1).f_locals
            for index, case in enumerate(cases):
                args = case if isinstance(case, tuple) else (case,)

                def test(self, _args=args):
                    return function(self, *_args)

                test.__name__ = f"{function.__name__}_{index}"
                namespace[test.__name__] = test
            function.__test__ = False
            return None

        return decorate

    module = types.ModuleType("parameterized")
    module.parameterized = types.SimpleNamespace(expand=expand)
    return module


pytestmark = pytest.mark.slow  # about 30 s: some 180 tests, each saving and loading every class

_reason = _fetch(_cache_dir())
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)
modeling_common, configuration_common = _import_common_tests(_cache_dir())

MODEL_CLASSES = tuple(
    getattr(importlib.import_module(f"modeling_elmo.{path.split('.')[0]}"), path.split(".")[1])
    for path in AUTO_CLASSES.values()
)


class ElmoModelTester:
    """A tiny ELMo and a batch of random character ids, in the shape the mixins ask of a model tester."""

    def __init__(self, parent, batch_size: int = 3, seq_length: int = 6, vocab_size: int = 11, num_labels: int = 3):
        self.parent = parent
        self.batch_size, self.seq_length = batch_size, seq_length
        self.vocab_size, self.num_labels = vocab_size, num_labels
        self.is_training = True
        config = self.get_config()
        self.hidden_size, self.num_hidden_layers = config.hidden_size, config.num_hidden_layers
        self.expected_num_hidden_layers = config.num_layers + 1  # layer 0, then every biLSTM layer

    def get_config(self) -> ElmoConfig:
        return ElmoConfig.from_preset("tiny", vocab_size=self.vocab_size, num_labels=self.num_labels)

    def prepare_config_and_inputs_for_common(self) -> tuple[ElmoConfig, dict]:
        lengths = [self.seq_length] + [max(2, self.seq_length - 1 - row) for row in range(1, self.batch_size)]
        input_ids = random_char_ids(lengths, seed=0).to(modeling_common.torch_device)
        attention_mask = (input_ids != 0).any(-1).long()
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


class ElmoCommonTest(modeling_common.ModelTesterMixin, unittest.TestCase):
    all_model_classes = MODEL_CLASSES
    has_attentions = False  # a biLSTM: no attention weights to return
    test_resize_embeddings = False  # the input embedding is a table of characters, fixed by the tokenizer
    # The mixin checks `_init_weights` only for models whose files carry a copyright year from 2023 on; ours is
    # meant to pass it.
    test_can_init_all_missing_weights_before_2023 = True

    def setUp(self):
        self.model_tester = ElmoModelTester(self)
        self.config_tester = configuration_common.ConfigTester(
            self, config_class=ElmoConfig, common_properties=["hidden_size", "num_hidden_layers"],
            **PRESETS["tiny"],
        )

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if model_class.__name__ == "ElmoForQuestionAnswering":  # pairs (question, passage): the second half passage
            mask = inputs_dict["attention_mask"]
            lengths = mask.sum(1, keepdim=True)
            positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
            inputs_dict["token_type_ids"] = ((positions >= lengths // 2) & mask.bool()).long()
            if return_labels:
                inputs_dict["start_positions"] = (lengths.squeeze(1) - 1).clamp(min=0)
                inputs_dict["end_positions"] = (lengths.squeeze(1) - 1).clamp(min=0)
        if return_labels:
            # transformers adds labels for the classes of its own name tables, which registered models are not in
            batch, steps = self.model_tester.batch_size, inputs_dict["input_ids"].shape[1]
            generator = torch.Generator().manual_seed(0)  # the same labels at every call: tests compare two runs
            shapes = {
                "ElmoForPreTraining": (self.model_tester.vocab_size, (batch, steps)),
                "ElmoForSequenceClassification": (self.model_tester.num_labels, (batch,)),
                "ElmoForTokenClassification": (self.model_tester.num_labels, (batch, steps)),
            }
            if model_class.__name__ in shapes:
                high, shape = shapes[model_class.__name__]
                labels = torch.randint(high, shape, generator=generator)
                inputs_dict["labels"] = labels.to(inputs_dict["input_ids"].device)
        return inputs_dict

    def test_training(self):
        # the mixin leaves out base models by transformers' own name table, in which registered models are not
        with_loss = tuple(c for c in MODEL_CLASSES if "labels" in inspect.signature(c.forward).parameters)
        with unittest.mock.patch.object(self, "all_model_classes", with_loss):
            super().test_training()

    def test_config(self):
        self.config_tester.run_common_tests()
