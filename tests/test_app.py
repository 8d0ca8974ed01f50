"""elmo-app, the demo page: its views' functions called directly (the numbers are the model's own vectors, bad input
is a message, one failing request leaves the others working), and once in a real headless Chromium driven through
the real command (tests/app_browser.py; skipped, saying why, where the browser is not installed).

The cosines are compared to STATISTIC (tests/tolerances.py), the PCA (float64) to FLOAT64, the numbers the page shows
to their 4 decimals (DISPLAYED, below)."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import re
import signal
from pathlib import Path

import pytest
import torch
from app_browser import browser_missing, chromium, element, fill, run_view, running_app
from conftest import cli, tiny_model
from PIL import Image
from tolerances import FLOAT64, REORDERED, STATISTIC, Bound, assert_close

from elmo_hf.modeling_elmo import ElmoModel
from elmo_hf.tokenization import ElmoTokenizer, build_vocab, split_words
from elmo_hf.tools.analysis import analyze
from elmo_hf.tools.app import figures, server
from elmo_hf.tools.app.examples import DEMO_ENGLISH, GENERAL, examples_for
from elmo_hf.tools.app.neighbours import nearest_neighbours
from elmo_hf.tools.app.session import Limits, load_session
from elmo_hf.tools.app.similarity import (
    joined,
    project_2d,
    sentences_html,
    word_similarities,
    word_similarity,
)
from elmo_hf.train.sense_corpus import generate_corpus

BANK = "He sat on the bank of the river .\nThe bank , the bank and the money .\nA cat ."
# A cosine the page shows with 4 decimals: half its last decimal (5e-5) off the value computed, which is itself
# within STATISTIC of the cosine of the model's own vectors.
DISPLAYED = Bound("4 decimals shown", 5e-5 + STATISTIC.value, scaled=False,
                  rule="half the 4th decimal (5e-5), plus STATISTIC for the cosine computed")


@pytest.fixture(scope="module")
def session(tiny_model_dir):
    return load_session(str(tiny_model_dir))


@pytest.fixture(scope="module")
def reference(tiny_model_dir):
    """The model's own vectors: `ElmoModel` loaded afresh, one sentence at a time -> (L + 1, n, 2P)."""
    model, tokenizer = ElmoModel.from_pretrained(tiny_model_dir).eval(), ElmoTokenizer.from_pretrained(tiny_model_dir)

    def vectors(sentence: str, split: str = "punctuation") -> torch.Tensor:
        words = split_words(sentence, split)
        with torch.no_grad():
            out = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True)
        return torch.stack(out.hidden_states)[:, 0, 1 : len(words) + 1]

    return vectors


def _cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


def test_similarity_numbers_are_the_cosines_of_the_models_own_vectors(session, reference):
    message, marked, table, image, numbers = session_handlers(session)["similarity"](BANK, "bank", "punctuation")
    assert message == "" and isinstance(image, Image.Image) and image.size[0] > 600
    result = word_similarity(session, BANK, "bank", "punctuation")
    assert numbers["cosine"] == result.cosine.tolist() and [o["label"] for o in numbers["occurrences"]] == [
        "S1", "S2.1", "S2.2"]
    assert [o.label for o in result.occurrences] == ["S1", "S2.1", "S2.2"]  # "A cat ." holds no bank
    first, second = reference(BANK.splitlines()[0]), reference(BANK.splitlines()[1])
    expected = {(0, 1): _cosines(first[:, 4], second[:, 1]), (0, 2): _cosines(first[:, 4], second[:, 4]),
                (1, 2): _cosines(second[:, 1], second[:, 4])}
    for (i, j), cosines in expected.items():
        assert_close(result.cosine[:, i, j], cosines, STATISTIC, what=f"cosines of occurrences {i}, {j}")
        assert_close(result.cosine[:, j, i], cosines, STATISTIC, what=f"cosines of occurrences {j}, {i}")
        # the page shows its own numbers with 4 decimals (formatting the reference's could round the other way)
        for layer, value in enumerate(result.cosine[:, i, j].tolist()):
            assert f"<td data-pair='{i}-{j}' data-layer='{layer}'>{value:.4f}</td>" in table
    assert_close(result.cosine[0], torch.ones(3, 3, dtype=torch.float64), STATISTIC, what="layer 0: no context")
    assert not torch.allclose(result.cosine[1:], torch.ones_like(result.cosine[1:]), atol=1e-3)
    assert marked.count("<mark>") == 3 and "S2.2" in marked


