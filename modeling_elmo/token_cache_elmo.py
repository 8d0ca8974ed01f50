"""The token cache: layer-0 vectors of frequent tokens kept for inference, so that the character CNN runs once per
distinct token ("cached" in `kernels_elmo.ALL_CHAR_CNN_FUNCTIONS`), and its methods on `ElmoModel`
(`ElmoTokenCacheMixin`: `enable_token_cache`, `build_token_cache`, ...). Outputs equal those without the cache
(tests/test_fast_paths.py); docs/architecture.md ("Fast paths").

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, the standard library and
its siblings.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import torch

from .char_cnn_kernels_elmo import encode_inference
from .kernels_elmo import ALL_CHAR_CNN_FUNCTIONS
from .matmul_elmo import weights_key

logger = logging.getLogger(__name__)


class ElmoTokenCache:
    """A bounded LRU cache of layer-0 vectors: a token's character ids -> its `ElmoCharacterEncoder` output.

    For inference only: the encoder consults it only when no gradient is needed, and a forward pass that needs one
    (training) empties it. Entries are valid for one state of the encoder's weights: at every call `encode_cached`
    compares `weights_key` (every parameter's storage, version counter, dtype and device, a digest of the small
    parameters' values) and the autocast setting with the key the entries were made under, and empties the cache
    when they differ; `load_state_dict` empties it too. `hits` counts tokens served without running the character
    CNN (cached earlier, or repeated within the batch), `misses` the tokens it encoded.
    """

    def __init__(self, max_size: int):
        self.max_size = _check_cache_size(max_size)
        self.entries: OrderedDict[bytes, torch.Tensor] = OrderedDict()  # least recently used first
        self.weights_key: tuple | None = None
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        self.entries.clear()
        self.weights_key = None

    def resize(self, max_size: int) -> None:
        self.max_size = _check_cache_size(max_size)
        while len(self.entries) > self.max_size:
            self.entries.popitem(last=False)

    def info(self) -> dict:
        return {"size": len(self.entries), "max_size": self.max_size, "hits": self.hits, "misses": self.misses}


def _check_cache_size(max_size) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ValueError(f"the token cache size must be a positive integer, got {max_size!r}")
    return max_size


def encode_cached(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """Inference through the token cache: each distinct token of the batch is looked up, and only the missing ones
    run through the CNN. Layer 0 is context-independent, so the vectors are those of the plain path (tested)."""
    cache = encoder.token_cache
    device = char_ids.device
    autocast = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else None
    int8 = getattr(encoder.config, "lstm_implementation", None) == "int8"  # int8 vectors are not float32's
    key = weights_key(encoder.parameters(), autocast, int8)  # what the cached vectors depend on besides the token
    if cache.weights_key != key:
        if cache.entries:
            logger.info("ELMo token cache emptied: the character encoder's weights (or autocast) changed")
        cache.clear()
        cache.weights_key = key
    # int16 holds the 262 byte ids; a character dictionary (ELMoForManyLangs) may need more
    key_dtype = torch.int16 if encoder.char_embedding.num_embeddings <= 2**15 else torch.int32
    rows = char_ids.detach().to(device="cpu", dtype=key_dtype).contiguous().numpy()
    blob, width = rows.tobytes(), rows.shape[1] * rows.itemsize
    keys = [blob[i : i + width] for i in range(0, len(blob), width)]  # one key per token
    slot: dict[bytes, int] = {}  # distinct token -> its index among the distinct tokens of this batch
    first: list[int] = []  # the row of each distinct token's first occurrence
    inverse = []
    for row, token in enumerate(keys):
        index = slot.get(token)
        if index is None:
            index = slot[token] = len(first)
            first.append(row)
        inverse.append(index)
    entries = cache.entries
    vectors: list[torch.Tensor | None] = []
    missing = []
    for index, token in enumerate(slot):
        vector = entries.get(token)
        if vector is None:
            missing.append(index)
        else:
            entries.move_to_end(token)
        vectors.append(vector)
    if missing:
        rows_to_encode = torch.tensor([first[i] for i in missing], device=device)
        encoded = encode_inference(encoder, char_ids[rows_to_encode])  # (M, P)
        for index, vector in zip(missing, encoded):
            vector = vector.clone()  # its own storage, so that evicting frees it
            vectors[index] = vector
            entries[keys[first[index]]] = vector
        while len(entries) > cache.max_size:
            entries.popitem(last=False)
    cache.misses += len(missing)
    cache.hits += len(keys) - len(missing)
    table = torch.stack(vectors)  # (U, P)
    return table[torch.tensor(inverse, device=table.device)]  # (N, P)


ALL_CHAR_CNN_FUNCTIONS.register("cached", encode_cached)


class ElmoTokenCacheMixin:
    """The token cache's methods on `ElmoModel` (inference: layer 0 of frequent tokens without the character CNN).
    The cache lives on `self.char_encoder.token_cache`; it is never saved."""

    def enable_token_cache(self, max_size: int = 50_000) -> None:
        """Keep the layer-0 vectors of up to `max_size` distinct tokens (least recently used evicted) and encode each
        distinct token of a batch once. Used only when no gradient is needed; emptied whenever the weights change
        (see `ElmoTokenCache`). Costs `max_size * projection_dim` floats at most (100 MB for 50,000 tokens at the
        original size). Outputs equal those without the cache (tested)."""
        if self.char_encoder.token_cache is None:
            self.char_encoder.token_cache = ElmoTokenCache(max_size)
        else:
            self.char_encoder.token_cache.resize(max_size)

    def disable_token_cache(self) -> None:
        """Drop the token cache and its memory; every token goes through the character CNN again."""
        self.char_encoder.token_cache = None

    def clear_token_cache(self) -> None:
        """Empty the token cache (it stays enabled). Needed only after changing weights behind autograd's back
        (`param.data.copy_(...)`); every other change is noticed."""
        if self.char_encoder.token_cache is not None:
            self.char_encoder.token_cache.clear()

    def token_cache_info(self) -> dict | None:
        """`{"size", "max_size", "hits", "misses"}` of the token cache, or None when it is off."""
        cache = self.char_encoder.token_cache
        return cache.info() if cache is not None else None

    @torch.no_grad()
    def build_token_cache(self, tokens, tokenizer=None, batch_size: int = 4096) -> int:
        """Encode a vocabulary once into the token cache (enabling it, and growing it to fit when needed).

        Args:
            tokens: character ids `(V, max_characters_per_token)` (a tensor or nested lists), or words
                (`list[str]`) together with `tokenizer` (an `ElmoTokenizer`, whose `convert_tokens_to_char_ids` gives
                the ids).
            tokenizer: needed for words only.
            batch_size: tokens per run of the character CNN.

        Returns:
            The number of distinct tokens now cached.
        """
        if isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], str):
            if tokenizer is None:
                raise ValueError("build_token_cache got words: pass tokenizer= to turn them into character ids")
            tokens = tokenizer.convert_tokens_to_char_ids(list(tokens))
        char_ids = torch.as_tensor(tokens, dtype=torch.long)
        width = self.config.max_characters_per_token
        if char_ids.dim() != 2 or char_ids.shape[1] != width:
            raise ValueError(f"token character ids must have shape (V, {width}), got {tuple(char_ids.shape)}")
        cache = self.char_encoder.token_cache
        if cache is None or cache.max_size < char_ids.shape[0]:
            self.enable_token_cache(max(char_ids.shape[0], cache.max_size if cache is not None else 1))
        device = self.char_encoder.char_embedding.weight.device
        for chunk in char_ids.split(batch_size):
            self.char_encoder(chunk.to(device))
        return len(self.char_encoder.token_cache.entries)
