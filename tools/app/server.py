"""The page (Gradio Blocks) and the command:

    elmo-app [--model PATH_OR_ID] [--host 127.0.0.1] [--port 7860] [--device cpu]
    python app.py ...   (the same: the Hugging Face Spaces convention)

`--model`: a folder, a Hub id or a preset (random weights, said in red at the top of the page); by default
`$ELMO_APP_MODEL` (a Space's setting), else the demo's model (`outputs/demo/model`, written by `make demo`) where it
exists, else the `small` preset.

The three views are also API endpoints, `/similarity`, `/neighbours` and `/contextuality` (docs/app.md). The
similarity view's concurrent requests are answered in batches (`similarity_batch`, Gradio's `batch=True`).

Every request goes through `guarded` (or `_failure`, in a batch): a bad input is a message in the page, and anything
else that fails is logged with its traceback on the server and answered with one line, so that no request stops the
page for the others.
Exit status: 2 when the model cannot be loaded or an argument is wrong, 1 when the server
cannot start (the port is taken), 130/143 after SIGINT/SIGTERM.
"""

from __future__ import annotations

import functools
import html
import logging
import signal
import threading
from collections import Counter

from elmo_hf.tokenization import WORD_SPLITTERS, split_words

from ..core.command_options import AppOptions
from ..core.errors import RunFailed
from ..loading import ModelLoadError
from .contextuality import contextuality, contextuality_html
from .examples import Examples, examples_for
from .figures import similarity_figure
from .neighbours import nearest_neighbours, neighbours_html
from .session import (
    AppInputError,
    AppSession,
    check_split,
    corpus_text,
    default_model,
    load_session,
    model_summary,
)
from .similarity import (
    SimilarityResult,
    layer_name,
    result_json,
    sentences_html,
    table_html,
    word_similarities,
    word_similarity,
)

logger = logging.getLogger("elmo-app")

FAILED = ("this request failed on the server (its log says why); the page still works: try other input, or a "
          "smaller text")

# Similarity requests computed together: Gradio hands the batched event up to this many waiting requests at once.
MAX_BATCH = 16
SIMILARITY_OUTPUTS = 5  # the message, the sentences marked, the table, the figure, the numbers (JSON)
ENCODINGS = ["utf-8", "gb18030", "big5", "shift_jis", "latin-1", "cp1252"]
CSS = """
.elmo-cosines td, .elmo-neighbours td, .elmo-contextuality td {text-align: right; font-variant-numeric: tabular-nums;
  padding: 2px 10px}
.elmo-neighbours td:last-child {text-align: left}
"""


# --------------------------------------------------------------------------------------------------
# What each view answers: functions of the session and the page's inputs
# --------------------------------------------------------------------------------------------------


def _message(notes: list[str]) -> str:
    return "\n\n".join(f"ℹ️ {html.escape(note, quote=False)}" for note in notes)


def similarity_view(session: AppSession, text: str, word: str, split: str):
    """(message, the sentences with the word marked, the table of cosines, the figure, the numbers as JSON)."""
    result = word_similarity(session, text, word, check_split(split))
    return _similarity_answer(result)


def _similarity_answer(result: SimilarityResult):
    return (_message(result.notes), sentences_html(result), table_html(result), similarity_figure(result),
            result_json(result))


def similarity_batch(session: AppSession, texts: list[str], words: list[str], splits: list[str]):
    """The similarity view for several visitors at once (Gradio's `batch=True`: a list per input, a list per
    output): their sentences share forward passes (`word_similarities`). Each request gets its own answer: a wrong
    one its message, one whose figure fails `FAILED`; a forward pass that fails fails the batch's requests."""
    answer = guarded(_similarity_answer, SIMILARITY_OUTPUTS)
    try:
        results = word_similarities(session, list(zip(texts, words, splits)))
    except Exception:  # logged once for the batch; the page goes on serving
        logger.exception("a batch of %d similarity requests failed", len(texts))
        answers = [(f"❌ {FAILED}",) + (None,) * (SIMILARITY_OUTPUTS - 1)] * len(texts)
    else:
        answers = [answer(r) if isinstance(r, SimilarityResult) else _failure(r, SIMILARITY_OUTPUTS) for r in results]
    return tuple(list(column) for column in zip(*answers))


