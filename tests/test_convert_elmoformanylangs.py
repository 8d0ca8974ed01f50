"""ELMoForManyLangs models: the converter, the tokenizer and parity with the `elmoformanylangs` package.

The reference is the package itself (a test-only dependency, `pip install "elmo-hf[manylangs-test]"`): tiny models
with random weights are written by its own `Model` in its own folder layout (tests/manylangs_fixture.py), converted,
and every layer is compared with its `Embedder.sents2elmo` on a fresh biLM state (theirs carries the LSTM state from
one batch to the next; a new `Embedder` starts from zeros, as ours always does).

Bounds (tests/tolerances.py): ours against the package to PARITY_SCALED, 1e-5 of max(1, the largest value): the
weights are random, their vectors reach 2.05 (layer 0 of the word-only model; 1.03 and 0.87 with characters); the
remote-code copy against the local model (the same arithmetic by another route) to REORDERED.
"""

from __future__ import annotations

import json
from pathlib import Path

import manylangs_fixture
import numpy as np
import pytest
import torch
from conftest import REPO, cli, run_cli, run_isolated
from tolerances import PARITY_SCALED, REORDERED, assert_close

from elmo_hf.tools.conversion.convert_common import ConversionError
from elmo_hf.tools.conversion.convert_elmoformanylangs import convert, read_dictionary, read_network_config

# Chinese and Latin, lengths 1 to 10 (padding in every batch), unknown words and characters, a word longer than
# max_characters_per_token - 2 characters (cut, as theirs), a whitespace character (their "\u3000" entry), and the
# literal markers: "<bos>" is their sentence marker, "<S>" an ordinary word for them.
SENTENCES = [
    ["我", "爱", "北京", "天安门", "，", "天安门", "上", "太阳", "升", "。"],
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["银行"],
    ["naïve", "café", "über", "ELMoELMoELMoELMo", "xyz", "a\u3000b", "<bos>", "<S>"],
    ["花", "钱", "打", "球", "行走", "银行", "2018"],
]
VARIANTS = {"char+word": {}, "char only": {"word_dim": 0}, "word only": {"char_dim": 0}}


@pytest.fixture(scope="module")
def package():
    try:
        import elmoformanylangs
    except ImportError as error:
        pytest.skip(
            f"elmoformanylangs is not installed ({error}); the parity tests need it: "
            'pip install "elmo-hf[manylangs-test]" (elmoformanylangs==0.0.4.post2, overrides<4)'
        )
    return elmoformanylangs


@pytest.fixture(scope="module")
def converted(package, tmp_path_factory):
    """{variant: (their folder, our folder)}, written once for the module."""
    root = tmp_path_factory.mktemp("manylangs")
    folders = {}
    for seed, (name, dims) in enumerate(VARIANTS.items()):
        theirs = manylangs_fixture.write_model(root / f"theirs-{seed}", seed=seed, **dims)
        folders[name] = (theirs, convert(theirs, root / f"ours-{seed}"))
    return folders


def _theirs(package, folder: Path, output_layer: int, sentences=SENTENCES) -> list[np.ndarray]:
    embedder = package.Embedder(str(folder), batch_size=64)  # a fresh Embedder: a zero biLM state, one batch
    return embedder.sents2elmo(sentences, output_layer=output_layer)


def _ours_layers(folder: Path, output_layers, sentences=SENTENCES) -> dict[int, list[np.ndarray]]:
    """{output_layer: our vectors of `sentences` as their `sents2elmo(output_layer=...)` gives them}, one forward."""
    from transformers import AutoModel, AutoTokenizer

    from elmo_hf.modeling_elmo.word_char_encoder import elmoformanylangs_layers

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    return {layer: [x.numpy() for x in elmoformanylangs_layers(out.hidden_states, batch["attention_mask"], layer)]
            for layer in output_layers}


def _ours(folder: Path, output_layer: int, sentences=SENTENCES) -> list[np.ndarray]:
    return _ours_layers(folder, [output_layer], sentences)[output_layer]


@pytest.mark.numerics
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_layer_matches_the_package(package, converted, variant):
    theirs_folder, ours_folder = converted[variant]
    ours_by_layer = _ours_layers(ours_folder, (-2, -1, 0, 1, 2))
    for output_layer, ours in ours_by_layer.items():
        theirs = _theirs(package, theirs_folder, output_layer)
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert a.shape == b.shape, (variant, output_layer, i)
            assert_close(a, b, PARITY_SCALED, what=f"{variant} layer {output_layer} row {i}")
    assert np.abs(theirs[0]).max() > 0.1  # the comparison is not between zeros


