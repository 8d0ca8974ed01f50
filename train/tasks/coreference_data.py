"""The files of the coreference task: CoNLL-2012's `*_conll` columns and the JSON lines of e2e-coref and allennlp, read
into documents, and documents cut into segments of whole sentences.

A document is `{"doc_key", "sentences": [[word, ...], ...], "speakers": [[...], ...] or None, "clusters": [[(first,
last), ...], ...], "line"}`, word positions counted over the whole document from 0, `last` included (e2e-coref's
convention), clusters in the order of their first mention. A reader refuses a file it cannot read in one line that
names the file and the line (`FileFormatError`): a bracket that closes no mention, a mention never closed, a cluster
span outside its document, an empty document.

* CoNLL-2012 (`*_conll`): `#begin document (NAME); part NNN` ... `#end document`, several a file, a blank line between
  sentences; per word a line of columns: document, part, word number, the word (column 4), ..., the speaker (column
  10, where the line has the full set of columns), and the coreference last: `-`, or `(12`, `12)`, `(12)` joined by
  `|`. Each part is a document of its own, as the CoNLL scorer counts them.
* JSON lines: `{"doc_key": ..., "sentences": [[words]], "clusters": [[[first, last], ...], ...], "speakers": [[...]]}`.
"""

from __future__ import annotations

import json
import logging
import re

from elmo_hf.tools.core.errors import FileFormatError

logger = logging.getLogger(__name__)
_BEGIN = re.compile(r"#begin document \((.*)\);\s*part\s+(\S+)")
_CELL = re.compile(r"^(\()?(\d+)(\))?$")
# the columns of a full CoNLL-2012 line up to the coreference: the speaker (column 10) only where there are that many
SPEAKER_COLUMN, FULL_WIDTH = 9, 12


def _fail(path: str, line: int | None, message: str) -> FileFormatError:
    return FileFormatError(f"{path}, line {line}: {message}" if line is not None else f"{path}: {message}")


def read_documents(path: str, encoding: str, with_clusters: bool = True) -> list[dict]:
    """The documents of a file in either format (JSON lines where the first text is `{`); without `with_clusters`
    (a file to predict) the coreference is not read and `clusters` is None."""
    with open(path, encoding=encoding) as handle:
        lines = handle.read().splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    documents = _json_documents(path, lines, with_clusters) if first.startswith("{") else \
        _conll_documents(path, lines, with_clusters)
    if not documents:
        raise _fail(path, None, "no documents (CoNLL-2012's #begin document ... #end document, or JSON lines with "
                                "\"sentences\" and \"clusters\")")
    return documents


# ---------------------------------------------------------------------------------------------------------------
# CoNLL-2012
# ---------------------------------------------------------------------------------------------------------------
class _ConllDocument:
    """A document being read: its sentences, speakers and the mentions opened and closed so far."""

    def __init__(self, path: str, key: str, line: int, with_clusters: bool):
        self.path, self.key, self.line, self.with_clusters = path, key, line, with_clusters
        self.sentences: list[list[str]] = [[]]
        self.speakers: list[list[str]] = [[]]
        self.words = 0
        self.open: dict[int, list[tuple[int, int]]] = {}  # cluster -> (first word, line) of its open mentions
        self.clusters: dict[int, list[tuple[int, int]]] = {}

    def add(self, columns: list[str], number: int) -> None:
        if len(columns) < 5:
            raise _fail(self.path, number, f"{len(columns)} columns: a CoNLL-2012 word line has the document, part, "
                                           "word number, the word (column 4), ... and the coreference last")
        self.sentences[-1].append(columns[3])
        self.speakers[-1].append(columns[SPEAKER_COLUMN] if len(columns) >= FULL_WIDTH else "-")
        if self.with_clusters and columns[-1] != "-":
            for cell in columns[-1].split("|"):
                self._bracket(cell, number)
        self.words += 1

    def _bracket(self, cell: str, number: int) -> None:
        found = _CELL.match(cell)
        if not found or not (found.group(1) or found.group(3)):
            raise _fail(self.path, number, f"the coreference cell {cell!r} is not -, or (ID, ID) or (ID) joined by |")
        opens, cluster, closes = bool(found.group(1)), int(found.group(2)), bool(found.group(3))
        if opens:
            self.open.setdefault(cluster, []).append((self.words, number))
        if closes:
            if not self.open.get(cluster):
                raise _fail(self.path, number, f"{cell!r} closes a mention of cluster {cluster} that no line opened")
            first, _ = self.open[cluster].pop()  # the innermost open mention of the cluster
            self.clusters.setdefault(cluster, []).append((first, self.words))

    def end_sentence(self, number: int) -> None:
        """A blank line (or the document's end): a mention still open never closes, since mentions stay within
        their sentence."""
        for cluster, opened in self.open.items():
            if opened:
                raise _fail(self.path, opened[0][1], f"the mention of cluster {cluster} opened here is not closed by "
                                                     f"the end of its sentence (line {number})")
        if self.sentences[-1]:
            self.sentences.append([])
            self.speakers.append([])

    def finish(self, number: int) -> dict:
        self.end_sentence(number)
        sentences = [sentence for sentence in self.sentences if sentence]
        if not sentences:
            raise _fail(self.path, self.line, f"the document {self.key} has no words")
        speakers = [speaker for speaker in self.speakers if speaker]
        clusters = sorted((sorted(mentions) for mentions in self.clusters.values()), key=lambda c: c[0])
        return {"doc_key": self.key, "sentences": sentences,
                "speakers": speakers if any(s != "-" for row in speakers for s in row) else None,
                "clusters": clusters if self.with_clusters else None, "line": self.line}


