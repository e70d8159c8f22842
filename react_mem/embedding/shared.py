"""One embedder per process for each model and backend, shared by the memory services and
the agent that run in it (loading a model twice would double its memory)."""

from __future__ import annotations

import threading
from typing import Protocol

from react_mem.embedding.base import Embedder, EmbeddingBackend

_embedders: dict[tuple[str, str], Embedder] = {}
_embedders_lock = threading.Lock()


class EmbeddingChoice(Protocol):
    """What picks an embedder: memory services' settings, or the agent's."""

    @property
    def embedding_model(self) -> str: ...

    @property
    def embedding_backend(self) -> EmbeddingBackend: ...

    @property
    def torch_threads(self) -> int: ...


def shared_embedder(settings: EmbeddingChoice) -> Embedder:
    """The process-wide embedder for the model and backend (``await .start()`` it;
    starting again is a no-op). The first caller's ``torch_threads`` applies: torch's
    thread count is global to the process."""
    from react_mem.embedding.sentence import SentenceTransformerEmbedder

    key = (settings.embedding_model, settings.embedding_backend)
    with _embedders_lock:
        embedder = _embedders.get(key)
        if embedder is None:
            embedder = SentenceTransformerEmbedder(
                settings.embedding_model,
                backend=settings.embedding_backend,
                torch_threads=settings.torch_threads,
            )
            _embedders[key] = embedder
        return embedder