@pytest.mark.numerics
def test_raw_chinese_text_from_autotokenizer_to_vectors(package, converted):
    """The README's usage: raw text through AutoTokenizer (one token per ideograph by default; a segmenter with
    word_split for word-level input), then the package's output_layer=-1 vectors."""
    from transformers import AutoModel, AutoTokenizer

    from elmo_hf.modeling_elmo.word_char_encoder import elmoformanylangs_layers

    theirs_folder, ours_folder = converted["char+word"]
    tokenizer = AutoTokenizer.from_pretrained(ours_folder)
    model = AutoModel.from_pretrained(ours_folder).eval()
    text = "我爱北京天安门，天安门上太阳升。ELMo 2018"
    words = tokenizer.tokenize(text)
    assert words[:4] == ["我", "爱", "北", "京"] and words[-2:] == ["ELMo", "2018"]
    batch = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    (ours,) = elmoformanylangs_layers(out.hidden_states, batch["attention_mask"], output_layer=-1)
    (theirs,) = _theirs(package, theirs_folder, -1, [words])
    assert_close(ours, theirs, PARITY_SCALED, what="raw Chinese text, output_layer -1")


def test_token_rows_are_their_batchers_ids_plus_one(package, converted):
    """Our input_ids are their character and word ids (+1) at every real position."""
    from elmoformanylangs.elmo import read_list
    from elmoformanylangs.frontend import create_one_batch
    from transformers import AutoTokenizer

    theirs_folder, ours_folder = converted["char+word"]
    embedder = package.Embedder(str(theirs_folder))
    config = embedder.config
    data, _ = read_list(SENTENCES, config["token_embedder"]["max_characters_per_token"])
    words, chars, lengths, _ = create_one_batch(data, embedder.word_lexicon, embedder.char_lexicon, config, sort=False)
    tokenizer = AutoTokenizer.from_pretrained(ours_folder)
    batch = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    ids = batch["input_ids"]
    assert ids.shape[-1] == chars.shape[-1] + 1
    for row, length in enumerate(lengths):
        assert batch["attention_mask"][row].sum() == length
        assert torch.equal(ids[row, :length, :-1], chars[row, :length] + 1)
        assert torch.equal(ids[row, :length, -1], words[row, :length] + 1)
        assert not ids[row, length:].any()  # our padding tokens are zeros


@pytest.mark.numerics
def test_their_state_carries_over_ours_does_not(package, converted):
    """Why the parity compares fresh states: a second call of the same Embedder starts from the first's final LSTM
    state and gives other vectors; ours gives the same vectors every time."""
    theirs_folder, ours_folder = converted["char+word"]
    embedder = package.Embedder(str(theirs_folder), batch_size=64)
    first = embedder.sents2elmo(SENTENCES[:2], output_layer=2)
    second = embedder.sents2elmo(SENTENCES[:2], output_layer=2)
    assert np.abs(first[0] - second[0]).max() > 1e-4
    assert_close(_ours(ours_folder, 2, SENTENCES[:2])[0], first[0], PARITY_SCALED, what="their first call, layer 2")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_task_heads_leave_out_their_sentence_markers(converted, variant):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from elmo_hf.modeling_elmo.downstream_elmo import word_mask_of

    _, folder = converted[variant]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    rows = model.config.sentence_boundary_rows
    assert rows == tokenizer.sentence_boundary_rows
    mask = batch["attention_mask"].bool()
    expected = mask.clone()
    for i, sentence in enumerate(SENTENCES):
        expected[i, 0] = expected[i, len(sentence) + 1] = False  # the <bos>, <eos> added by the tokenizer
        if "<bos>" in sentence:  # their batcher gives a literal "<bos>" the marker's row
            expected[i, sentence.index("<bos>") + 1] = False
    assert torch.equal(word_mask_of(batch["input_ids"], mask, False, rows), expected)
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (len(SENTENCES), 2) and bool(torch.isfinite(logits).all())


