"""What the memory services share: settings, store, embedder, scope, paging, sweeps.

A :class:`MemoryProcessor` is generic over its settings class and its opened memory
(``class FactMemoryProcessor(MemoryProcessor[FactMemorySettings, FactMemory])``:
``self.settings`` is typed as the first, and the processor's ``Settings`` is set to it). It
opens its vector store and embedder in :meth:`start` (never in ``__init__``), lets the
subclass build its memory on them (:meth:`open_memory`, once), starts its flows, then runs
:meth:`sweep` every ``settings.sweep_interval`` seconds in the background (retention, idle
detection, memory-size gauges) until :meth:`stop`, which closes the store. Handlers get the
memory as their first argument (:meth:`with_memory`). The store (default: the configured
backend) and the embedder (default: the process-wide one for the configured model) can be
passed in, so tests run a service on a small deterministic embedder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import typing
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypedDict, TypeVar, Unpack

from prometheus_client import CollectorRegistry, Gauge, Histogram

from memory_services import heap
from memory_services.disk import FRESH_STORE, DiskReserve
from memory_services.metrics import index_duration, memory_items, partition_passed
from memory_services.partition import Partition
from memory_services.pii.fields import stores
from memory_services.pii.guard import CONFIG_TYPE as PII_CONFIG_TYPE
from memory_services.pii.guard import PiiGuard
from memory_services.retry import retrying_embedder, retrying_store
from memory_services.runtime import MemorySettings, make_store
from memory_services.store.base import Scope, VectorStore
from react_mem.bus.transport import Transport
from react_mem.disk import MIB, DiskNeed, first_start
from react_mem.embedding.base import Embedder
from react_mem.embedding.shared import shared_embedder
from react_mem.errors import BadRequest
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import Handler
from react_mem.processor.started import Started
from react_mem.retention import CONFIG_TYPE as RETENTION_CONFIG_TYPE
from react_mem.retention import WorkspaceRetention

logger = logging.getLogger(__name__)

#: Longest workspace, collection, user or conversation id accepted in a scope.
MAX_SCOPE_ID_CHARS = 256

#: Most characters of a bad page ``offset`` an error repeats.
PAGE_OFFSET_CHARS = 64

Clock = Callable[[], float]
SettingsT = TypeVar("SettingsT", bound=MemorySettings)
#: What a service builds on the open store: its memory, what its handlers work on.
MemoryT = TypeVar("MemoryT")
M = TypeVar("M")


class MemoryOptions(TypedDict, total=False):
    """What a memory service takes besides its settings and transport (all optional)."""

    registry: CollectorRegistry | None
    #: Epoch seconds (a test's movable clock); default ``time.time``.
    clock: Clock
    #: Not yet open (the processor opens and closes it); default: the configured backend.
    store: VectorStore | None
    #: Default: the process-wide one for the configured model (:func:`shared_embedder`).
    embedder: Embedder | None


@dataclass(frozen=True)
class Opened(Generic[MemoryT]):
    """What :meth:`MemoryProcessor.start` opened, closed together on stop."""

    store: VectorStore
    memory: MemoryT


class MemoryProcessor(Processor, ABC, Generic[SettingsT, MemoryT]):
    Settings: ClassVar[type[ProcessorSettings]] = MemorySettings
    #: Of the ``Settings`` class (:class:`Processor` revalidates what it is given as it).
    settings: SettingsT
    #: Removals are audited (:mod:`react_mem.processor.audit`); an operation a service does
    #: not have is never seen.
    audited_operations: ClassVar[frozenset[str]] = frozenset({"delete", "purge", "forget"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ``MemoryProcessor[XSettings, XMemory]`` as a base: settings load as XSettings.
        for base in cls.__dict__.get("__orig_bases__", ()):
            if typing.get_origin(base) is MemoryProcessor:
                settings_class = typing.get_args(base)[0]
                if isinstance(settings_class, type):
                    cls.Settings = settings_class

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, **options: Unpack[MemoryOptions]
    ) -> None:
        registry = options.get("registry")
        super().__init__(settings, transport, registry=registry)
        self.clock = options.get("clock", time.time)
        self.items: Gauge = memory_items(registry)
        self.index_duration: Histogram = index_duration(registry)
        self._given_store, self._given_embedder = options.get("store"), options.get("embedder")
        self.started: Started[Opened[MemoryT]] = Started(self.id)
        self._sweeper: asyncio.Task[None] | None = None
        #: Screens what the service is asked to store for PII and secrets.
        self.pii = PiiGuard(self.id, self.settings.pii(), registry)
        self.register_config_handler([PII_CONFIG_TYPE], self.pii.on_config)
        #: The owners this replica serves (all, unless it is one of partitioned replicas).
        self.partition = Partition.parse(self.settings.partition)
        self._passed = partition_passed(registry).labels(processor=self.id)
        s = self.settings
        self.disk = DiskReserve(self.id, s.store_dir, s.min_free_disk_mib, registry)

    @classmethod
    def disk_needs(cls, settings: ProcessorSettings) -> list[DiskNeed]:
        """The embedded store's first files and its floor (a Qdrant server's are its own)."""
        s = (
            settings
            if isinstance(settings, MemorySettings)
            else cls.Settings.load(settings.model_dump())
        )
        if not isinstance(s, MemorySettings) or s.vector_store != "edge":
            return []
        fresh = FRESH_STORE if first_start(s.store_dir) else 0
        return [DiskNeed(s.id, s.store_dir, fresh, s.min_free_disk_mib * MIB)]

    def admitted(self, handler: Handler) -> Handler:
        """A write is refused while the store's disk is nearly full (:mod:`..disk`). A
        partitioned replica passes on the requests of owners it does not serve: settled,
        unanswered and unaudited (the owner's replica answers them)."""
        handler = self._room_checked(handler)
        if self.partition.whole:
            return handler
        partition, passed = self.partition, self._passed

        async def owned(message: Any, ctx: MessageContext) -> None:
            if partition.owns(ctx.flow.workspace, getattr(message, "user", None)):
                await handler(message, ctx)
            else:
                passed.inc()

        return owned

    def _room_checked(self, handler: Handler) -> Handler:
        disk = self.disk

        async def checked(message: Any, ctx: MessageContext) -> None:
            if stores(message):
                disk.check_write()
            await handler(message, ctx)

        return checked

    def retention(self, key: str, default_days: float | None) -> WorkspaceRetention:
        """A retention period with this service's default, which a workspace's agent-mem
        ``key`` overrides (see :mod:`react_mem.retention`)."""
        retention = WorkspaceRetention(self.id, key, default_days)
        self.register_config_handler([RETENTION_CONFIG_TYPE], retention.on_config)
        return retention

    def with_memory(
        self, handler: Callable[[MemoryT, M, MessageContext], Awaitable[None]]
    ) -> Callable[[M, MessageContext], Awaitable[None]]:
        """``handler`` as a spec's handler: called with the opened memory first."""

        async def bound(message: M, ctx: MessageContext) -> None:
            await handler(self.started.state.memory, message, ctx)

        return bound

    # -- subclass hooks ------------------------------------------------------------
    @abstractmethod
    async def open_memory(self, store: VectorStore, embedder: Embedder) -> MemoryT:
        """Create collections and build the memory; called once the store is open."""

    async def sweep(self, memory: MemoryT) -> None:
        """One background pass (retention, idle detection, gauges)."""

    async def close_memory(self, memory: MemoryT) -> None:
        """Write what the memory holds back; called on stop, before the store closes."""

    # -- lifecycle -----------------------------------------------------------------
    @property
    def store(self) -> VectorStore:
        return self.started.state.store

    @property
    def memory(self) -> MemoryT:
        return self.started.state.memory

    async def start(self) -> None:
        if self._given_store is None and self.settings.vector_store == "edge":
            # Before its files are mapped: a clear stop, not SIGBUS.
            self.disk.check_start(FRESH_STORE if first_start(self.settings.store_dir) else 0)
        store = retrying_store(
            self._given_store or make_store(self.settings, on_indexed=self._indexed)
        )
        await store.open()
        try:
            embedder = retrying_embedder(self._given_embedder or shared_embedder(self.settings))
            await asyncio.gather(embedder.start(), self.pii.start())
            self.started.open(Opened(store, await self.open_memory(store, embedder)))
        except BaseException:
            await store.close()
            raise
        try:
            await super().start()
        except BaseException:
            await self._close()
            raise
        self._sweeper = asyncio.create_task(self._sweep_loop(), name=f"{self.id}:sweep")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await super().stop()
        await self._close()

    def _indexed(self, collection: str, seconds: float) -> None:
        self.index_duration.labels(processor=self.id, collection=collection).observe(seconds)

    async def _close(self) -> None:
        opened = self.started.close()
        if opened is not None:
            try:
                await self.close_memory(opened.memory)
            finally:
                await opened.store.close()

    async def _sweep_loop(self) -> None:
        memory = self.started.state.memory  # open until stop() ends this task
        low = False
        while True:
            try:
                # A sweep writes too (consolidation, flags, ends): not below the floor.
                was, low = low, self.disk.low()
                if low and not was:
                    logger.warning("%s: background sweeps wait: %s", self.id, self.disk.describe())
                if not low:
                    await self.sweep(memory)
                # Deletes and index runs free engine memory that the allocator keeps.
                await heap.release()
            except Exception:
                # A store outage must not end the task: the next pass tries again.
                logger.exception("%s: background sweep failed", self.id)
            await asyncio.sleep(self.settings.sweep_interval)

    # -- requests ------------------------------------------------------------------
    def scope(
        self,
        ctx: MessageContext,
        collection: str,
        user: str | None = None,
        conversation: str | None = None,
    ) -> Scope:
        """The request's scope: the flow's workspace + the request's collection, user and
        conversation (normalised by :class:`Scope`: "" is absent, as TrustGraph peers send it).
        A request only ever gets its own owner's scope, never :class:`AllOwners`."""
        parts = (ctx.flow.workspace, collection, user or "", conversation or "")
        if any(len(p) > MAX_SCOPE_ID_CHARS for p in parts):
            raise BadRequest(
                f"collection, user and conversation_id are limited to {MAX_SCOPE_ID_CHARS} "
                "characters",
                type="too-large",
            )
        return Scope(ctx.flow.workspace, collection, user, conversation)


def page_offset(operation: str, offset: str | None) -> str | None:
    """A ``list`` request's ``offset``: the ``next_offset`` of the page before (a store
    point id), refused with a clear error unless it is one (a UUID)."""
    if offset is None:
        return None
    with contextlib.suppress(ValueError):
        if len(offset) <= PAGE_OFFSET_CHARS:
            return str(uuid.UUID(offset))
    shown = offset[:PAGE_OFFSET_CHARS]
    raise BadRequest(f"{operation}: {shown!r} is not an offset from a previous page")
