"""Fine-tune ELMo to find which mentions of a document refer to the same entity (`ElmoForCoreference`, Lee et al.
2017's span ranking at small scale) with `transformers.Trainer`, and cluster the mentions of new documents: the task
"coreference" (`TASK`, its options, and `PARTS`, its `Task`).

    elmo-finetune coreference --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file conll12/train.english.v4_gold_conll --validation_file conll12/dev.english.v4_gold_conll \\
        --output_dir out/coref
    elmo-finetune coreference --model_name_or_path out/coref --do_predict --test_file new.jsonl --output_dir out/new

Files (`coreference_data.py`): CoNLL-2012's `*_conll` columns (several documents a file, the coreference column's
brackets) or the JSON lines of e2e-coref and allennlp (`sentences`, `clusters` of `[first, last]` word spans). A
document longer than `--max_segment_words` (default 512) is cut into segments of whole sentences, each read, trained
and scored as a document of its own. Each sentence is a row of the biLM (ELMo runs per sentence, as in the paper).
Reports MUC, B-cubed and CEAF-e precision, recall and F1 and their mean F1, the CoNLL F1 (`coreference_metrics.py`),
over the validation segments. `--do_predict` writes the clusters of every segment, each mention with its words and its
word positions in the document (`predictions.txt`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elmo_hf.tools.core.arguments import at_least

from . import MIN_SEQ_LENGTH, FineTuningTask, Task
from .coreference_data import read_examples

logger = logging.getLogger(__name__)


@dataclass
class CoreferenceDataArguments:
    train_file: str | None = field(default=None, metadata={
        "help": "Documents with their clusters: CoNLL-2012 *_conll columns (the coreference column last) or JSON "
                "lines {\"sentences\": [[words]], \"clusters\": [[[first, last], ...]]}."})
    validation_file: str | None = field(default=None, metadata={
        "help": "Same format; MUC, B-cubed, CEAF-e and the CoNLL F1 are reported on it."})
    test_file: str | None = field(default=None, metadata={
        "help": "Documents to cluster with --do_predict: the same formats, clusters not needed."})
    word_split: str | None = field(default=None, metadata={
        "help": "Not used: the files give the words (accepted as every task's option)."})
    max_segment_words: int = field(default=512, metadata={
        "help": "Longest segment in words: a longer document is cut into segments of whole sentences, each read "
                "and scored on its own.", "type": at_least(1)})
    max_seq_length: int = field(default=128, metadata={
        "help": "Longest row of the biLM in tokens, <S> and </S> included: a longer sentence is read in pieces.",
        "type": at_least(MIN_SEQ_LENGTH)})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N training segments.", "type": at_least(1)})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N validation segments.", "type": at_least(1)})


TASK = FineTuningTask(
    name="coreference",
    data_options=CoreferenceDataArguments,
    labels="clusters",
    examples="documents",
    head_option="token_classifier_encoder",
    head_default="lstm",  # Lee et al. 2017: a biLSTM over each sentence before the spans
    head_help="none (the spans read the mixed vectors) or lstm (a biLSTM over each sentence first)",
    training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 20.0,
                                        "per_device_train_batch_size": 4, "warmup_steps": 0.1}),
    # a trainable word embedding beside the mix, as Lee et al. concatenate word vectors (GloVe, Turian) to theirs
    new_head_defaults=MappingProxyType({"word_embedding_dim": 32, "head_hidden_size": 64}),
    description="Fine-tune ELMo to find the mentions of a document that refer to the same entity "
                "(`ElmoForCoreference`,\nLee et al. 2017's span ranking) with `transformers.Trainer`, and cluster "
                "the mentions of new documents.",
)


class DocumentCollator:
    """Pads a batch of documents to (batch, sentences, tokens, characters) with all-zero tokens and sentences, their
    attention mask with zeros, and their gold mentions (batch, mentions, 3) with rows of -1. Holds the tokenizer,
    which `Trainer` saves with the model."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        sentences = max(len(row["input_ids"]) for row in rows)
        tokens = max(len(sentence) for row in rows for sentence in row["input_ids"])
        width = len(rows[0]["input_ids"][0][0])
        ids = torch.zeros(len(rows), sentences, tokens, width, dtype=torch.long)
        mask = torch.zeros(ids.shape[:3], dtype=torch.long)
        for r, row in enumerate(rows):
            for s, sentence in enumerate(row["input_ids"]):
                ids[r, s, : len(sentence)] = torch.tensor(sentence, dtype=torch.long)
                mask[r, s, : len(sentence)] = 1
        batch = {"input_ids": ids, "attention_mask": mask}
        if any("labels" in row for row in rows):
            mentions = max(1, max(len(row.get("labels") or ()) for row in rows))
            labels = torch.full((len(rows), mentions, 3), -1, dtype=torch.long)
            for r, row in enumerate(rows):
                if row.get("labels"):
                    labels[r, : len(row["labels"])] = torch.tensor(row["labels"], dtype=torch.long)
            batch["labels"] = labels
        return batch