@pytest.mark.slow
def test_converted_folder_loads_as_remote_code(converted, tmp_path):
    _, ours_folder = converted["char+word"]
    for name in ("word_char_encoder.py", "tokenization_elmo_manylangs.py", "char_dictionary.json"):
        assert (ours_folder / name).is_file(), name
    code = f"""
import json, torch
from transformers import AutoModel, AutoTokenizer
folder = {str(ours_folder)!r}
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
batch = tokenizer({SENTENCES!r}, is_split_into_words=True, padding=True, return_tensors="pt")
with torch.no_grad():
    out = model(**batch)
print(json.dumps({{"module": type(model).__module__, "tokenizer": type(tokenizer).__name__,
                   "ids": batch["input_ids"].tolist(), "top": out.last_hidden_state.flatten().tolist()}}))
"""
    remote = json.loads(run_isolated(code, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert remote["module"].startswith("transformers_modules")
    assert remote["tokenizer"] == "ElmoManyLangsTokenizer"

    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ours_folder)
    batch = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    assert remote["ids"] == batch["input_ids"].tolist()
    with torch.no_grad():
        top = AutoModel.from_pretrained(ours_folder).eval()(**batch).last_hidden_state
    assert_close(remote["top"], top.flatten(), REORDERED, what="remote code against local, top layer")


# --------------------------------------------------------------------------------------------------
# The command and bad folders
# --------------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """`elmo-convert --manylangs_dir DIR ...` in this process (`--model_dir` is read as --manylangs_dir)."""
    return cli("elmo-convert", ["--manylangs_dir" if arg == "--model_dir" else arg for arg in argv])


@pytest.mark.slow
def test_command_converts_and_refuses_a_bad_folder(package, tmp_path, caplog):
    """The command converts; and refuses in one line (the other bad folders: below)."""
    theirs = manylangs_fixture.write_model(tmp_path / "theirs")
    # elmo-convert --manylangs_dir (elmo_hf.tools.conversion.convert) hands the folder to this converter
    result = run_cli("elmo-convert", ["--manylangs_dir", theirs, "--output_dir", tmp_path / "out"], cwd=REPO)
    assert result.returncode == 0, result.stderr
    # quiet: how to split its Chinese words (its word.dic holds words of several ideographs), and where it wrote
    notice, wrote = result.stderr.splitlines()
    assert "--word_split jieba" in notice and wrote == ("INFO elmo_hf.tools.conversion.convert: wrote "
                                                        f"{tmp_path / 'out'}")
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "out" / "config.json").read_text())["token_encoder"] == "word_char"
    both = ["--manylangs_dir", str(theirs), "--model", "original", "--output_dir", str(tmp_path / "both")]
    assert cli("elmo-convert", both) == 2
    assert "drop --model" in caplog.text and not (tmp_path / "both").exists()
    before = sorted(p.name for p in theirs.iterdir())  # --overwrite into the folder it reads: refused, kept
    in_place = run_cli("elmo-convert", ["--manylangs_dir", theirs, "--output_dir", theirs, "--overwrite"], cwd=REPO)
    assert in_place.returncode == 2 and "which --overwrite would delete" in in_place.stderr.splitlines()[-1]
    assert sorted(p.name for p in theirs.iterdir()) == before

    (theirs / "char.dic").unlink()
    caplog.clear()
    assert main(["--model_dir", str(theirs), "--output_dir", str(tmp_path / "bad")]) == 2
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 1 and "char.dic" in errors[0], errors
    assert not (tmp_path / "bad").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left


@pytest.mark.slow
def test_elmo_embed_reads_a_converted_folder(package, converted, tmp_path):
    import h5py

    theirs_folder, ours_folder = converted["char+word"]
    sentences = [SENTENCES[0], SENTENCES[1]]
    (tmp_path / "in.txt").write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    result = run_cli("elmo-embed", [tmp_path / "in.txt", tmp_path / "out.h5", "--model", ours_folder, "--split",
                                    "whitespace"], cwd=REPO)  # the lines hold words already split
    assert result.returncode == 0, result.stderr
    theirs = _theirs(package, theirs_folder, -2, sentences)
    with h5py.File(tmp_path / "out.h5") as out:
        for i, expected in enumerate(theirs):
            assert_close(out[str(i)][:], expected, PARITY_SCALED, what=f"elmo-embed sentence {i}")


def _break_word_dic(folder: Path) -> None:
    with open(folder / "word.dic", "a", encoding="utf-8") as out:
        out.write("extra\t999\n")


