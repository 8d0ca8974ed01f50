"""Every kind of model the project makes or converts, through every door a user opens: a matrix.

Each feature has its own tests; this file catches the combinations. Every cell checks real values: vectors equal to
the model's own forward to the REORDERED bound of tests/tolerances.py, labels, shapes, a loss that goes down; or, for
the cells of `REFUSED`, a one-line refusal (exit 2, nothing written) with its reason. The README names the kinds,
the doors and the refusals (a test checks that it names every one of them).

The kinds are built once, at tiny sizes, by the project's own commands (converters, pretraining, fine-tuning); the
doors that need a fresh interpreter (remote code, the pipeline, the Hub) run every kind in one subprocess.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest
import torch
from conftest import _NO_PROJECT, REPO, clean_env, cli, run_cli, tiny_config
from hub_server import HubServer
from tolerances import REORDERED, STATISTIC, assert_close

from elmo_hf.modeling_elmo import ElmoForPreTraining
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.tools.loading import load_elmo

pytestmark = pytest.mark.slow

SENTENCES = ["The cat sat on the mat .", "我 爱 北京 天安门 。", "naïve café über ELMo 2018"]
RAW_SENTENCES = ["The cat sat on the mat.", "我爱北京天安门。", "The bank lends money, the river bank floods."]
TOKEN = "hf_matrix_token"
CUSTOM_SPLIT = "matrix_splits:lowercase_words"  # tests/matrix_splits.py
TESTS = Path(__file__).resolve().parent

KINDS = {
    "allennlp": "converted from AllenNLP / bilm-tf weights (byte characters)",
    "manylangs": "converted ELMoForManyLangs, characters and words",
    "manylangs_chars": "converted ELMoForManyLangs, characters only",
    "manylangs_words": "converted ELMoForManyLangs, words only",
    "jieba": "a tokenizer with the jieba word split",
    "custom_split": "a tokenizer with a word split of your own (`module:function`)",
    "pretrained": "pretrained by `elmo-pretrain`",
    "finetuned": "fine-tuned by `elmo-finetune-classification`",
}
DOORS = {  # named in the README
    "remote": "AutoModel, remote code",
    "pipeline": "feature-extraction pipeline",
    "hub": "Hub push and load",
    "sentences": "sentence vectors",
    "embed": "`elmo-embed`",
    "analyze": "`elmo-analyze`",
    "finetune_classification": "`elmo-finetune-classification`",
    "finetune_ner": "`elmo-finetune-ner`",
    "continue": "`elmo-pretrain --init_from`",
}
# The cells that cannot make sense: (kind, door) -> the words of the one-line refusal (exit 2, nothing written).
REFUSED = {(kind, "continue"): "reads words through its own input dictionary"
           for kind in ("manylangs", "manylangs_words")}


def test_the_readme_names_every_kind_door_and_refusal():
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())  # lines joined
    for name in [*KINDS.values(), *DOORS.values(), *REFUSED.values()]:
        assert name in readme, f"README.md does not name {name!r} (tests/test_matrix.py checks it)"


# --------------------------------------------------------------------------------------------------
# The kinds of model
# --------------------------------------------------------------------------------------------------
def _convert(*args: str) -> None:
    code = cli("elmo-convert", list(args))
    assert code == 0, f"elmo-convert {' '.join(args)} exited {code}"


def _allennlp(root: Path) -> Path:
    from original_layout import options_for, write_original_layout

    options, weights = write_original_layout(root / "original", options_for("tiny"), seed=3)
    _convert("--options_file", str(options), "--weight_file", str(weights), "--output_dir", str(root / "model"))
    return root / "model"


def _manylangs(root: Path, **dims) -> Path:
    pytest.importorskip("elmoformanylangs", reason="the ELMoForManyLangs package (make installs it) is absent")
    import manylangs_fixture

    theirs = manylangs_fixture.write_model(root / "theirs", **dims)
    _convert("--manylangs_dir", str(theirs), "--output_dir", str(root / "model"))
    return root / "model"


def _jieba(root: Path) -> Path:
    pytest.importorskip("jieba", reason="jieba (the zh extra) is absent")
    torch.manual_seed(1)
    ElmoForPreTraining(tiny_config(vocab_size=30)).save_pretrained(root / "model")
    ElmoTokenizer(word_split="jieba").save_pretrained(root / "model")
    return root / "model"


def _corpus(path: Path, lines: int) -> Path:
    """Sentences of a small grammar, with the matrix's own sentences among them."""
    import random

    rng = random.Random(0)
    nouns, verbs = ["cat", "dog", "bank", "river", "money"], ["sat", "lends", "floods", "ran"]
    text = [f"The {rng.choice(nouns)} {rng.choice(verbs)} on the {rng.choice(nouns)} ." for _ in range(lines)]
    path.write_text("\n".join(text + RAW_SENTENCES) + "\n", encoding="utf-8")
    return path