def gold_mentions(clusters: list[list[tuple[int, int]]]) -> list[list[int]]:
    """`[first, last, cluster]` of every mention, clusters numbered from 1 in their order."""
    return [[first, last, k] for k, cluster in enumerate(clusters, start=1) for first, last in cluster]


def clusters_of_rows(rows) -> list[list[tuple[int, int]]]:
    """`[first, last, cluster]` rows (numpy or lists; rows with a negative start are padding) -> clusters."""
    clusters: dict[int, list[tuple[int, int]]] = {}
    for first, last, cluster in (tuple(int(v) for v in row) for row in rows):
        if first >= 0 and cluster > 0:
            clusters.setdefault(cluster, []).append((first, last))
    return list(clusters.values())


def compute_metrics(eval_prediction) -> dict[str, float]:
    """The coreference scores of the validation segments, from the predicted and gold `[first, last, cluster]`
    rows of each (`preprocess_logits`)."""
    from .coreference_metrics import coref_scores

    predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
    return coref_scores([clusters_of_rows(row) for row in labels], [clusters_of_rows(row) for row in predictions])


def preprocess_logits(outputs, labels):
    """A batch's clusters as `[first, last, cluster]` rows (batch, kept spans, 3), -1 where none: what `Trainer`
    keeps of the outputs for `compute_metrics` (the antecedent scores of every batch would not concatenate)."""
    import torch

    from elmo_hf.modeling_elmo.modeling_elmo_coref import predicted_clusters

    logits, top_spans, antecedents = outputs[:3]
    documents = predicted_clusters(logits, top_spans, antecedents)
    rows = torch.full((len(documents), max(1, top_spans.shape[1]), 3), -1, dtype=torch.long)
    for r, clusters in enumerate(documents):
        mentions = gold_mentions(clusters)
        if mentions:
            rows[r, : len(mentions)] = torch.tensor(mentions, dtype=torch.long)
    return rows.to(top_spans.device)


class Coreference(Task):
    """Examples are segments of documents (whole sentences); their labels the clusters of their mentions."""

    row = TASK
    has_label_set = False  # mentions are positions in the document itself

    def splits_test_text(self, test) -> bool:
        return False  # the files give the words

    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        return read_examples(path, encoding, data_args.max_segment_words)

    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        return [word for sentence in example["sentences"] for word in sentence]

    def encode(self, examples: list[dict], tokenizer, label2id: dict[str, int], data_args) -> list[dict]:
        """Each segment's sentences as rows of the biLM (`input_ids` (sentences, tokens, characters), a sentence
        longer than `--max_seq_length` in pieces, each a sentence to the head: no span crosses two), and its gold
        mentions as `labels` (`[first, last, cluster]`)."""
        room = data_args.max_seq_length - 2  # 1 or more: its option's least value is 3
        rows = []
        for example in examples:
            pieces = [sentence[start: start + room] for sentence in example["sentences"]
                      for start in range(0, len(sentence), room)]
            encoded = tokenizer(pieces, is_split_into_words=True)
            row = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
            if example["clusters"] is not None:
                row["labels"] = gold_mentions(example["clusters"])
            rows.append(row)
        return rows

    def collator(self, tokenizer) -> DocumentCollator:
        return DocumentCollator(tokenizer)

    def metrics(self, config, data_args):
        return compute_metrics, preprocess_logits

    def read_test_file(self, path: str, encoding: str, data_args) -> list[dict]:
        return read_examples(path, encoding, data_args.max_segment_words, with_clusters=False)

    def prediction_lines(self, model, tokenizer, test: list[dict], data_args, batch_size: int) -> tuple[list[str], int]:
        """For each segment, a header line naming its document, then a line per predicted cluster: each mention's
        first and last word position in the document and its words (`[3, 4] the dog | [9, 9] it`); a blank line
        after each segment."""
        lines = []
        for example, clusters in zip(test, predict_clusters(model, tokenizer, test, data_args, batch_size)):
            words = [word for sentence in example["sentences"] for word in sentence]
            offset = example["offset"]
            lines.append(f"# document {example['doc_key']}, segment {example['segment'] + 1}, words {offset} to "
                         f"{offset + len(words) - 1}: {len(clusters)} clusters")
            for k, cluster in enumerate(clusters, start=1):
                mentions = " | ".join(f"[{offset + first}, {offset + last}] {' '.join(words[first: last + 1])}"
                                      for first, last in cluster)
                lines.append(f"cluster {k}: {mentions}")
            lines.append("")
        return lines, len(test)


def predict_clusters(model, tokenizer, examples: list[dict], data_args, batch_size: int) -> list[list]:
    """The predicted clusters of each segment (positions from the segment's first word), by batches."""
    import torch

    rows = PARTS.encode([{**example, "clusters": None} for example in examples], tokenizer, {}, data_args)
    pad, predicted = DocumentCollator(tokenizer), []
    model.eval()
    for first in range(0, len(rows), batch_size):
        batch = {key: value.to(model.device) for key, value in pad(rows[first: first + batch_size]).items()}
        with torch.no_grad():
            predicted += model.decode(**batch)
        if first and first // batch_size % 50 == 0:
            logger.info("clustered %d of %d documents", first, len(rows))
    return predicted


PARTS = Coreference()
