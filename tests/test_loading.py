"""`load_elmo`, the one loader of every command: a folder (with or without tokenizer files), a preset (random
weights, seeded), a Hub id, the task heads, an ELMoForManyLangs folder, and one-line errors for everything else."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from conftest import random_char_ids, record_sleeps

from elmo_hf.modeling_elmo import (
    ElmoConfig,
    ElmoForPreTraining,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
)
from elmo_hf.modeling_elmo.configuration_elmo import PRESETS, TASK_CLASSES
from elmo_hf.tokenization import ElmoManyLangsTokenizer, ElmoTokenizer
from elmo_hf.tools.loading import TASKS, ModelLoadError, load_elmo


def _same_weights(a, b) -> bool:
    left, right = a.state_dict(), b.state_dict()
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


def test_a_folder_gives_its_model_and_tokenizer(tiny_model_dir):
    model, tokenizer = load_elmo(tiny_model_dir)
    assert type(model) is ElmoModel and not model.training
    assert type(tokenizer) is ElmoTokenizer
    assert _same_weights(model, ElmoModel.from_pretrained(tiny_model_dir))
    ids = random_char_ids([4, 2])
    with torch.no_grad():  # the same weights through the same kernels in this process: the same bits
        assert torch.equal(model(ids).last_hidden_state,
                           ElmoModel.from_pretrained(tiny_model_dir).eval()(ids).last_hidden_state)


def test_a_folder_without_tokenizer_files_gets_a_default_one_of_its_width(tmp_path, caplog):
    torch.manual_seed(0)
    ElmoModel(ElmoConfig.from_preset("tiny", max_characters_per_token=20)).save_pretrained(tmp_path)
    with caplog.at_level(logging.INFO, logger="elmo_hf.tools.loading"):
        model, tokenizer = load_elmo(tmp_path)
    assert type(tokenizer) is ElmoTokenizer and tokenizer.max_characters_per_token == 20
    # a warning naming the split: the split a model was trained with lives in the tokenizer files (issue 68, case 11)
    (record,) = [record for record in caplog.records if "no tokenizer files" in record.getMessage()]
    assert record.levelno == logging.WARNING
    assert (f"{tmp_path} has no tokenizer files: its text is split into words by the default tokenizer's "
            f"{tokenizer.word_split!r} split; if the model was trained with another") in record.getMessage()


def test_a_preset_is_random_seeded_and_logged_as_random(caplog):
    with caplog.at_level(logging.WARNING, logger="elmo_hf.tools.loading"):
        first, tokenizer = load_elmo("tiny", seed=3)
    assert "RANDOM weights" in caplog.text and "tiny" in caplog.text
    again, _ = load_elmo("tiny", seed=3)
    other, _ = load_elmo("tiny", seed=4)
    assert _same_weights(first, again) and not _same_weights(first, other)
    torch.manual_seed(3)
    assert _same_weights(first, ElmoModel(ElmoConfig.from_preset("tiny")))  # as the model itself draws
    assert type(first) is ElmoModel and type(tokenizer) is ElmoTokenizer
    assert first.config.cell_size == PRESETS["tiny"]["cell_size"]


@pytest.mark.parametrize(("task", "cls"), [
    (None, ElmoModel),
    ("model", ElmoModel),
    ("pre-training", ElmoForPreTraining),
    ("sequence-classification", ElmoForSequenceClassification),
    ("token-classification", ElmoForTokenClassification),
])
def test_task_picks_the_class(tiny_model_dir, task, cls):
    overrides = {"vocab_size": 40} if task == "pre-training" else {"num_labels": 3}
    for name in ("tiny", tiny_model_dir):
        model, _ = load_elmo(name, task, config_overrides=overrides if task else None)
        assert type(model) is cls
    assert set(TASKS) == {None, "model", "pre-training", *TASK_CLASSES}  # one per task head of ELMO_CLASSES
    assert {"sequence-classification", "token-classification", "question-answering", "multiple-choice"} <= set(TASKS)


def test_overrides_device_and_dtype(tiny_model_dir):
    model, _ = load_elmo(tiny_model_dir, "sequence-classification", dtype=torch.bfloat16, device="cpu",
                         config_overrides={"num_labels": 4, "scalar_mix": "top"})
    assert model.config.num_labels == 4 and model.config.scalar_mix == "top"
    assert next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(ModelLoadError, match="scalar_mix_parameters"):  # validated after the overrides
        load_elmo(tiny_model_dir, "sequence-classification", config_overrides={"scalar_mix": "fixed"})
    with pytest.raises(ModelLoadError, match="tiny"):
        load_elmo("tiny", config_overrides={"scalar_mix": "fixed"})


def _one_line(error: pytest.ExceptionInfo, *names: str) -> None:
    message = str(error.value)
    assert "\n" not in message, message
    for name in names:
        assert name in message, message


def test_errors_are_one_line_naming_the_value_and_what_is_accepted(tmp_path):
    accepted = ("folder", "Hub id", "tiny")
    for name in (tmp_path / "absent", "not-a-model", "a/b/c", "./relative/path"):
        with pytest.raises(ModelLoadError, match="not found") as error:
            load_elmo(name)
        _one_line(error, str(name), *accepted)
    with pytest.raises(ModelLoadError, match="no config.json") as error:
        load_elmo(tmp_path)
    _one_line(error, str(tmp_path), *accepted)
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ModelLoadError, match="not a folder") as error:
        load_elmo(tmp_path / "file.txt")
    _one_line(error, "file.txt")
    with pytest.raises(ModelLoadError, match="'regression'") as error:
        load_elmo("tiny", task="regression")
    _one_line(error, "sequence-classification")
    assert issubclass(ModelLoadError, ValueError)


def test_a_mistyped_local_folder_is_refused_without_a_hub_request(tmp_path, monkeypatch):
    """`outputs/modle` next to an `outputs/` folder, and names no Hub id could be: one line, at once."""
    import transformers

    def no_hub(*args, **kwargs):
        raise AssertionError(f"a Hub request for {args[0]}")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", no_hub)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()
    with pytest.raises(ModelLoadError, match="the folder outputs has no modle") as error:
        load_elmo("outputs/modle")
    _one_line(error, "outputs/modle", "Hub id", "tiny")
    for name in ("my model/elmo", "owner/na--me", "C:\\models\\elmo"):
        with pytest.raises(ModelLoadError, match="not found") as error:
            load_elmo(name)
        _one_line(error, name)


def test_a_folder_of_another_model_type_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1,
                                                      "num_attention_heads": 1, "intermediate_size": 8}))
    with pytest.raises(ModelLoadError, match="'bert' model, not an ELMo model") as error:
        load_elmo(tmp_path)
    _one_line(error, str(tmp_path))


def test_a_hub_id_that_cannot_be_reached_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="cannot load an ELMo model from nobody/no-such-elmo") as error:
        load_elmo("nobody/no-such-elmo")
    _one_line(error, "Hub id")


def test_a_hub_id_whose_host_does_not_resolve_is_one_line_at_once(monkeypatch):
    """No name resolution (offline): one line naming the host, without the Hub client's half a minute of retries."""
    import socket

    import huggingface_hub.constants
    import huggingface_hub.utils._http

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "https://hub.elmo-test.invalid")

    def no_dns(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    waits = record_sleeps(monkeypatch, huggingface_hub.utils._http)  # the client's retries wait here
    with pytest.raises(ModelLoadError, match="hub.elmo-test.invalid cannot be reached") as error:
        load_elmo("nobody/no-such-elmo")
    assert waits == []
    _one_line(error, "nobody/no-such-elmo", "Hub id")


def test_an_elmoformanylangs_folder_gets_its_tokenizer(tmp_path):
    pytest.importorskip("elmoformanylangs", reason="the ELMoForManyLangs fixture is written with its package")
    import manylangs_fixture

    from elmo_hf.tools.conversion.convert_elmoformanylangs import convert

    ours = convert(manylangs_fixture.write_model(tmp_path / "theirs"), tmp_path / "ours")
    model, tokenizer = load_elmo(ours)
    assert model.config.token_encoder == "word_char" and type(tokenizer) is ElmoManyLangsTokenizer
    batch = tokenizer([["the", "bank"]], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        assert model(**batch).last_hidden_state.shape == (1, 4, 2 * model.config.projection_dim)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        (ours / name).unlink(missing_ok=True)
    with pytest.raises(ModelLoadError, match="ELMoForManyLangs") as error:  # its dictionaries cannot be guessed
        load_elmo(ours)
    _one_line(error, str(ours))


def test_a_tokenizer_saved_with_an_unusable_split_is_refused_not_replaced(tiny_model_dir, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    for item in tiny_model_dir.iterdir():
        (folder / item.name).write_bytes(item.read_bytes()) if item.is_file() else None
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["word_split"] = "custom:somewhere.a_lambda"  # what a split that cannot be named is saved as
    config_path.write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="cannot load the tokenizer .*somewhere.a_lambda.*pass it again") as caught:
        load_elmo(folder)
    assert "\n" not in str(caught.value)


def test_dtype_by_name_and_an_unusable_device_or_dtype_are_one_line(tiny_model_dir, monkeypatch):
    model, _ = load_elmo(tiny_model_dir, dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    model, _ = load_elmo(tiny_model_dir, dtype="torch.float64")
    assert next(model.parameters()).dtype == torch.float64
    for dtype in ("bfloat17", "Tensor", 16):
        with pytest.raises(ModelLoadError, match="is not a torch dtype") as error:
            load_elmo(tiny_model_dir, dtype=dtype)
        _one_line(error, repr(dtype), "bfloat16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU-only torch, also on a GPU machine
    with pytest.raises(ModelLoadError, match="device cuda: not available here") as error:
        load_elmo(tiny_model_dir, device="cuda")
    _one_line(error, "cpu")
    with pytest.raises(ModelLoadError, match="device 'nonsense' is not a device name") as error:
        load_elmo(tiny_model_dir, device="nonsense")
    _one_line(error)


def test_saved_weights_of_another_shape_are_one_line_unless_ignored(tmp_path):
    three, _ = load_elmo("tiny", "token-classification", config_overrides={"num_labels": 3})
    three.save_pretrained(tmp_path)
    two = {"id2label": {0: "O", 1: "B-X"}, "label2id": {"O": 0, "B-X": 1}}
    with pytest.raises(ModelLoadError, match="other shapes than its config gives") as error:
        load_elmo(tmp_path, "token-classification", config_overrides=two)
    _one_line(error, str(tmp_path), "ignore_mismatched_sizes=True")
    model, _ = load_elmo(tmp_path, "token-classification", config_overrides=two, ignore_mismatched_sizes=True)
    assert model.num_labels == 2


def _spoil_config(folder):
    config = folder / "config.json"
    config.write_bytes(config.read_bytes()[:40])  # an interrupted copy
    return config


def _spoil_weights(folder):
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return weights


def _remove_weights(folder):
    (folder / "model.safetensors").unlink()
    return folder


def _config_of_a_list(folder):
    (folder / "config.json").write_text("[1, 2]", encoding="utf-8")
    return folder


# A saved model spoiled one way -> the path the error must name, and what from_pretrained and load_elmo say.
DAMAGED_MODELS = {
    "config.json cut short": (_spoil_config, "not a valid JSON file", "not a valid JSON file"),
    "config.json not an object": (_config_of_a_list, "config.json", "config.json"),
    "model.safetensors cut in half": (_spoil_weights, "damaged or incomplete", "damaged or incomplete"),
    "model.safetensors missing": (_remove_weights, "model.safetensors", "model.safetensors"),
}


@pytest.mark.parametrize("damage", DAMAGED_MODELS)
def test_a_damaged_model_folder_is_one_error_naming_the_file(damage, tmp_path):
    """A model folder spoiled as interrupted copies and hand edits spoil them: from_pretrained raises an OSError or
    ValueError (transformers' own types for a file it cannot read) whose message names the file, and load_elmo
    one ModelLoadError of one line naming it too."""
    spoil, from_pretrained_says, load_elmo_says = DAMAGED_MODELS[damage]
    ElmoModel(ElmoConfig.from_preset("tiny")).save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    named = spoil(tmp_path)
    with pytest.raises((OSError, ValueError)) as caught:
        ElmoModel.from_pretrained(tmp_path)
    assert str(named) in str(caught.value) and from_pretrained_says in str(caught.value), caught.value
    with pytest.raises(ModelLoadError) as caught:
        load_elmo(str(tmp_path))
    _one_line(caught, str(tmp_path), load_elmo_says)