def _failure(error: Exception, outputs: int) -> tuple:
    """The answer to a request that could not be checked: its message, or (logged) `FAILED`."""
    if isinstance(error, AppInputError):
        return _input_error(error, outputs)
    logger.error("a request failed", exc_info=error)
    return (f"❌ {FAILED}",) + (None,) * (outputs - 1)


def neighbours_view(session: AppSession, corpus: str, upload: str | None, encoding: str, query: str, word: str,
                    split: str, layer: int, k: int, same_word_only: bool):
    """(message, the query and its neighbours)."""
    text = corpus_text(corpus, upload, encoding, session.limits)
    result = nearest_neighbours(session, text, query, word, check_split(split), layer, k, same_word_only)
    index = result.index
    info = session.model.token_cache_info() if hasattr(session.model, "token_cache_info") else None
    cache = f"; token cache: {info['size']:,} distinct words" if info else ""
    notes = result.notes + [f"corpus: {len(index.sentences.words):,} sentences, {len(index.where):,} words, "
                            f"embedded in {index.seconds:.2f} s (kept for the next query){cache}"]
    return _message(notes), neighbours_html(result)


def contextuality_view(session: AppSession, text: str, upload: str | None, encoding: str, split: str,
                       min_count: int):
    """(message, the figure, the table)."""
    text = corpus_text(text, upload, encoding, session.limits)
    results, image, notes = contextuality(session, text, check_split(split), int(min_count))
    return _message(notes), image, contextuality_html(results)


def repeated_words(text: str, split: str) -> list[str]:
    """The words that occur more than once in `text` (what the similarity view can compare), most frequent first."""
    try:
        check_split(split)
    except AppInputError:
        return []
    counts = Counter(w for line in (text or "")[:20_000].splitlines() for w in split_words(line, split))
    return [w for w, n in counts.most_common(30) if n > 1 and any(c.isalnum() for c in w)]


def _input_error(error: AppInputError, outputs: int) -> tuple:
    return (f"❌ {html.escape(str(error), quote=False)}",) + (None,) * (outputs - 1)


def guarded(function, outputs: int):
    """`function` for the page: its `AppInputError` becomes the message (the first output, the others emptied);
    any other exception is logged with its traceback and answered with one line, so the server goes on."""

    @functools.wraps(function)
    def answer(*args):
        try:
            return function(*args)
        except AppInputError as error:
            return _input_error(error, outputs)
        except Exception:  # one request's failure must not reach the page as a traceback, nor stop the app
            logger.exception("a request failed")
            return (f"❌ {FAILED}",) + (None,) * (outputs - 1)

    return answer


def handlers(session: AppSession) -> dict:
    """The functions the page calls, bound to `session` and guarded: what the tests call directly."""
    return {
        "similarity": guarded(functools.partial(similarity_view, session), SIMILARITY_OUTPUTS),
        "similarity_batch": functools.partial(similarity_batch, session),
        "neighbours": guarded(functools.partial(neighbours_view, session), 2),
        "contextuality": guarded(functools.partial(contextuality_view, session), 3),
    }


# --------------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------------


def build_app(session: AppSession):
    """The Gradio Blocks of the three views for `session`."""
    import gradio as gr

    answer = handlers(session)
    splits = [name for name in WORD_SPLITTERS if _available(name)]
    examples, known = examples_for(session.tokenizer)
    logger.info("example inputs: %s%s", examples.written_for,
                "" if known is None else f" ({known:.0%} of their words in the model's vocabulary)")
    with gr.Blocks(title="ELMo: words in context", analytics_enabled=False) as demo:
        gr.Markdown("# ELMo: one word, many contexts")
        gr.HTML(model_summary(session), elem_id="model-summary")
        with gr.Tab("Same word, different sentences", id="similarity"):
            _similarity_tab(gr, session, answer["similarity_batch"], splits, examples)
        with gr.Tab("Nearest neighbours in context", id="neighbours"):
            _neighbours_tab(gr, session, answer["neighbours"], splits, examples)
        with gr.Tab("How contextual is each layer?", id="contextuality"):
            _contextuality_tab(gr, session, answer["contextuality"], splits, examples)
    demo.queue(default_concurrency_limit=1)  # per event; the views' forward passes also take `session.lock`
    return demo


