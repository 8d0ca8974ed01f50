"""`ElmoTokenClassificationPipeline`: transformers' token-classification ("NER") pipeline for ELMo taggers, the class
`pipeline("token-classification", model=folder, trust_remote_code=True)` runs (config.json names it in
`custom_pipelines`: `configuration_elmo.CUSTOM_PIPELINES`).

transformers' own pipeline reads one vocabulary id per position (`convert_ids_to_tokens(int(input_ids[i]))`), where
ELMo has a row of character ids, and asks only fast tokenizers for character offsets. Here every position's word and
its `start`/`end` come from the tokenizer's `offset_mapping`: an ELMo token is always a whole word of the text, so no
token is a subword, and the word strategies (`first`, `average`, `max`) are accepted and give what `simple` gives.
Every entity's `word` is the text between its `start` and `end` (transformers joins tokens with the tokenizer's
`convert_tokens_to_string`, which would put spaces between the ideographs of a Chinese name). Tags may be IOB2 or
BIOES (`S-X` opens and closes an entity, `E-X` ends one).

This file travels to the Hub as remote code: it imports only torch and transformers, and uses the tokenizer through
the methods every ELMo tokenizer has (duck-typed: the tokenizer's own code travels in its own files).
"""

from __future__ import annotations

import torch
from transformers.pipelines.token_classification import AggregationStrategy, TokenClassificationPipeline


class ElmoTokenClassificationPipeline(TokenClassificationPipeline):
    """Tags every word of a text with an ELMo tagger (`ElmoForTokenClassification`), as transformers'
    `TokenClassificationPipeline` does for subword models: `aggregation_strategy` `none` (one result per word),
    `simple`, `first`, `average` or `max` (entities: adjacent words of one type grouped), `ignore_labels`,
    `is_split_into_words` (lists of words, joined by `delimiter` for the offsets). Each result's `start`/`end` are
    character offsets into the input text, and `word` is `text[start:end]`.

    Scores are the softmax of the model's logits at each word; for a CRF tagger (`use_crf`) those are max-marginals,
    so the tag of each word is the one of the Viterbi sequence, and its score says how much better the best
    sequence is with that tag than with the others (not a marginal probability).

    `stride` is refused: the biLM reads a text of any length at once (an LSTM has no window), so there is nothing to
    cut into overlapping windows.
    """

    def _sanitize_parameters(self, ignore_labels=None, aggregation_strategy=None, offset_mapping=None,
                             is_split_into_words: bool = False, stride=None, delimiter=None, **kwargs):
        if stride is not None:
            raise ValueError(f"stride={stride}: an ELMo tagger reads a text of any length in one pass (its biLM has no "
                             "window to slide), so the pipeline takes whole texts; leave stride out")
        # transformers' part with the arguments every version takes (4.46 knows neither is_split_into_words nor
        # delimiter: `preprocess` reads them)
        preprocess, forward, postprocess = super()._sanitize_parameters(
            ignore_labels=ignore_labels, offset_mapping=offset_mapping, **kwargs
        )
        preprocess.update(is_split_into_words=is_split_into_words, delimiter=" " if delimiter is None else delimiter)
        if aggregation_strategy is not None:
            # transformers refuses first/average/max for tokenizers that are not "fast" because it cannot tell
            # subwords apart; an ELMo token is a whole word, so they apply (and agree with "simple")
            if isinstance(aggregation_strategy, str):
                aggregation_strategy = AggregationStrategy[aggregation_strategy.upper()]
            postprocess["aggregation_strategy"] = aggregation_strategy
        return preprocess, forward, postprocess

    def preprocess(self, sentence, offset_mapping=None, **preprocess_params):
        is_split_into_words = preprocess_params["is_split_into_words"]
        word_to_chars_map = None
        if is_split_into_words:
            if not isinstance(sentence, list):
                raise ValueError("with is_split_into_words=True each input must be a list of words")
            delimiter = preprocess_params["delimiter"]
            words, sentence = sentence, delimiter.join(sentence)  # the text the offsets point into
            word_to_chars_map, start = [], 0
            for word in words:
                word_to_chars_map.append((start, start + len(word)))
                start += len(word) + len(delimiter)
            text = words
        elif not isinstance(sentence, str):
            raise ValueError("each input must be a text (str), or a list of words with is_split_into_words=True")
        else:
            text = sentence
        inputs = self.tokenizer(text, is_split_into_words=is_split_into_words, return_tensors="pt",
                                return_special_tokens_mask=True, return_offsets_mapping=True)
        model_inputs = {key: value for key, value in inputs.items()}
        if word_to_chars_map is not None:  # pre-split words: offsets within each word -> within the joined text
            shifts = [0 if word is None else word_to_chars_map[word][0] for word in inputs.word_ids(0)]
            model_inputs["offset_mapping"] = inputs["offset_mapping"] + torch.tensor(shifts).reshape(1, -1, 1)
        if offset_mapping is not None:  # the caller's own offsets win, as in transformers' pipeline
            model_inputs["offset_mapping"] = offset_mapping
        model_inputs["sentence"] = sentence
        model_inputs["is_last"] = True
        yield model_inputs

    def gather_pre_entities(self, sentence, input_ids, scores, offset_mapping, special_tokens_mask,
                            aggregation_strategy, *args, **kwargs) -> list[dict]:
        """One entry per word of the text (not `<S>`, `</S>`, padding): its scores, its characters in `sentence`
        (`offset_mapping`, shifted by `preprocess` for pre-split words; transformers 5 also passes word ids,
        not needed then)."""
        pre_entities = []
        for index, token_scores in enumerate(scores):
            if special_tokens_mask[index]:
                continue
            start, end = (int(value) for value in offset_mapping[index])
            pre_entities.append({"word": sentence[start:end], "scores": token_scores, "start": start, "end": end,
                                 "index": index, "is_subword": False})
        return pre_entities

    def get_tag(self, entity_name: str) -> tuple[str, str]:
        """transformers' ("B" or "I", type), also for BIOES: `S-X` opens an entity as `B-X` does, `E-X` goes on one
        as `I-X` does (transformers would read both as types of their own)."""
        prefix, dash, kind = entity_name.partition("-")
        if dash and prefix in ("S", "E"):
            return ("B" if prefix == "S" else "I"), kind
        return super().get_tag(entity_name)

    def postprocess(self, all_outputs, aggregation_strategy=AggregationStrategy.NONE, ignore_labels=None, **kwargs):
        entities = super().postprocess(all_outputs, aggregation_strategy=aggregation_strategy,
                                       ignore_labels=ignore_labels, **kwargs)
        sentence = all_outputs[0]["sentence"]
        for entity in entities:  # the text itself, not words joined by spaces
            entity["word"] = sentence[entity["start"] : entity["end"]]
        return entities


__all__ = ["ElmoTokenClassificationPipeline"]
