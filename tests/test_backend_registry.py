"""The backend table (tools/core/backend_registry.py) and what reads it: `elmo-embed --backend`'s and `elmo-app
--backend`'s choices, the automatic choice's candidates, the runners each row names and the torch-free runners of
onnx_standalone.py. Nothing is exported or run here: the tests of the runners themselves are in test_onnx_export.py."""

from __future__ import annotations

import pytest

from elmo_hf.tools.core import backend_registry
from elmo_hf.tools.core.arguments import UsageError, parse_options
from elmo_hf.tools.core.backend_registry import AUTO, BACKENDS, DEFAULT, backend_row
from elmo_hf.tools.core.command_options import AppOptions
from elmo_hf.tools.embedding.embed_plan import EMBED_DTYPES, EmbedOptions

ROWS = {row.name: row for row in BACKENDS}


def _parses(options: type, argv: list[str]) -> bool:
    try:
        parse_options(options, argv)
    except UsageError:  # the parser's one-line usage error
        return False
    return True


def test_every_row_is_an_embed_backend_and_nothing_else_is():
    embed = ["in.txt", "out.hdf5", "--model", "tiny"]
    for name in ROWS:
        assert parse_options(EmbedOptions, [*embed, "--backend", name]).backend == name
    assert parse_options(EmbedOptions, [*embed, "--backend", AUTO]).backend == AUTO
    assert not _parses(EmbedOptions, [*embed, "--backend", "tensorrt"])
    assert backend_registry.EMBED_BACKENDS == (*ROWS, AUTO)
    assert DEFAULT in ROWS and AUTO not in ROWS


def test_the_app_offers_exactly_the_rows_marked_for_it(monkeypatch):
    monkeypatch.delenv("ELMO_APP_BACKEND", raising=False)
    offered = {name for name in ROWS if _parses(AppOptions, ["--backend", name])}
    assert offered == {name for name, row in ROWS.items() if row.app}
    assert not _parses(AppOptions, ["--backend", AUTO])  # the app measures nothing
    assert parse_options(AppOptions, []).backend == DEFAULT


def test_the_automatic_choice_considers_exactly_the_rows_marked_automatic(monkeypatch):
    from elmo_hf.tools.export import backend_choice

    monkeypatch.setattr(backend_choice, "unavailable_reason", lambda *args, **kwargs: None)  # all installed
    every = set(backend_choice.candidates(AUTO, AUTO, lambda dtype: None))
    assert every == {(name, dtype) for name, row in ROWS.items() if row.automatic
                     for dtype in row.automatic_dtypes}  # the batch-invariant ones: tests/test_batch_invariance.py
    assert {name for name, _ in backend_choice.candidates(AUTO, "float32", lambda dtype: None)} == {
        name for name, row in ROWS.items() if row.automatic}
    # What cannot run here is left out: the model's dtypes by the caller's check, a runtime's by its row.
    monkeypatch.setattr(backend_choice, "unavailable_reason", lambda name, dtype, *rest: "missing" if name != DEFAULT
                        else pytest.fail("the model's own dtypes are the caller's to check"))
    torch_paths = backend_choice.candidates(AUTO, AUTO, lambda dtype: None if dtype == "float32" else "no")
    assert torch_paths == [(DEFAULT, "float32")]


def test_every_row_names_a_runner_and_its_dtypes_are_embed_dtypes():
    from elmo_hf.tools.export.backends import runner_class

    for name, row in ROWS.items():
        runner = runner_class(name)
        assert callable(getattr(runner, "run", None)), row.runner
        assert runner.backend == name, row.runner
        assert set(row.dtypes) <= set(EMBED_DTYPES) - {AUTO}, name
        assert "float32" in row.dtypes and row.packages and row.devices, name
        assert row.graph or not row.standalone, f"{name}: only a graph runs without torch"


def test_the_standalone_runners_are_the_rows_marked_standalone():
    """onnx_standalone.py imports nothing of the project (it is copied alone beside a graph): its runners are the
    classes the table's standalone rows name, the same objects `elmo-embed --backend` builds."""
    from elmo_hf.tools.export import onnx_standalone
    from elmo_hf.tools.export.backends import runner_class

    standalone = {name for name, row in ROWS.items() if row.standalone}
    assert set(onnx_standalone.runners()) == standalone
    for name in standalone:
        assert runner_class(name) is onnx_standalone.runners()[name]
        assert ROWS[name].runner.startswith("elmo_hf.tools.export.onnx_standalone:")
    with pytest.raises(ValueError, match="backend must be one of"):
        onnx_standalone.ElmoOnnx("nowhere", backend=DEFAULT)


def test_unknown_backends_are_refused_in_one_line():
    from elmo_hf.tools.export.backends import unavailable_reason

    assert unavailable_reason("tensorrt", "float32") == (
        f"unknown backend 'tensorrt': choose one of {', '.join(ROWS)}")
    with pytest.raises(KeyError, match="unknown backend 'tensorrt'"):
        backend_row("tensorrt")
    first_graph = next(name for name, row in ROWS.items() if row.graph)
    assert unavailable_reason(first_graph, "float16") == (
        f"--backend {first_graph} has no float16: it runs {', '.join(ROWS[first_graph].dtypes)}")
    assert unavailable_reason(first_graph, "float32", "cuda") == (
        f"--backend {first_graph} runs on the CPU here, not on cuda: add --device cpu")