def _available(split: str) -> bool:
    try:
        check_split(split)
    except AppInputError:
        return False
    return True


def _similarity_tab(gr, session: AppSession, answer, splits: list[str], examples: Examples) -> None:
    gr.Markdown("Type sentences (one per line) that use a word in different senses, and the word. Each layer's "
                "vectors of the word are compared: layer 0 reads only the word's characters (the same vector "
                "everywhere); the biLSTM layers read the sentence.")
    with gr.Row():
        first_text, first_word, _ = examples.similarity[0]
        text = gr.Textbox(label="Sentences, one per line", lines=6, value=first_text, elem_id="sim-text", scale=3)
        with gr.Column(scale=1):
            word = gr.Textbox(label="Word", value=first_word, elem_id="sim-word")
            picks = gr.Dropdown(label="or pick a word that occurs more than once",
                                choices=repeated_words(first_text, session.default_split), value=None,
                                elem_id="sim-picks")
            split = gr.Dropdown(splits, value=session.default_split, label="Word split", elem_id="sim-split")
            button = gr.Button("Compare", variant="primary", elem_id="sim-run")
    gr.Examples(examples.similarity, [text, word, split], cache_examples=False)
    message = gr.Markdown(elem_id="sim-message")
    marked = gr.HTML(elem_id="sim-sentences")
    figure = gr.Image(label="Per layer: the cosines of the occurrences (top), their PCA (bottom)", show_label=False,
                      type="pil", format="png", elem_id="sim-figure")
    table = gr.HTML(elem_id="sim-table")
    with gr.Accordion("The numbers, unrounded (JSON: what the API endpoint /similarity returns)", open=False):
        numbers = gr.JSON(show_label=False, elem_id="sim-json")
    outputs = [message, marked, table, figure, numbers]
    # One event for the three triggers: Gradio batches the requests of one event only. Batches of concurrent
    # visitors share forward passes; one batch at a time (the model computes on every core already).
    gr.on([button.click, text.submit, word.submit], answer, [text, word, split], outputs, api_name="similarity",
          batch=True, max_batch_size=MAX_BATCH, concurrency_limit=1)
    for source in (text, split):
        source.change(lambda t, s: gr.Dropdown(choices=repeated_words(t, s), value=None), [text, split], picks,
                      api_name=False, queue=False)
    picks.input(lambda w: w or gr.skip(), picks, word, api_name=False, queue=False)


def _neighbours_tab(gr, session: AppSession, answer, splits: list[str], examples: Examples) -> None:
    limits = session.limits
    gr.Markdown(f"A word in a query sentence, and the occurrences of a small corpus whose vectors are closest to it "
                f"(cosine) at one layer. The corpus: one sentence per line, pasted or uploaded (at most "
                f"{limits.max_corpus_sentences:,} sentences and {limits.max_corpus_chars:,} characters are used); "
                f"it is embedded once and kept for the next queries.")
    with gr.Row():
        corpus = gr.Textbox(label="Corpus, one sentence per line", lines=8, value=examples.corpus,
                            elem_id="nn-corpus", scale=3)
        with gr.Column(scale=1):
            upload = gr.File(label="or upload a text file (used instead)", type="filepath", elem_id="nn-upload")
            encoding = gr.Dropdown(ENCODINGS, value="utf-8", label="its encoding", allow_custom_value=True)
    with gr.Row():
        query = gr.Textbox(label="Query sentence (empty: the word's first sentence in the corpus)",
                           value=examples.query, elem_id="nn-query", scale=3)
        word = gr.Textbox(label="Word", value=examples.query_word, elem_id="nn-word")
        split = gr.Dropdown(splits, value=session.default_split, label="Word split")
    with gr.Row():
        layer = gr.Radio([(layer_name(k), k) for k in range(session.num_layers)], value=session.num_layers - 1,
                         label="Layer")
        k = gr.Slider(1, 50, value=10, step=1, label="Neighbours")
        same = gr.Checkbox(value=True, label="same word only (its senses); untick for every word")
        button = gr.Button("Find neighbours", variant="primary", elem_id="nn-run")
    message = gr.Markdown(elem_id="nn-message")
    result = gr.HTML(elem_id="nn-result")
    inputs = [corpus, upload, encoding, query, word, split, layer, k, same]
    gr.on([button.click, query.submit, word.submit], answer, inputs, [message, result], api_name="neighbours",
          concurrency_limit=1)


