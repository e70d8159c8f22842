"""Embedders: one Protocol; sentence-transformers loaded offline by default.

The implementation lives in :mod:`memory_services.embedding.sentence` (imported lazily: it
pulls in torch); :func:`memory_services.runtime.shared_embedder` gives the process-wide one.
"""

from memory_services.embedding.base import Embedder

__all__ = ["Embedder"]