def _pretrained(root: Path) -> Path:
    corpus = _corpus(root / "corpus.txt", 60)
    result = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", root / "run", "--preset", "tiny",
                                       "--max_steps", "4", "--per_device_batch_size", "4", "--unroll_steps", "8",
                                       "--disable_tqdm", "--report_to", "none"], cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


def _finetuned(root: Path) -> Path:
    base = _allennlp(root / "base")
    data = root / "train.tsv"
    data.write_text("label\ttext\n" + "".join(f"{i % 2}\t{line}\n" for i, line in enumerate(RAW_SENTENCES * 3)))
    assert cli("elmo-finetune-classification", [
        "--model_name_or_path", base, "--train_file", data, "--output_dir", root / "model", "--max_steps", "2",
        "--report_to", "none", "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "no"]) == 0
    return root / "model"


@pytest.fixture(scope="module", autouse=True)
def _word_splits_of_this_file():
    """The custom split is registered for this file's tests (as the commands' --word_split registers it in a
    process), and unregistered after them. Registered here, not where its model is built: the session's fixtures
    build every kind within whichever test asks first, and a test may not change the process for the next."""
    from elmo_hf.tokenization import WORD_SPLITTERS, check_word_split

    with pytest.MonkeyPatch.context() as patch:
        for registry in ("_functions", "_requirements"):
            patch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
        check_word_split(CUSTOM_SPLIT, allow_import=True)  # what the commands' --word_split does: import, register
        yield


def _custom_split(root: Path) -> Path:
    torch.manual_seed(2)  # the split is registered by _word_splits_of_this_file
    ElmoForPreTraining(tiny_config(vocab_size=30)).save_pretrained(root / "model")
    ElmoTokenizer(word_split=CUSTOM_SPLIT).save_pretrained(root / "model")
    return root / "model"


def _split_options(kind: str, option: str = "--word_split") -> list[str]:
    """A saved split of the user's own is never imported from the model's files: the commands are told it."""
    return [option, CUSTOM_SPLIT] if kind == "custom_split" else []


BUILDERS = {
    "allennlp": _allennlp,
    "manylangs": _manylangs,
    "manylangs_chars": lambda root: _manylangs(root, word_dim=0),
    "manylangs_words": lambda root: _manylangs(root, char_dim=0),
    "jieba": _jieba,
    "custom_split": _custom_split,
    "pretrained": _pretrained,
    "finetuned": _finetuned,
}


@pytest.fixture(scope="module")
def kind_dirs(tmp_path_factory) -> dict[str, Path]:
    """Every kind that can be built here; a kind whose package is missing is left out (its cells skip). Module-scoped,
    as the fixtures built from it: set up after this file's own registration of the custom split."""
    folders = {}
    for kind, build in BUILDERS.items():
        try:
            folders[kind] = build(tmp_path_factory.mktemp(kind))
        except pytest.skip.Exception:
            continue
    return folders


def _folder(kind_dirs, kind: str) -> Path:
    if kind not in kind_dirs:
        pytest.skip(f"the {kind!r} model could not be built here (its package is missing)")
    return kind_dirs[kind]


@pytest.fixture(scope="module")
def expected(kind_dirs) -> dict[str, list[np.ndarray]]:
    """Each kind's own forward, in this process: the last hidden state of every sentence, unpadded."""
    out = {}
    for kind, folder in kind_dirs.items():
        model, tokenizer = load_elmo(str(folder))
        out[kind] = [_own_vectors(model, tokenizer, sentence) for sentence in SENTENCES]
    return out


def _own_vectors(model, tokenizer, sentence: str) -> np.ndarray:
    with torch.no_grad():
        return model.eval()(**tokenizer(sentence, return_tensors="pt")).last_hidden_state[0].numpy()


# --------------------------------------------------------------------------------------------------
# The doors that need a fresh interpreter: one subprocess for every kind
# --------------------------------------------------------------------------------------------------
FRESH = """
import json, sys
import numpy as np, torch
from transformers import AutoModel, AutoTokenizer, pipeline
names, sentences, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
result = {}
for kind, name in names.items():
    extra = {}
    if kind.startswith("custom_split"):  # a split of the user's own: passed again where the model is loaded
        sys.path.append(sys.argv[4])
        from matrix_splits import lowercase_words
        extra = {"word_split": lowercase_words}
    tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=True, **extra)
    model = AutoModel.from_pretrained(name, trust_remote_code=True).eval()
    with torch.no_grad():
        batch = tokenizer(sentences, return_tensors="pt", padding=True)
        states = model(**batch).last_hidden_state
    lengths = batch["attention_mask"].sum(1).tolist()
    result[kind + "/model"] = [states[i, :n].numpy() for i, n in enumerate(lengths)]
    if not kind.endswith("@hub"):
        extractor = pipeline("feature-extraction", model=model, tokenizer=tokenizer)
        result[kind + "/pipeline"] = [np.asarray(extractor(s))[0] for s in sentences]
np.savez(out, **{f"{key}/{i}": v for key, vectors in result.items() for i, v in enumerate(vectors)})
"""


def _run_fresh(names: dict[str, str], out: Path, env: dict[str, str], cwd: Path) -> dict[str, list[np.ndarray]]:
    result = subprocess.run([sys.executable, "-c", _NO_PROJECT + FRESH, json.dumps(names), json.dumps(SENTENCES),
                             str(out), str(TESTS)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"the fresh interpreter failed:\n{result.stderr[-6000:]}"
    stored = np.load(out)
    vectors: dict[str, list[np.ndarray]] = {}
    for key in sorted(stored.files, key=lambda k: (k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1]))):
        vectors.setdefault(key.rsplit("/", 1)[0], []).append(stored[key])
    return vectors


@pytest.fixture(scope="module")
def fresh_vectors(kind_dirs, tmp_path_factory) -> dict[str, list[np.ndarray]]:
    """Every kind pushed to a Hub on 127.0.0.1, then loaded as remote code by folder and by repository id in a
    fresh interpreter that cannot import this project."""
    from elmo_hf.tools.hub.hub_push import push_folder

    work = tmp_path_factory.mktemp("fresh")
    server = HubServer(work / "hub", token=TOKEN).start()
    try:
        previous = huggingface_hub.constants.HF_HUB_DISABLE_XET
        huggingface_hub.constants.HF_HUB_DISABLE_XET = True  # the local Hub speaks classic LFS only
        try:
            for kind, folder in kind_dirs.items():
                push_folder(folder, f"matrix/{kind}", token=TOKEN, endpoint=server.url)
        finally:
            huggingface_hub.constants.HF_HUB_DISABLE_XET = previous
        names = {kind: str(folder) for kind, folder in kind_dirs.items()}
        names.update({f"{kind}@hub": f"matrix/{kind}" for kind in kind_dirs})
        env = {k: v for k, v in clean_env().items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
        env.update(HF_ENDPOINT=server.url, HF_HOME=str(work / "home"), HF_HUB_DISABLE_XET="1",
                   HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", OMP_NUM_THREADS="1")
        return _run_fresh(names, work / "vectors.npz", env, cwd=work)
    finally:
        server.stop()


def _assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    """The vectors of another route (a fresh interpreter, the pipeline, the Hub) against the model's own forward."""
    assert len(got) == len(want)
    for number, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, (a.shape, b.shape)
        assert_close(a, b, REORDERED, what=f"{what}, sentence {number}")


@pytest.mark.parametrize("kind", KINDS)
def test_remote_code_in_a_fresh_interpreter(kind, kind_dirs, expected, fresh_vectors):
    _folder(kind_dirs, kind)
    _assert_same(fresh_vectors[f"{kind}/model"], expected[kind], f"{kind}, remote code")


@pytest.mark.parametrize("kind", KINDS)
def test_feature_extraction_pipeline(kind, kind_dirs, expected, fresh_vectors):
    _folder(kind_dirs, kind)
    _assert_same(fresh_vectors[f"{kind}/pipeline"], expected[kind], f"{kind}, pipeline")


@pytest.mark.parametrize("kind", KINDS)
def test_pushed_to_a_hub_and_loaded_back_by_id(kind, kind_dirs, expected, fresh_vectors):
    _folder(kind_dirs, kind)
    _assert_same(fresh_vectors[f"{kind}@hub/model"], expected[kind], f"{kind}, from the Hub")


# --------------------------------------------------------------------------------------------------
# Sentence vectors
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_sentence_vectors_and_sentence_transformer(kind, kind_dirs, tmp_path):
    from elmo_hf.tools.embedding.sentence_vectors import save_for_sentence_transformers, sentence_vectors

    pytest.importorskip("sentence_transformers", reason="sentence-transformers (an extra) is absent")
    from sentence_transformers import SentenceTransformer

    folder = _folder(kind_dirs, kind)
    model, tokenizer = load_elmo(str(folder))
    got = sentence_vectors(model, tokenizer, SENTENCES)
    want = []
    with torch.no_grad():  # the default pooling: the mean of the layers, averaged over the words (no <S>, </S>)
        for sentence in SENTENCES:
            words = len(tokenizer(sentence, add_special_tokens=False)["input_ids"])
            batch = tokenizer(sentence, return_tensors="pt")
            layers = torch.stack(model.eval()(**batch, output_hidden_states=True).hidden_states)[:, 0]
            boundary = (layers.shape[1] - words) // 2
            want.append(layers.mean(0)[boundary: boundary + words].mean(0))
    assert_close(got, torch.stack(want), REORDERED, what=f"{kind}, sentence_vectors against the layers by hand")
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    save_for_sentence_transformers(copy)
    extra = {}
    if kind == "custom_split":  # remote code has its own registry of splits: the function is passed again
        from matrix_splits import lowercase_words

        extra = {"tokenizer_kwargs": {"word_split": lowercase_words}}
    encoded = SentenceTransformer(str(copy), trust_remote_code=True, device="cpu", **extra).encode(SENTENCES)
    assert_close(encoded, got, REORDERED, what=f"{kind}, SentenceTransformer against sentence_vectors")


# --------------------------------------------------------------------------------------------------
# elmo-embed and elmo-analyze: the tokenizer's own word split by default
# --------------------------------------------------------------------------------------------------
def _own_layers(model, tokenizer, line: str) -> np.ndarray:
    """(L + 1, words, 2P): every layer of the model's own forward on `line`, sentence markers removed."""
    words = len(tokenizer(line, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        hidden = model.eval()(**tokenizer(line, return_tensors="pt"), output_hidden_states=True).hidden_states
    layers = torch.stack(hidden)[:, 0]
    start = (layers.shape[1] - words) // 2
    return layers[:, start: start + words].numpy()


@pytest.fixture(scope="module")
def raw_text(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "lines.txt"
    path.write_text("\n".join(RAW_SENTENCES) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("cache", ["cache", "no_cache"])
@pytest.mark.parametrize("kind", KINDS)
def test_embed_command(kind, cache, kind_dirs, raw_text, tmp_path):
    import h5py

    folder = _folder(kind_dirs, kind)
    out = tmp_path / "vectors.hdf5"
    options = ["--token_cache_size", "0"] if cache == "no_cache" else []
    assert cli("elmo-embed", [raw_text, out, "--model", folder, "--quiet", *options, *_split_options(kind)]) == 0
    model, tokenizer = load_elmo(str(folder))
    with h5py.File(out, "r") as stored:
        for number, line in enumerate(RAW_SENTENCES):
            want = _own_layers(model, tokenizer, line)
            got = stored[str(number)][()]
            assert got.shape == want.shape, (line, got.shape, want.shape)
            assert_close(got, want, REORDERED, what=f"{kind}, {cache}, line {number}")


@pytest.mark.parametrize("kind", KINDS)
def test_analyze_command(kind, kind_dirs, raw_text, tmp_path):
    folder = _folder(kind_dirs, kind)
    out = tmp_path / "analysis"
    assert cli("elmo-analyze", [raw_text, "--model", folder, "--output_dir", out, "--min_count", "2",
                                "--anisotropy_pairs", "10", "--quiet", *_split_options(kind)]) == 0
    got = json.loads((out / "contextuality.json").read_text())["words"]["bank"]["self_similarity"]
    # "bank" twice in one line: its self-similarity is the cosine of its two vectors, layer by layer
    model, tokenizer = load_elmo(str(folder))
    line = RAW_SENTENCES[2]
    positions = [i for i, word in enumerate(tokenizer.tokenize(line)) if word == "bank"]
    vectors = torch.from_numpy(_own_layers(model, tokenizer, line))[:, positions]
    want = torch.nn.functional.cosine_similarity(vectors[:, 0], vectors[:, 1], dim=-1)
    assert_close(got, want, STATISTIC, what=f"{kind}, self-similarity of 'bank'")


# --------------------------------------------------------------------------------------------------
# Fine-tuning (a few steps: the loss goes down, predictions are the model's own argmax) and continued pretraining
# --------------------------------------------------------------------------------------------------
TAGGED = [("The", "O"), ("bank", "B-ORG"), ("of", "I-ORG"), ("England", "I-ORG"), ("lends", "O"), ("money", "O")]


def _losses(output_dir: Path) -> list[float]:
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return [entry["loss"] for entry in state["log_history"] if "loss" in entry]


def _finetune_args(folder: Path, train: Path, out: Path, test: Path) -> list[str]:
    return ["--model_name_or_path", str(folder), "--train_file", str(train), "--output_dir", str(out),
            "--do_predict", "--test_file", str(test), "--max_steps", "12", "--learning_rate", "0.01",
            "--per_device_train_batch_size", "4", "--logging_steps", "1", "--report_to", "none", "--use_cpu",
            "--disable_tqdm", "true", "--save_strategy", "no", "--seed", "0"]


def _finetune_options(kind: str) -> list[str]:
    return _split_options(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_finetune_classification_command(kind, kind_dirs, tmp_path):
    folder = _folder(kind_dirs, kind)
    train, test = tmp_path / "train.tsv", tmp_path / "test.txt"
    examples = [(int("bank" in line), line) for line in RAW_SENTENCES + SENTENCES] * 2
    train.write_text("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in examples), encoding="utf-8")
    test.write_text("\n".join(RAW_SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert cli("elmo-finetune-classification", _finetune_args(folder, train, out, test) + _finetune_options(kind)) == 0
    losses = _losses(out)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    model, tokenizer = load_elmo(str(out), task="sequence-classification")
    with torch.no_grad():
        want = [model.config.id2label[int(model(**tokenizer(line, return_tensors="pt")).logits.argmax())]
                for line in RAW_SENTENCES]
    assert (out / "predictions.txt").read_text(encoding="utf-8").splitlines() == [str(w) for w in want]


@pytest.mark.parametrize("kind", KINDS)
def test_finetune_ner_command(kind, kind_dirs, tmp_path):
    folder = _folder(kind_dirs, kind)
    train, test = tmp_path / "train.conll", tmp_path / "test.txt"
    train.write_text("\n".join(f"{w} {t}" for w, t in TAGGED) * 1 + "\n\n" + "\n".join(
        f"{w} O" for w in RAW_SENTENCES[0].split()) + "\n", encoding="utf-8")
    sentence = " ".join(w for w, _ in TAGGED)
    test.write_text(sentence + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert cli("elmo-finetune-ner", _finetune_args(folder, train, out, test) + _finetune_options(kind)) == 0
    losses = _losses(out)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    model, tokenizer = load_elmo(str(out), task="token-classification")
    batch = tokenizer(sentence.split(), is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        ids = model(**batch).logits[0].argmax(-1).tolist()
    want = [model.config.id2label[ids[i]] for i, w in enumerate(batch.word_ids(0)) if w is not None]
    written = [line.split(" ") for line in (out / "predictions.txt").read_text(encoding="utf-8").splitlines() if line]
    assert [tag for _, tag in written] == want  # each word (as the split gives it) beside its tag


@pytest.mark.parametrize("kind", KINDS)
def test_continued_pretraining(kind, kind_dirs, tmp_path):
    folder = _folder(kind_dirs, kind)
    refusal = REFUSED.get((kind, "continue"))
    corpus = _corpus(tmp_path / "corpus.txt", 40)
    out = tmp_path / "continued"
    result = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", out, "--init_from", folder,
                                       "--max_steps", "3", "--per_device_batch_size", "4", "--unroll_steps", "8",
                                       "--disable_tqdm", "--report_to", "none", "--logging_steps", "1",
                                       *_split_options(kind)], cwd=REPO)
    if refusal is not None:
        assert result.returncode == 2 and not out.exists(), result.stderr[-2000:]
        last = result.stderr.strip().splitlines()[-1]
        assert refusal in last and "Traceback" not in result.stderr
        return
    assert result.returncode == 0, result.stderr[-3000:]
    start, start_tokenizer = load_elmo(str(folder))
    continued, tokenizer = load_elmo(str(out))
    # the text is split as the model's tokenizer splits it, and the continued model's tokenizer says so
    saved = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))["word_split"]
    assert saved == json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("word_split", saved)
    assert tokenizer.tokenize(RAW_SENTENCES[2]) == start_tokenizer.tokenize(RAW_SENTENCES[2])
    # the biLM starts from the folder's weights: same shapes, and training moved them
    before, after = start.state_dict(), continued.state_dict()
    shared = [name for name in before if name in after]
    assert shared and all(before[name].shape == after[name].shape for name in shared)
    assert any(not torch.equal(before[name], after[name]) for name in shared)