def test_projection_is_the_pca_of_the_occurrences():
    torch.manual_seed(0)
    points = torch.randn(3, 3, 8)  # three layers of three points: a plane, so two components keep every distance
    points[0] = points[0, :1]  # layer 0: one vector three times
    coords, explained = project_2d(points)
    for layer in (1, 2):
        assert_close(torch.cdist(coords[layer], coords[layer]),
                     torch.cdist(points[layer].double(), points[layer].double()), FLOAT64,
                     what=f"distances, layer {layer}")
        assert_close(explained[layer].sum(), 1.0, FLOAT64, what=f"variance explained, layer {layer}")
        assert explained[layer, 0] >= explained[layer, 1]
    assert coords[0].abs().max() == 0 and explained[0].tolist() == [0.0, 0.0]


def test_the_figure_draws_each_cosine_in_its_colour(session):
    """The similarity figure (Pillow): one heat map per layer whose cells have the colour of their cosine on
    matplotlib's RdBu_r scale (-1 to 1), and one point per distinct vector below it."""
    from matplotlib import colormaps

    result = word_similarity(session, BANK, "bank", "punctuation")
    image = figures.similarity_figure(result).convert("RGB")
    layers, n = result.cosine.shape[0], len(result.occurrences)
    assert image.size == (figures.MARGIN + figures.PANEL * layers + figures.COLOURBAR, figures.HEIGHT)
    for layer in range(layers):
        for i in range(n):
            for j in range(n):
                left, top, _, _ = figures.heat_map_cell(layer, n, i, j)
                shown = image.getpixel((round(left) + 4, round(top) + 4))  # inside the cell, clear of its number
                value = float(result.cosine[layer, i, j])
                expected = [round(255 * c) for c in colormaps["RdBu_r"](round((value + 1) / 2 * 255) / 255)[:3]]
                assert max(abs(a - b) for a, b in zip(shown, expected)) <= 2, (layer, i, j, shown, expected)


def session_handlers(session):
    return server.handlers(session)


@pytest.mark.parametrize("text, word, split, expected", [
    ("", "bank", "punctuation", "the sentence box is empty"),
    ("   \n\n", "bank", "punctuation", "the sentence box is empty"),
    ("A bank .\nA bank .", "", "punctuation", "type the word to compare"),
    ("A bank .\nA river .", "money", "punctuation", "'money' is not a word of the sentences"),
    ("A bank .\nA river .", "bank", "punctuation", "'bank' occurs once"),
    ("A bank .\nA bank .", "river bank", "punctuation", "'river bank' is 2 words"),
    ("他在银行工作。\n银行很大。", "银行", "punctuation", "(银 | 行)"),
    ("A bank .\nA bank .", "bank", "no-such-split", "the word split must be one of"),
    ("a" * 10_000, "bank", "punctuation", "has 10,000 characters: only the first 2,000 were used"),
])
def test_bad_input_is_a_message_in_the_page(session, text, word, split, expected):
    message, *others = session_handlers(session)["similarity"](text, word, split)
    assert message.startswith("❌") and expected in message and "Traceback" not in message
    assert others == [None] * 4


def test_long_input_is_capped_with_a_message(session):
    text = "\n".join(f"The bank number {i} ." for i in range(200))  # 200 sentences, 4,289 characters
    message, _, table, *_ = session_handlers(session)["similarity"](text, "bank", "punctuation")
    assert "4,289 characters: only the first 2,000 were used" in message
    assert "sentences: only the first 20 were used" in message
    assert "occurs 20 times" not in message and table.count("<tr><th>S") == 20 * 19 // 2


def test_uploads_binary_undecodable_or_too_large_are_messages(session, tmp_path):
    answer = session_handlers(session)["contextuality"]
    binary = tmp_path / "weights.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert "weights.bin is a binary file" in answer("", str(binary), "utf-8", "whitespace", 2)[0]
    latin = tmp_path / "latin.txt"
    latin.write_bytes("a café bank\nthe bank\n".encode("latin-1"))
    message = answer("", str(latin), "utf-8", "whitespace", 2)[0]
    assert "latin.txt: line 1, byte 6 of the line is not valid utf-8" in message
    message, image, table = answer("", str(latin), "latin-1", "whitespace", 2)
    assert message == "" and "data-measure" in table  # decoded with the encoding chosen in the page
    assert "not read line by line" in answer("", str(latin), "utf-16", "whitespace", 2)[0]
    small = dataclasses.replace(session, limits=Limits(max_upload_bytes=10))
    assert "has 21 bytes: upload at most 10" in server.handlers(small)["contextuality"](
        "", str(latin), "latin-1", "whitespace", 2)[0]


