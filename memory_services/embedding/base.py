"""The embedding seam."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    #: Vector size, e.g. 384 for all-MiniLM-L6-v2.
    dimension: int
    #: A name for logs and collection metadata.
    model_name: str

    async def start(self) -> None:
        """Load the model (I/O happens here, never in ``__init__``)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text; concurrent calls are batched together."""
