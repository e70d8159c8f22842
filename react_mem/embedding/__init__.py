"""Embedders: one Protocol; sentence-transformers loaded offline by default.

The implementation lives in :mod:`react_mem.embedding.sentence` (imported lazily: it
pulls in torch); :func:`react_mem.embedding.shared.shared_embedder` gives the process-wide one.
"""

from react_mem.embedding.base import Embedder

__all__ = ["Embedder"]