def test_a_failing_request_leaves_the_app_working(session, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    answer = session_handlers(session)["similarity"]
    monkeypatch.setattr(session.model, "forward", broken)
    with caplog.at_level(logging.ERROR, logger="elmo-app"):
        message, *others = answer(BANK, "bank", "punctuation")
    assert message == f"❌ {server.FAILED}" and others == [None] * 4
    assert "out of memory" in caplog.text  # the traceback goes to the server's log, not to the page
    monkeypatch.undo()
    assert answer(BANK, "bank", "punctuation")[0] == ""


def test_concurrent_similarity_requests_share_one_forward_pass_and_get_their_own_numbers(session, monkeypatch):
    """What the page's batched event calls with the requests Gradio gathered: one forward pass for all of them, each
    its own numbers (the sentence's vectors alone, to float32 reordering), a wrong one its own message in place."""
    texts = [BANK, "The bank lent money .\nWe sat on the river bank .", "", "A bank .\nA bank of the river ."]
    rows = []
    forward = session.model.forward
    monkeypatch.setattr(session.model, "forward", lambda ids, **kw: rows.append(len(ids)) or forward(ids, **kw))
    messages, marked, tables, figures, numbers = server.handlers(session)["similarity_batch"](
        texts, ["bank"] * 4, ["punctuation"] * 4)
    assert rows == [2 + 2 + 2]  # one forward pass; the sentences without the word (and the empty box) do not run
    assert messages[2] == "❌ the sentence box is empty: type or paste one sentence per line"
    assert [marked[2], tables[2], figures[2], numbers[2]] == [None] * 4
    monkeypatch.undo()
    for k in (0, 1, 3):
        alone = word_similarity(session, texts[k], "bank", "punctuation")
        assert messages[k] == "" and isinstance(figures[k], Image.Image) and marked[k].count("<mark>") == len(
            alone.occurrences)
        assert_close(numbers[k]["cosine"], alone.cosine, STATISTIC, what=f"request {k}: cosines, batched and alone")
    batched = word_similarities(session, [(t, "bank", "punctuation") for t in texts])
    assert isinstance(batched[2], server.AppInputError)
    for k in (0, 1, 3):
        alone = word_similarity(session, texts[k], "bank", "punctuation")
        assert_close(batched[k].vectors, alone.vectors, REORDERED, what=f"request {k}: vectors, batched and alone")


def test_a_failing_batch_fails_its_requests_and_the_next_batch_works(session, monkeypatch, caplog):
    answer = server.handlers(session)["similarity_batch"]

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(session.model, "forward", broken)
    with caplog.at_level(logging.ERROR, logger="elmo-app"):
        messages, *others = answer([BANK, BANK], ["bank", "bank"], ["punctuation", "punctuation"])
    assert messages == [f"❌ {server.FAILED}"] * 2 and others == [[None, None]] * 4
    assert caplog.text.count("a batch of 2 similarity requests failed") == 1 and "out of memory" in caplog.text
    monkeypatch.undo()
    assert answer([BANK], ["bank"], ["punctuation"])[0] == [""]
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="elmo-app"):  # an API client sends a number for the word
        messages, _, tables, *_ = answer([BANK, BANK], [5, "bank"], ["punctuation", "punctuation"])
    assert messages == [f"❌ {server.FAILED}", ""] and tables[0] is None and "data-pair" in tables[1]
    assert "a request failed" in caplog.text and "AttributeError" in caplog.text


@pytest.fixture(scope="module")
def demo_like_model(tmp_path_factory):
    """A tiny model saved as `elmo-demo` saves its model: with the word vocabulary of the demo's generated corpus
    (seed 0, 20,000 sentences: what `make demo` trains on) and demo_settings.json beside the model folder."""
    out = tmp_path_factory.mktemp("demo")
    torch.manual_seed(0)
    tiny_model().save_pretrained(out / "model")
    ElmoTokenizer(word_vocab=build_vocab(generate_corpus(20_000, seed=0))).save_pretrained(out / "model")
    (out / "demo_settings.json").write_text('{"language": "en", "train_file": null, "max_steps": 500, "seed": 0, '
                                            '"num_sentences": 20000}\n')
    return out / "model"


