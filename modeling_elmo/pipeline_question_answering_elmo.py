"""The question-answering pipeline of ELMo (transformers 5 has none of its own): `ElmoQuestionAnsweringPipeline`,
named in every saved config's `custom_pipelines` (`configuration_elmo.CUSTOM_PIPELINES`), so that a fine-tuned
folder answers questions with the same call whether this project is installed or not:

    from transformers import pipeline
    qa = pipeline("question-answering", model="out/squad", trust_remote_code=True)
    qa(question="Where was Ada born?", context="Ada was born in Lisbon in 1990.")
    # {"score": 0.93, "start": 16, "end": 22, "answer": "Lisbon"}

Inputs as transformers' old question-answering pipeline took them: `question=` and `context=` (strings, or lists of
the same length), a dict with both, or a list of such dicts. Options: `top_k` (a list of that many answers),
`handle_impossible_answer` ("no answer", `answer` "", is a candidate; default: whether the model was trained with
unanswerable questions), `max_answer_len` (in words), `max_seq_len`
and `doc_stride` (the windows of a long passage, in tokens and shared words). Each example's windows are one batch.

This file travels to the Hub as remote code with its siblings: it imports only torch, transformers and them.
"""

from __future__ import annotations

from transformers import Pipeline

from .question_answering_elmo import best_answers, encode_windows


class ElmoQuestionAnsweringPipeline(Pipeline):
    """Answers a question about a passage with an `ElmoForQuestionAnswering` model: the passage's best span,
    `{"score", "start", "end", "answer"}` with character offsets into the passage."""

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __call__(self, *args, **kwargs):
        """`pipe(question=..., context=...)`, `pipe({"question": ..., "context": ...})` or a list of such dicts: one
        answer (a dict; a list of `top_k` dicts with `top_k`) per question, a list of them for several."""
        if args:
            inputs = args[0]
        elif "question" in kwargs and "context" in kwargs:
            question, context = kwargs.pop("question"), kwargs.pop("context")
            for name, value in (("question", question), ("context", context)):
                _check_text(name, value, allow_list=True)
            if isinstance(question, str) and isinstance(context, str):
                inputs = {"question": question, "context": context}
            else:
                questions = [question] * len(context) if isinstance(question, str) else list(question)
                contexts = [context] * len(questions) if isinstance(context, str) else list(context)
                if len(questions) != len(contexts):
                    raise ValueError(f"{len(questions)} questions for {len(contexts)} contexts: give as many of each")
                inputs = [{"question": q, "context": c} for q, c in zip(questions, contexts)]
        else:
            raise ValueError("give question= and context=, or a dict {'question': ..., 'context': ...} (or a list)")
        for item in inputs if isinstance(inputs, list) else [inputs]:
            if not isinstance(item, dict):
                raise ValueError(f"each input is a dict with 'question' and 'context', got {item!r:.100}")
            for name in ("question", "context"):  # as transformers' question-answering pipeline checks them
                if name not in item:
                    raise KeyError("You need to provide a dictionary with keys {question:..., context:...}")
                _check_text(name, item[name])
        kwargs["batch_size"] = 1  # an example's windows are its batch
        return super().__call__(inputs, **kwargs)

    def _sanitize_parameters(self, top_k=None, handle_impossible_answer=None, max_answer_len=None, max_seq_len=None,
                             doc_stride=None, max_question_len=None, **unused):
        preprocess = {key: value for key, value in (("max_length", max_seq_len), ("stride", doc_stride),
                                                    ("max_question_words", max_question_len)) if value is not None}
        postprocess = {key: value for key, value in (("top_k", top_k), ("max_answer_words", max_answer_len),
                                                     ("handle_impossible_answer", handle_impossible_answer))
                       if value is not None}
        for name, value in (("top_k", top_k), ("max_answer_len", max_answer_len), ("max_seq_len", max_seq_len),
                            ("max_question_len", max_question_len)):
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} parameter should be >= 1 (got {value})")
        if doc_stride is not None and not (isinstance(doc_stride, int) and doc_stride >= 0):
            raise ValueError(f"doc_stride parameter should be >= 0 (got {doc_stride})")
        if doc_stride is not None and max_seq_len is not None and doc_stride > max_seq_len:
            raise ValueError(f"`doc_stride` ({doc_stride}) is larger than `max_seq_len` ({max_seq_len})")
        return preprocess, {}, postprocess

    def preprocess(self, item, max_length: int = 256, stride: int = 32, max_question_words: int = 64, **kwargs):
        windows = encode_windows(self.tokenizer, [item["question"]], [item["context"]], max_length=max_length,
                                 stride=stride, max_question_words=max_question_words, padding=True,
                                 return_tensors="pt")
        return {"model_inputs": dict(windows.encodings), "windows": windows}

    def _forward(self, inputs, **kwargs):
        output = self.model(**inputs["model_inputs"])
        return {"start_logits": output.start_logits, "end_logits": output.end_logits, "windows": inputs["windows"]}

    def postprocess(self, outputs, top_k=None, max_answer_words: int = 30, handle_impossible_answer=None, **kwargs):
        if handle_impossible_answer is None:  # as the model was trained: with unanswerable questions or not
            handle_impossible_answer = bool(getattr(self.model.config, "qa_null_answer", None))
        answers = best_answers(outputs["start_logits"].float().numpy(), outputs["end_logits"].float().numpy(),
                               outputs["windows"], top_k=top_k or 1, max_answer_words=max_answer_words,
                               handle_impossible_answer=handle_impossible_answer)[0]
        return answers if top_k is not None else answers[0]


def _check_text(name: str, value, allow_list: bool = False) -> None:
    """A question or a context: a non-empty string (or, given by keyword, a list of them), as transformers'
    question-answering pipeline requires; its errors' words."""
    if value is None:
        raise ValueError(f"`{name}` cannot be None")
    if allow_list and isinstance(value, (list, tuple)):
        for item in value:
            _check_text(name, item)
        return
    if not isinstance(value, str):
        raise ValueError(f"`{name}` must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"`{name}` cannot be empty")


__all__ = ["ElmoQuestionAnsweringPipeline"]
