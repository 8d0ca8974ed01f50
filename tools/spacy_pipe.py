"""spaCy: an ELMo folder as the model of a spacy-transformers `transformer` pipe, documents batched as spaCy batches.

spacy-transformers 1.4 splits a batch's outputs by document by counting the elements of `input_ids`: one a position
for wordpiece models, 50 a position for ELMo's rows of characters. With its own architecture, every document after a
batch's first is aligned to the wrong rows, and numpy's negative indices make that silent. The architecture registered
here, `elmo.TransformerModel.v1`, is spacy-transformers' `TransformerModel.v3` with that split made per position. It
also registers ELMo with transformers' Auto classes: spacy-transformers passes no `trust_remote_code` to the model's
loader, so the model is the project's own code and no custom code runs.

    [components.transformer.model]
    @architectures = "elmo.TransformerModel.v1"
    name = "path/to/an/elmo/folder"

spaCy finds it through the package's entry points where the project is installed; elsewhere `import
elmo_hf.tools.spacy_pipe` registers it. docs/ecosystem.md shows a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable

from spacy_transformers.layers import TransformerModel
from spacy_transformers.util import registry

from elmo_hf import modeling_elmo  # noqa: F401  (registers ELMo with transformers' Auto classes)


@registry.architectures("elmo.TransformerModel.v1")
def elmo_transformer_model(name: str, get_spans: Callable | None = None, tokenizer_config: dict | None = None,
                           transformer_config: dict | None = None, mixed_precision: bool = False,
                           grad_scaler_config: dict | None = None) -> TransformerModel:
    """spacy-transformers' TransformerModel (the arguments of its v3 architecture) whose outputs are split by
    document per position of ELMo's rows. Without `get_spans`, a document is read whole (`doc_spans.v1`): ELMo has
    no length limit, and a word's vectors then depend on its whole document, not on overlapping windows of it."""
    if get_spans is None:
        get_spans = registry.span_getters.get("spacy-transformers.doc_spans.v1")()
    model = TransformerModel(name, get_spans, tokenizer_config or {}, transformer_config or {}, mixed_precision,
                             grad_scaler_config or {})
    forward = model._func  # thinc keeps a model's forward here; spacy-transformers has no other hook for the split

    def forward_split_per_position(model, docs, is_train):
        batch, backprop = forward(model, docs, is_train)
        batch.cached_doc_data = split_per_position(batch)  # what `batch.doc_data` (the pipe, its listeners) returns
        return batch, backprop

    model._func = forward_split_per_position
    return model


def split_per_position(batch) -> list:
    """`batch.split_by_doc()` (a FullTransformerBatch's), counting one element a position of `input_ids`: it is given
    the first character of each row while it splits, and each document gets its rows of characters back."""
    characters = batch.wordpieces.input_ids
    if characters.ndim != 3:  # not rows of characters: spacy-transformers' own count is right
        return batch.split_by_doc()
    batch.wordpieces.input_ids = characters[..., 0]
    try:
        documents = batch.split_by_doc()
    finally:
        batch.wordpieces.input_ids = characters
    start = 0
    for document in documents:
        spans = len(document.wordpieces.input_ids)
        if spans:  # an empty document keeps its empty batch
            document.wordpieces.input_ids = characters[start:start + spans]
            start += spans
    return documents