def _break_shape(folder: Path) -> None:
    state = torch.load(folder / "encoder.pkl", weights_only=True)
    state["forward_layer_0.state_projection.weight"] = torch.zeros(3, 3)
    torch.save(state, folder / "encoder.pkl")


def _drop_tensor(folder: Path) -> None:
    state = torch.load(folder / "token_embedder.pkl", weights_only=True)
    del state["highways._layers.1.bias"]
    torch.save(state, folder / "token_embedder.pkl")


def _unknown_network(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({"config_path": "/nowhere/cnn_other.json"}), encoding="utf-8")
    (folder / "cnn_tiny_sample.json").unlink()


BAD_FOLDERS = {
    "missing encoder.pkl": (lambda f: (f / "encoder.pkl").unlink(), "encoder.pkl"),
    "missing word.dic": (lambda f: (f / "word.dic").unlink(), "word.dic"),
    "dictionary larger than its table": (_break_word_dic, "word.dic"),
    "tensor of the wrong shape": (_break_shape, "forward_layer_0.state_projection.weight"),
    "tensor missing": (_drop_tensor, "highways._layers.1.bias"),
    "unknown network config": (_unknown_network, "cnn_other.json"),
    "config.json missing": (lambda f: (f / "config.json").unlink(), "config.json"),
    "truncated pickle": (lambda f: (f / "token_embedder.pkl").write_bytes(b"\x80\x02}q"), "token_embedder.pkl"),
}


@pytest.mark.parametrize("case", list(BAD_FOLDERS))
def test_bad_folder_exits_2_naming_the_file(package, case, tmp_path, caplog):
    break_it, named = BAD_FOLDERS[case]
    theirs = manylangs_fixture.write_model(tmp_path / "theirs")
    break_it(theirs)
    assert main(["--model_dir", str(theirs), "--output_dir", str(tmp_path / "out")]) == 2
    assert named in caplog.text
    assert not (tmp_path / "out").exists()


class _CreatesAFile:
    """Unpickling this runs `open(path, "w")`: what a malicious .pkl could do with any code."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').close()",))


def _minimal_folder(folder: Path) -> Path:
    """A model folder in the published layout, written without the package (the pickle test needs no package)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"config_path": "net.json"}), encoding="utf-8")
    (folder / "net.json").write_text(json.dumps(manylangs_fixture.TINY_NETWORK), encoding="utf-8")
    words, chars = manylangs_fixture.build_lexicons()
    (folder / "word.dic").write_text("".join(f"{w}\t{i}\n" for w, i in words.items()), encoding="utf-8")
    (folder / "char.dic").write_text("".join(f"{c}\t{i}\n" for c, i in chars.items()), encoding="utf-8")
    torch.save({}, folder / "encoder.pkl")
    return folder


@pytest.mark.slow
def test_a_pickle_that_runs_code_is_refused_not_run(tmp_path):
    folder = _minimal_folder(tmp_path / "evil")
    marker = tmp_path / "pwned"
    torch.save({"projection.weight": _CreatesAFile(marker)}, folder / "token_embedder.pkl")

    result = run_cli("elmo-convert", ["--manylangs_dir", folder, "--output_dir", tmp_path / "out"], cwd=REPO)
    assert result.returncode == 2, result.stderr
    assert "token_embedder.pkl" in result.stderr and "refused" in result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()  # never executed
    assert not (tmp_path / "out").exists()

    # The file is really malicious: an ordinary unpickling runs it.
    torch.load(folder / "token_embedder.pkl", weights_only=False)
    assert marker.exists()


# --------------------------------------------------------------------------------------------------
# Reading the folder as the package does
# --------------------------------------------------------------------------------------------------