def test_the_examples_use_the_words_of_the_models_vocabulary(demo_like_model, session):
    """A model with a word vocabulary gets the example set whose words it knows (the demo's model: its generated
    corpus's words, 222 of them); one without gets the general examples. The default example uses its word in two
    senses, two sentences each (the same-sense pair is the reference); the page names what the model was trained on."""
    demo = load_session(str(demo_like_model))
    vocabulary = set(demo.tokenizer.word_vocab)
    assert len(vocabulary) == 222
    examples, known = examples_for(demo.tokenizer)
    assert examples is DEMO_ENGLISH and known == 1.0
    for text, split in examples.texts():
        unknown = {w for line in text.splitlines() for w in split_words(line, split)} - vocabulary
        assert not unknown, f"example words outside the demo model's vocabulary: {sorted(unknown)}"
    text, word, split = examples.similarity[0]
    per_sentence = [split_words(line, split).count(word) for line in text.splitlines()]
    assert per_sentence == [1, 1, 1, 1]
    assert examples_for(session.tokenizer) == (GENERAL, None)  # no vocabulary: the general examples
    if importlib.util.find_spec("jieba") is not None:  # a Chinese model without a vocabulary opens on Chinese
        chinese, _ = examples_for(ElmoTokenizer(word_split="jieba"))
        assert chinese.similarity[0] == ["他在银行工作。\n这家银行的利率很高。\n河岸边有很多树。", "银行", "jieba"]
        assert chinese.split == "jieba" and "银行" in split_words(chinese.query, "jieba")
    summary = server.model_summary(demo)
    assert "<br>Trained by elmo-demo on its generated English corpus of 20,000 sentences, 500 steps" in summary
    assert "a word vocabulary of 222 words" in summary
    assert "<br>" not in server.model_summary(session)  # nothing known, nothing said
    demo_page = server.build_app(demo)
    values = {c.get("props", {}).get("elem_id"): c.get("props", {}).get("value")
              for c in demo_page.config["components"]}
    assert values["sim-text"] == text and values["sim-word"] == word and values["nn-corpus"] == examples.corpus


def test_nearest_neighbours_are_ranked_by_the_models_cosine(session, reference):
    corpus = "The bank lent money .\nThe river bank was muddy .\nA bank of the river .\nThe cat sat ."
    query = "He fished from the bank ."
    result = nearest_neighbours(session, corpus, query, "bank", "whitespace", layer=2, k=10)
    q = reference(query)[2, 4]
    expected = sorted(((_cosines(q, reference(line)[2, i]).item(), s, i) for s, line in enumerate(corpus.splitlines())
                       for i, w in enumerate(line.split()) if w == "bank"), reverse=True)
    assert [(n.sentence, n.position) for n in result.neighbours] == [(s, i) for _, s, i in expected]
    assert_close([n.cosine for n in result.neighbours], [c for c, _, _ in expected], STATISTIC, what="neighbours")
    index = result.index
    every_word = nearest_neighbours(session, corpus, query, "bank", "whitespace", layer=0, k=3, same_word_only=False)
    assert every_word.index is index  # the corpus was embedded once
    assert [n.word for n in every_word.neighbours] == ["bank"] * 3
    assert_close(every_word.neighbours[0].cosine, 1.0, STATISTIC, what="layer 0, the same word")
    assert session.model.token_cache_info()["size"] > 0  # the character CNN ran once per distinct word
    own = nearest_neighbours(session, corpus, "", "bank", "whitespace", layer=1, k=10)
    assert (0, 1) not in [(n.sentence, n.position) for n in own.neighbours] and len(own.neighbours) == 2
    message, html = session_handlers(session)["neighbours"](corpus, None, "utf-8", query, "cat", "whitespace", 1,
                                                             5, True)
    assert "'cat' is not a word of the sentences" in message and html is None


def test_contextuality_is_elmo_analyzes(session, tmp_path):
    text = "\n".join(["the bank lent money", "the river bank", "a bank of fish", "the money was lent"] * 2)
    message, image, table = session_handlers(session)["contextuality"](text, None, "utf-8", "whitespace", 2)
    assert message == "" and isinstance(image, Image.Image)
    corpus = tmp_path / "text.txt"
    corpus.write_text(text + "\n")
    expected = analyze(session.model, session.tokenizer, corpus, min_count=2, max_words=200, quiet=True)
    for layer, value in enumerate(expected["self_similarity"]):
        assert f"<td data-measure='self_similarity' data-layer='{layer}'>{value:.4f}</td>" in table
    message = session_handlers(session)["contextuality"]("one two three", None, "utf-8", "whitespace", 2)[0]
    assert message.startswith("❌ no word occurs 2 times in the text")