def _conll_documents(path: str, lines: list[str], with_clusters: bool) -> list[dict]:
    documents, current = [], None
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text.startswith("#begin document"):
            if current is not None:
                raise _fail(path, number, f"#begin document inside the document begun at line {current.line} (no "
                                          "#end document before it)")
            found = _BEGIN.match(text)
            key = f"({found.group(1)}); part {found.group(2)}" if found else text[len("#begin document"):].strip()
            current = _ConllDocument(path, key, number, with_clusters)
        elif text.startswith("#end document"):
            if current is None:
                raise _fail(path, number, "#end document without a #begin document")
            documents.append(current.finish(number))
            current = None
        elif not text:
            if current is not None:
                current.end_sentence(number)
        elif current is None:
            raise _fail(path, number, "a word line outside a document (#begin document (NAME); part 000 first)")
        else:
            current.add(text.split(), number)
    if current is not None:
        raise _fail(path, current.line, "the document begun here has no #end document")
    return documents


# ---------------------------------------------------------------------------------------------------------------
# JSON lines
# ---------------------------------------------------------------------------------------------------------------
def _json_documents(path: str, lines: list[str], with_clusters: bool) -> list[dict]:
    documents = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise _fail(path, number, f"not JSON ({error.msg}); one document a line") from error
        documents.append(_json_document(path, number, record, with_clusters))
    return documents


def _json_document(path: str, number: int, record, with_clusters: bool) -> dict:
    sentences = record.get("sentences") if isinstance(record, dict) else None
    if not isinstance(sentences, list) or not all(
            isinstance(sentence, list) and all(isinstance(word, str) for word in sentence) for sentence in sentences):
        raise _fail(path, number, "expected an object with \"sentences\": a list of sentences, each a list of words")
    key = str(record.get("doc_key", f"line {number}"))
    words = sum(len(sentence) for sentence in sentences)
    if words == 0:
        raise _fail(path, number, f"the document {key} has no words")
    clusters = None
    if with_clusters:
        clusters = []
        for k, cluster in enumerate(record.get("clusters") or [], start=1):
            if not isinstance(cluster, list):
                raise _fail(path, number, f"cluster {k} is not a list of [first, last] word spans")
            mentions = []
            for mention in cluster:
                if not (isinstance(mention, list) and len(mention) == 2 and all(
                        isinstance(i, int) and not isinstance(i, bool) for i in mention)):
                    raise _fail(path, number, f"cluster {k}: {mention!r} is not a [first, last] word span")
                if not 0 <= mention[0] <= mention[1] < words:
                    raise _fail(path, number, f"cluster {k}: the span {mention} lies outside the document's {words} "
                                              f"words (positions 0 to {words - 1}, the last word included)")
                mentions.append((mention[0], mention[1]))
            if mentions:
                clusters.append(sorted(set(mentions)))
        clusters.sort(key=lambda c: c[0])
    speakers = record.get("speakers")
    if not (isinstance(speakers, list) and [len(s) if isinstance(s, list) else -1 for s in speakers] ==
            [len(sentence) for sentence in sentences]):
        speakers = None  # speakers are not used by the head: ones that do not line up are dropped, not refused
    return {"doc_key": key, "sentences": [s for s in sentences if s],
            "speakers": [s for s in speakers if s] if speakers else None, "clusters": clusters, "line": number}


# ---------------------------------------------------------------------------------------------------------------
# Segments
# ---------------------------------------------------------------------------------------------------------------
def segments(document: dict, max_words: int) -> list[dict]:
    """`document` cut into segments of whole sentences of at most `max_words` words (a longer sentence is a segment
    alone), each an example of its own: its `sentences`, `speakers`, its `clusters` with positions counted from the
    segment's first word, its `offset` in the document and `segment` number. A cluster whose mentions the cut
    leaves alone in a segment is dropped there (its links lie across the cut, which the model does not see); a
    cluster of one mention in the file is kept."""
    groups, current, size = [], [], 0
    for sentence in document["sentences"]:
        if current and size + len(sentence) > max_words:
            groups.append(current)
            current, size = [], 0
        current.append(sentence)
        size += len(sentence)
    groups.append(current)
    examples, offset = [], 0
    for index, group in enumerate(groups):
        width = sum(len(sentence) for sentence in group)
        clusters = None
        if document["clusters"] is not None:
            clusters = []
            for cluster in document["clusters"]:
                inside = [(first - offset, last - offset) for first, last in cluster
                          if offset <= first and last < offset + width]
                if len(inside) > 1 or (inside and len(cluster) == 1):
                    clusters.append(inside)
        speakers = document["speakers"]
        first_sentence = sum(len(g) for g in groups[:index])
        examples.append({
            "doc_key": document["doc_key"], "segment": index, "offset": offset, "line": document["line"],
            "sentences": group, "clusters": clusters,
            "speakers": speakers[first_sentence: first_sentence + len(group)] if speakers else None})
        offset += width
    return examples


def read_examples(path: str, encoding: str, max_words: int, with_clusters: bool = True) -> list[dict]:
    """The segments of every document of a file (`segments`), in order (`max_words` 1 or more: its option's least
    value)."""
    examples = []
    for document in read_documents(path, encoding, with_clusters):
        examples += segments(document, max_words)
    cut = sum(example["segment"] > 0 for example in examples)
    if cut:
        logger.info("%s: %d documents longer than --max_segment_words %d words were cut into segments of whole "
                    "sentences (%d more segments), each read and scored on its own", path,
                    len({e["doc_key"] for e in examples if e["segment"] > 0}), max_words, cut)
    return examples
