"""A small deterministic embedder for service tests that do not test embeddings.

Hashed bag of words: each lower-cased word adds ±1 to one of ``dimension`` coordinates
(both picked by BLAKE2 of the word), and the sum is scaled to unit length. Texts sharing
words are similar, the same text always gives the same vector, and nothing is loaded, so a
service starts at once. It knows no synonyms or paraphrases: tests of retrieval quality
keep the real model (:func:`react_mem.embedding.shared.shared_embedder`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Satisfies :class:`react_mem.embedding.base.Embedder`."""

    model_name = "hashed-bag-of-words"

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        #: Calls and texts embedded so far (tests count the work a request caused).
        self.calls = 0
        self.texts_embedded = 0

    async def start(self) -> None:
        """Nothing to load."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self.vector(text) for text in texts]

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dimension
        for word in _WORD.findall(text.casefold()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.dimension
            values[slot] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in values))
        if norm == 0.0:  # no words: a fixed unit vector, never a zero one (cosine needs length)
            return [1.0] + [0.0] * (self.dimension - 1)
        return [v / norm for v in values]