def test_dictionaries_are_read_as_the_package_reads_them(tmp_path):
    path = tmp_path / "char.dic"
    # a whitespace entry (strip() leaves the id alone: the package files it under "\u3000"), later lines win
    path.write_text("a\t0\n\u00a0\t1\nb\t2\na\t3\n", encoding="utf-8")
    assert read_dictionary(path) == {"a": 3, "\u3000": 1, "b": 2}
    path.write_text("a\t0\nb c d\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="line 2"):
        read_dictionary(path)


def test_network_config_is_found_as_the_package_finds_it(tmp_path, caplog):
    (tmp_path / "config.json").write_text(
        json.dumps({"config_path": "/users4/conll18/configs/cnn_50_100_512_4096_sample.json"}), encoding="utf-8"
    )
    network, source = read_network_config(tmp_path)  # not in the folder: the package's default config
    assert source == "default cnn_50_100_512_4096_sample.json"
    assert network["token_embedder"]["filters"][-1] == [7, 1024] and network["encoder"]["dim"] == 4096
    (tmp_path / "cnn_50_100_512_4096_sample.json").write_text(json.dumps({"encoder": {"dim": 8}}), encoding="utf-8")
    network, source = read_network_config(tmp_path)  # the folder's own copy comes first
    assert network == {"encoder": {"dim": 8}} and source.endswith("cnn_50_100_512_4096_sample.json")


# --------------------------------------------------------------------------------------------------
# The word split and the model card
# --------------------------------------------------------------------------------------------------

RAW_CHINESE = "我爱北京天安门，天安门上太阳升。"


def _words_found(folder: Path, text: str) -> tuple[list[str], list[str]]:
    """The words the saved tokenizer makes of raw `text`, and those whose word id is not `<oov>`."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    words = tokenizer.tokenize(text)
    rows = tokenizer(text)["input_ids"][1:-1]  # without <bos>, <eos>
    oov = tokenizer.word_dictionary["<oov>"] + 1  # ids are theirs + 1
    assert len(rows) == len(words)
    return words, [word for word, row in zip(words, rows, strict=True) if row[-1] != oov]


def test_word_split_is_saved_and_finds_the_dictionary_words(package, converted, tmp_path, caplog):
    """--word_split jieba: the saved tokenizer splits raw Chinese into the words of word.dic; the default split
    (one token per ideograph) finds few of them, and the converter says how to choose jieba."""
    theirs, default_folder = converted["char+word"]
    with caplog.at_level("INFO"):
        assert main(["--model_dir", str(theirs), "--output_dir", str(tmp_path / "jieba"), "--word_split", "jieba"]) == 0
    assert "--word_split jieba" not in caplog.text and f"wrote {tmp_path / 'jieba'}" in caplog.text
    saved = json.loads((tmp_path / "jieba" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert saved["word_split"] == "jieba"
    words, found = _words_found(tmp_path / "jieba", RAW_CHINESE)
    default_words, default_found = _words_found(default_folder, RAW_CHINESE)
    assert {"北京", "天安门"} <= set(found) and not {"北京", "天安门"} & set(default_found)
    assert len(found) / len(words) > 0.85 > 0.5 > len(default_found) / len(default_words)
    card = (tmp_path / "jieba" / "README.md").read_text(encoding="utf-8")
    assert "split into words by `jieba`" in card

    caplog.clear()
    with caplog.at_level("INFO"):
        convert(theirs, tmp_path / "default")
    assert "word.dic holds 5 words of several Chinese characters" in caplog.text
    assert "--word_split jieba" in caplog.text

    caplog.clear()
    assert main(["--model_dir", str(theirs), "--output_dir", str(tmp_path / "bad"), "--word_split", "nope"]) == 2
    assert "--word_split must be one of" in caplog.text and "'nope'" in caplog.text
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_model_card_describes_the_dictionaries(converted, variant):
    """The card of a converted ELMoForManyLangs model describes its tokenizer (dictionaries, split, characters per
    word), not the byte ids of the AllenNLP models."""
    _, folder = converted[variant]
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    card = (folder / "README.md").read_text(encoding="utf-8")
    chars, words = variant != "word only", variant != "char only"
    width = 12 * chars + words  # max_characters_per_token 12 in the fixture
    assert f"# input_ids: (batch, tokens, {width}) dictionary ids" in card
    assert "This is an ELMoForManyLangs model" in card and "split into words by the `punctuation` rule" in card
    assert "converted from an ELMoForManyLangs model" in card
    assert ("its first 10 characters (Unicode code points) looked up in the model's character dictionary "
            f"({config['char_vocab_size'] - 1} entries" in card) == chars
    assert (f"| Word embedding | {config['word_input_vocab_size'] - 1} words of the word dictionary × 6 |"
            in card) == words
    assert ("| Character CNN |" in card) == chars
    assert "UTF-8 bytes" not in card and "<S> and </S>" not in card and "{{" not in card