def _contextuality_tab(gr, session: AppSession, answer, splits: list[str], examples: Examples) -> None:
    limits = session.limits
    gr.Markdown(f"The measures of `elmo-analyze` (Ethayarajh 2019) on a text: how similar a word's vectors are "
                f"across its contexts (self-similarity), within a sentence, and how much of them one static vector "
                f"explains (MEV), per layer, beside the similarity of random pairs of words (anisotropy). One "
                f"sentence per line, at most {limits.max_corpus_sentences:,} sentences.")
    with gr.Row():
        text = gr.Textbox(label="Text, one sentence per line", lines=8, value=examples.corpus, elem_id="ctx-text",
                          scale=3)
        with gr.Column(scale=1):
            upload = gr.File(label="or upload a text file (used instead)", type="filepath", elem_id="ctx-upload")
            encoding = gr.Dropdown(ENCODINGS, value="utf-8", label="its encoding", allow_custom_value=True)
            split = gr.Dropdown(splits, value=session.default_split, label="Word split")
            min_count = gr.Slider(2, 20, value=2, step=1, label="Analyse words that occur at least")
            button = gr.Button("Analyse", variant="primary", elem_id="ctx-run")
    message = gr.Markdown(elem_id="ctx-message")
    figure = gr.Image(label="Per layer", show_label=False, type="pil", format="png", elem_id="ctx-figure")
    table = gr.HTML(elem_id="ctx-table")
    button.click(answer, [text, upload, encoding, split, min_count], [message, figure, table],
                 api_name="contextuality", concurrency_limit=1)


def theme():
    """Gradio's default look with the system's fonts: the default theme fetches web fonts, which a page served
    offline would wait for."""
    import gradio as gr

    return gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                             font_mono=["ui-monospace", "monospace"])


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def run(args: AppOptions, guard=None) -> int:
    """Serve the page for `args.model` until SIGINT/SIGTERM; returns the exit status (128 + the signal). Raises
    `ModelLoadError` for a model that does not load, `RunFailed` where the address cannot be served."""
    if not args.verbose:  # uvicorn's own lines about every request
        for noisy in ("httpx", "gradio", "uvicorn", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    name = args.model or default_model()
    try:
        session = load_session(name, device=args.device, trust_remote_code=args.trust_remote_code,
                               backend=args.backend)
    except ModelLoadError as error:
        raise ModelLoadError(f"--model: {error}") from error
    demo = build_app(session)
    try:
        demo.launch(server_name=args.host, server_port=args.port, prevent_thread_lock=True, quiet=not args.verbose,
                    show_error=False, max_file_size="5mb", theme=theme(), css=CSS)
    except OSError as error:  # the port is taken, or the address is not this machine's
        raise RunFailed(f"cannot serve on {args.host}:{args.port}: {str(error).splitlines()[0]}") from error
    logger.info("serving %s on http://%s:%d (Ctrl-C stops)", name, args.host, args.port)
    return _serve_until_stopped(demo)


def _serve_until_stopped(demo) -> int:
    stopped = threading.Event()
    received = []

    def on_signal(number, _frame):
        received.append(number)
        stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopped.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        demo.close(verbose=False)
    logger.info("stopped (%s)", signal.Signals(received[0]).name)
    return 128 + received[0]