def test_chinese_per_ideograph_and_jieba(session):
    text = "他在银行工作。\n我们一起步行去公园。\n这家银行的利率很高。"
    per_character = word_similarity(session, text, "行", "punctuation")
    assert [o.label for o in per_character.occurrences] == ["S1", "S2", "S3"]
    # shown as written, without a space between the ideographs it was split into (the word marked)
    shown = re.sub(r"<sub>.*?</sub>|<[^>]+>", "", sentences_html(per_character))
    assert shown == "他在银行工作。我们一起步行去公园。这家银行的利率很高。", shown
    assert joined(["the", "bank", ",", "它", "很", "好", "ok"]) == "the bank ,它很好ok"  # no space next to CJK
    pytest.importorskip("jieba")
    words = word_similarity(session, text, "银行", "jieba")
    assert [(o.sentence, o.word) for o in words.occurrences] == [(0, "银行"), (2, "银行")]


def test_page_builds_every_view(session):
    pytest.importorskip("gradio")
    demo = server.build_app(session)
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert {"sim-text", "sim-word", "sim-run", "sim-table", "nn-run", "nn-result", "ctx-run", "ctx-table"} <= ids
    assert server.repeated_words("A bank .\nThe bank , the river .", "punctuation") == ["bank"]  # what "pick" offers
    assert "RANDOM WEIGHTS" not in server.model_summary(session)
    preset = load_session("tiny")
    assert "RANDOM WEIGHTS" in server.model_summary(preset)


def test_command_refuses_a_model_it_cannot_load(caplog, tmp_path):
    with caplog.at_level(logging.ERROR):
        assert cli("elmo-app", ["--model", tmp_path / "missing", "--port", "7999"]) == 2
    assert "--model: model" in caplog.text and "not found" in caplog.text
    assert cli("elmo-app", ["--model", "tiny", "--port", "0"]) == 2


def _shown(html_text: str, attribute: str) -> dict[str, float]:
    """The numbers of a table the page shows, by the cell's `attribute` (data-rank, data-layer ...)."""
    return {key: float(value) for key, value in re.findall(rf"{attribute}='([^']+)'>(-?[0-9.]+)<", html_text)}


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    """One real `elmo-app` server for the tests that reach it over HTTP (an API client, a browser: each start costs
    seconds of imports); it must end on SIGTERM with its status 143, checked when the file's tests are done."""
    with running_app(tiny_model_dir) as (url, process):
        yield url
    assert process.returncode == 128 + signal.SIGTERM, process.stderr.read()[-2000:]


