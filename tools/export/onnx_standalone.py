"""ELMo vectors from an exported graph without torch: this one file, numpy and ONNX Runtime (or OpenVINO).

A deployment needs the model folder's `onnx/model.onnx` (`elmo-export FOLDER`), its `tokenizer_config.json` (the word
split and the characters per token) and, to split raw text as the model's tokenizer does, its `word_splits_elmo.py`
(which needs the `regex` package; pre-split words need neither). This file imports nothing of the project: copy it
beside them, or import it from an installed `elmo_hf.tools`.

    from onnx_standalone import ElmoOnnx            # or: from elmo_hf.tools.export.onnx_standalone import ElmoOnnx
    elmo = ElmoOnnx("my-elmo")                      # FOLDER/onnx/model.onnx; backend="openvino" for OpenVINO
    vectors = elmo.embed(["The bank raised its rates .", "We sat on the river bank ."])
    vectors[0].shape                                # (L + 1, words, 2P): layer 0, then every biLSTM layer

Its runners (`OnnxRuntimeRunner`, `OpenVinoRunner`: `run(input_ids, attention_mask) -> hidden_states`) are also those
of `elmo-embed --backend`, the app and the pipelines: the rows of the project's backend table marked `standalone`
(`elmo_hf.tools.core.backend_registry`, which this file does not import) name them, tested by
tests/test_backend_registry.py.

The character ids are those of `modeling_elmo/character_ids.py` and `ElmoTokenizer.word_to_char_ids` (tested equal):
`<S>` and `</S>` are added around every sentence and removed from what `embed` returns, as `elmo-embed` does.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

PRECISIONS = {"f32": "float32", "bf16": "bfloat16"}  # OpenVINO's names of the dtypes it computes in
BOS_CHAR_ID, EOS_CHAR_ID, BOW_ID, EOW_ID, CHAR_PAD_ID, BYTE_OFFSET = 257, 258, 259, 260, 261, 1


def word_ids(word: str, width: int) -> list[int]:
    """A word's row of character ids (`ElmoTokenizer.word_to_char_ids`): its UTF-8 bytes + 1 between the
    begin- and end-of-word ids, cut to `width - 2` bytes, padded with the filler id."""
    data = word.encode("utf-8", "ignore")[: width - 2]
    return [BOW_ID, *(b + BYTE_OFFSET for b in data), EOW_ID] + [CHAR_PAD_ID] * (width - 2 - len(data))


def encode(sentences: list[list[str]], width: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Words of each sentence -> `input_ids` (B, T, width) and `attention_mask` (B, T), int64, `<S>`/`</S>` around
    each sentence, right-padded with rows of zeros."""
    length = max(len(words) for words in sentences) + 2
    ids = np.zeros((len(sentences), length, width), dtype=np.int64)
    mask = np.zeros((len(sentences), length), dtype=np.int64)
    boundary = [BOW_ID, 0, EOW_ID] + [CHAR_PAD_ID] * (width - 3)
    for row, words in enumerate(sentences):
        rows = [boundary[:1] + [BOS_CHAR_ID] + boundary[2:], *(word_ids(w, width) for w in words),
                boundary[:1] + [EOS_CHAR_ID] + boundary[2:]]
        ids[row, : len(rows)] = rows
        mask[row, : len(rows)] = 1
    return ids, mask


class GraphRunner:
    """An ONNX graph of the biLM in one runtime: `run(input_ids, attention_mask) -> hidden_states` (numpy int64 in,
    (B, L + 1, T, 2P) float32 out). The runners of `elmo-embed --backend`, the app and the pipelines too
    (`elmo_hf.tools.export.backends` imports them from here): one implementation, with and without torch."""

    backend = ""

    def __init__(self, graph: str | Path, dtype: str, threads: int | None):
        self.graph, self.dtype, self.threads = Path(graph), dtype, threads

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.graph}, {self.dtype})"


class OnnxRuntimeRunner(GraphRunner):
    backend = "onnxruntime"

    def __init__(self, graph: str | Path, dtype: str, threads: int | None):
        super().__init__(graph, dtype, threads)
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3  # its warnings about unused initializers and shapes are not the user's
        self.session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": np.asarray(input_ids, dtype=np.int64),
                 "attention_mask": np.asarray(attention_mask, dtype=np.int64)}
        return self.session.run(["hidden_states"], feeds)[0]


class OpenVinoRunner(GraphRunner):
    """float32 unless `dtype` is "bfloat16": OpenVINO computes in bfloat16 by default on CPUs that have it."""

    backend = "openvino"

    def __init__(self, graph: str | Path, dtype: str, threads: int | None):
        super().__init__(graph, dtype, threads)
        import openvino

        config = {"INFERENCE_PRECISION_HINT": "bf16" if dtype == "bfloat16" else "f32", "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self.compiled = openvino.Core().compile_model(str(graph), "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.output = self.compiled.output("hidden_states")

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": np.asarray(input_ids, dtype=np.int64),
                 "attention_mask": np.asarray(attention_mask, dtype=np.int64)}
        return self.request.infer(feeds)[self.output].copy()  # the request reuses its buffers


RUNNERS = (OnnxRuntimeRunner, OpenVinoRunner)  # the rows of the project's backend table marked standalone (tested)


def runners() -> dict[str, type[GraphRunner]]:
    """The runners of this file by backend name."""
    return {runner.backend: runner for runner in RUNNERS}


class ElmoOnnx:
    """A saved folder's graph in ONNX Runtime (`backend="onnxruntime"`) or OpenVINO (`"openvino"`, float32 unless
    `precision="bf16"`)."""

    def __init__(self, folder: str, backend: str = "onnxruntime", graph: str | None = None, threads: int | None = None,
                 precision: str = "f32"):
        self.folder = Path(folder)
        self.graph = Path(graph) if graph else self.folder / "onnx" / "model.onnx"
        config_file = self.folder / "tokenizer_config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        self.width = int(config.get("max_characters_per_token", 50))
        self.word_split = config.get("word_split", "punctuation")
        self._split = None
        if backend not in runners():
            raise ValueError(f"backend must be one of {', '.join(runners())}, got {backend!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.runner = runners()[backend](self.graph, PRECISIONS[precision], threads)

    def split(self, text: str) -> list[str]:
        """Raw text into words as the model's tokenizer splits it (its `word_splits_elmo.py`, beside the model)."""
        if self.word_split == "whitespace":
            return text.split()
        if self._split is None:
            source = self.folder / "word_splits_elmo.py"
            if not source.is_file():
                raise FileNotFoundError(f"{source} is needed to split raw text ({self.word_split!r}): copy it from "
                                        "the model folder, or pass lists of words")
            spec = importlib.util.spec_from_file_location("word_splits_elmo", source)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._split = module.split_words
        return self._split(text, self.word_split)

    def hidden_states(self, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """The graph's output (B, L + 1, T, 2P) for lists of words, and the mask (B, T)."""
        ids, mask = encode(sentences, self.width)
        return self.runner.run(ids, mask), mask

    def embed(self, sentences: list[str] | list[list[str]], batch_size: int = 64) -> list[np.ndarray]:
        """Each sentence's vectors (L + 1, words, 2P), `<S>`/`</S>` left out; a sentence is raw text or its words."""
        words = [self.split(s) if isinstance(s, str) else list(s) for s in sentences]
        out = []
        for start in range(0, len(words), batch_size):
            batch = words[start : start + batch_size]
            layers, _ = self.hidden_states(batch)
            out.extend(layers[row, :, 1 : len(w) + 1].copy() for row, w in enumerate(batch))
        return out
