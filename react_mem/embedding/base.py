"""The embedding seam."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

#: What runs a sentence-transformers model: torch itself, or its ONNX export (fp32 or int8).
EmbeddingBackend = Literal["torch", "onnx", "onnx-int8"]
DEFAULT_BACKEND: EmbeddingBackend = "onnx-int8"


class Embedder(Protocol):
    # Read-only to its users (an attribute satisfies them; a wrapper reads them through).
    @property
    def dimension(self) -> int:
        """Vector size, e.g. 384 for all-MiniLM-L6-v2."""

    @property
    def model_name(self) -> str:
        """A name for logs and collection metadata."""

    async def start(self) -> None:
        """Load the model (I/O happens here, never in ``__init__``)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text; concurrent calls are batched together."""


#: Per vector, the character ranges (start, end) of a text whose tokens it pools.
Spans = list[list[tuple[int, int]]]


@runtime_checkable
class SpanEmbedder(Protocol):
    """An embedder that also pools parts of a text from the text's own model run."""

    async def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Spans]
    ) -> tuple[list[list[float]], list[list[list[float]]]]:
        """Each text's vector, and per text a unit vector per entry of its ``spans``: the
        mean of the token embeddings in those character ranges (late chunking)."""