@pytest.mark.slow
def test_the_api_endpoints_of_the_real_server(served, tiny_model_dir, reference, tmp_path):
    """`elmo-app` on a free 127.0.0.1 port, called by name with gradio_client as an API user does: the similarity
    endpoint's unrounded cosines are the model's own, requests sent at once each get their own, and the neighbours
    and contextuality endpoints answer with the model's numbers."""
    pytest.importorskip("gradio_client")
    from gradio_client import Client

    sentences = ["The bank lent money .", "We sat on the river bank .", "A bank of fish swam by ."]
    client = Client(served, verbose=False, download_files=str(tmp_path))
    api = client.view_api(print_info=False, return_format="dict")
    assert set(api["named_endpoints"]) == {"/similarity", "/neighbours", "/contextuality"}
    assert not api["unnamed_endpoints"]
    requests = ["\n".join(sentences[:2]), "\n".join(sentences[1:]), "", "\n".join(sentences[::2])]
    jobs = [client.submit(text, "bank", "punctuation", api_name="/similarity") for text in requests]
    answers = [job.result(timeout=300) for job in jobs]
    for text, (message, marked, table, figure, numbers) in zip(requests, answers):
        if not text:
            assert message.startswith("❌ the sentence box is empty") and numbers is None
            continue
        first, second = (reference(line) for line in text.splitlines())
        expected = _cosines(first[:, first_bank(text, 0)], second[:, first_bank(text, 1)])
        assert message == "" and marked.count("<mark>") == 2
        assert [o["label"] for o in numbers["occurrences"]] == ["S1", "S2"]
        assert_close([layer[0][1] for layer in numbers["cosine"]], expected, STATISTIC,
                     what=f"the /similarity cosines of {text!r}")
        assert table.count("data-pair='0-1'") == len(expected) and Image.open(figure).size[0] > 600
    corpus = "The bank lent money .\nThe river bank was muddy .\nA bank of the river .\nThe cat sat ."
    query = "He fished from the bank ."
    message, html_text = client.predict(corpus, None, "utf-8", query, "bank", "whitespace", 2, 10, True,
                                        api_name="/neighbours")
    q = reference(query)[2, 4]
    expected = sorted((_cosines(q, reference(line)[2, i]).item() for line in corpus.splitlines()
                       for i, w in enumerate(line.split()) if w == "bank"), reverse=True)
    shown = _shown(html_text, "data-rank")
    assert "corpus: 4 sentences" in message and list(shown) == ["1", "2", "3"]
    assert_close(list(shown.values()), expected, DISPLAYED, what="the /neighbours cosines")
    text = "\n".join(["the bank lent money", "the river bank", "a bank of fish", "the money was lent"] * 2)
    message, figure, table = client.predict(text, None, "utf-8", "whitespace", 2, api_name="/contextuality")
    corpus_file = tmp_path / "text.txt"
    corpus_file.write_text(text + "\n")
    model, tokenizer = (ElmoModel.from_pretrained(tiny_model_dir).eval(),
                        ElmoTokenizer.from_pretrained(tiny_model_dir))
    analysed = analyze(model, tokenizer, corpus_file, min_count=2, max_words=200, quiet=True)
    shown = {k: v for k, v in re.findall(r"data-measure='self_similarity' data-layer='(\d)'>(-?[0-9.]+)<", table)}
    assert message == "" and Image.open(figure).size[0] > 300
    assert_close([float(shown[str(k)]) for k in range(len(analysed["self_similarity"]))],
                 analysed["self_similarity"], DISPLAYED, what="the /contextuality self-similarity")


def first_bank(text: str, line: int) -> int:
    return text.splitlines()[line].split().index("bank")


@pytest.mark.slow
def test_the_page_in_a_real_browser(served, reference):
    """`elmo-app` serving the tiny model; Chromium types two sentences and a word, and reads the numbers shown."""
    reason = browser_missing()
    if reason:
        pytest.skip(f"browser test of elmo-app skipped: {reason}")
    sentences = ["The bank lent money .", "We sat on the river bank ."]
    with chromium() as driver:
        driver.get(served)
        assert "Model:" in element(driver, "#model-summary").text and "RANDOM" not in driver.page_source
        fill(driver, "#sim-text", "\n".join(sentences))
        fill(driver, "#sim-word", "bank")
        _, cells = run_view(driver, "sim", "td[data-layer]")
        shown = {int(c.get_attribute("data-layer")): float(c.text) for c in cells}
        expected = _cosines(reference(sentences[0])[:, 1], reference(sentences[1])[:, 5])
        assert sorted(shown) == list(range(len(expected)))
        assert_close([shown[layer] for layer in sorted(shown)], expected, DISPLAYED, what="the cosines the page shows")
        fill(driver, "#sim-text", "")
        message, cells = run_view(driver, "sim", "td[data-layer]")
        assert "❌ the sentence box is empty" in message and not cells
        fill(driver, "#sim-text", "\n".join(sentences[::-1]))
        message, cells = run_view(driver, "sim", "td[data-layer]")  # the error stopped nothing
        assert len(cells) == 3 and "❌" not in message


def test_every_image_the_docs_show_is_there_and_the_app_page_shows_each_view():
    """Every image linked from the README and docs/ opens as an image; docs/app.md shows a screenshot of each view
    (tests/app_browser.py takes them from the running page)."""
    root = Path(__file__).resolve().parents[1]
    linked = {}
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            linked.setdefault(page.name, set()).add((page.parent / target).resolve())
    for page, images in linked.items():
        for image_path in images:
            assert image_path.is_file(), f"{page} shows {image_path}, which does not exist"
            with Image.open(image_path) as image:
                assert min(image.size) >= 100, (page, image_path, image.size)
    for view in ("similarity", "neighbours", "contextuality"):
        assert (root / "docs" / f"app_{view}.png").resolve() in linked.get("app.md", set()), view
