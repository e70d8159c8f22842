"""The processor: an id, its specs, its flows, started and stopped by configuration."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, ClassVar, Self

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.disk import DiskNeed
from react_mem.errors import ReactMemError
from react_mem.metrics import (
    BackgroundMetrics,
    ConsumerMetrics,
    DownstreamMetrics,
    ProducerMetrics,
    families,
)
from react_mem.processor.audit import AUDIT, audited
from react_mem.processor.config_source import (
    ConfigHandler,
    ConfigServiceSource,
    WorkspaceConfig,
    apply_config_file,
)
from react_mem.processor.consumer import Settlement
from react_mem.processor.flow import Flow, FlowDefinition
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, Handler, ProducerSpec, Spec
from react_mem.schema.audit import AuditEvent
from react_mem.schema.base import WireModel

if TYPE_CHECKING:
    from react_mem.processor.kinds import MemoryKinds

logger = logging.getLogger(__name__)


class Processor:
    """Subclasses declare specs in ``__init__`` and handle messages; flows do the rest.

    Flows come from config type ``processor:{id}`` (key = flow id, value = a
    :class:`FlowDefinition`), pushed by the config service or read from a flow file.
    A flow whose definition changes is restarted; one that disappears is stopped.
    """

    #: Settings class, so the CLI can build and validate this processor's settings.
    Settings: ClassVar[type[ProcessorSettings]] = ProcessorSettings
    #: The default ``--id``.
    default_id: ClassVar[str] = "processor"
    #: Set by processors that serve fixed queues outside any flow (the config service):
    #: they run one flow, ``_/static``, with these topics and take no flow config.
    static_topics: ClassVar[dict[str, str] | None] = None
    #: Request operations recorded as audit events when they succeed (see
    #: :mod:`react_mem.processor.audit`); the flow's optional ``audit`` queue carries them.
    audited_operations: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        if not isinstance(settings, self.Settings):
            # Settings built for the base class (a group entry, a test): revalidate them
            # as this processor's own, so its extra keys get their defaults and checks.
            settings = self.Settings.load(settings.model_dump())
        self.settings = settings
        self.id = settings.id
        self.transport = transport
        self.specifications: list[Spec] = []
        self.flows: dict[tuple[str, str], Flow] = {}
        self.settlement = Settlement(
            max_redeliveries=settings.max_redeliveries, retry_delay=settings.retry_delay
        )
        self._metrics = families(registry)
        self._config_handlers: list[tuple[frozenset[str], ConfigHandler]] = []
        self._config_lock = asyncio.Lock()
        self._source: ConfigServiceSource | None = None
        self._stopped = asyncio.Event()
        self.register_config_handler([f"processor:{self.id}"], self.on_configure_flows)

    @classmethod
    def create(cls, settings: ProcessorSettings, transport: Transport, kinds: MemoryKinds) -> Self:
        """The processor the runtime starts, given the memory kinds it read at start-up: one
        that needs them (the agent, to recall from their sources) overrides this."""
        return cls(settings, transport)

    @classmethod
    def disk_needs(cls, settings: ProcessorSettings) -> list[DiskNeed]:
        """What this processor will keep on disk, checked for room before a process starts
        any of its processors (:func:`react_mem.disk.preflight`); none by default."""
        return []

    def register_specification(self, spec: Spec) -> None:
        self.specifications.append(spec)

    def serve_requests(
        self, request: type[WireModel], response: type[WireModel], handler: Handler
    ) -> None:
        """The usual service shape: ``handler`` consumes ``request`` from the flow's
        ``request`` queue and replies on its ``response`` queue; a message that fails is
        answered with ``response(error=...)``. Operations in :attr:`audited_operations` are
        audited."""
        if self.audited_operations:
            handler = audited(
                handler, processor=self.id, operations=self.audited_operations, clock=self._now
            )
            self._declare_audit()
        handler = self.admitted(handler)
        self.register_specification(
            ConsumerSpec(
                name="request",
                schema=request,
                handler=handler,
                response="response",
                error_reply=lambda error: response(error=error),
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=response))

    def admitted(self, handler: Handler) -> Handler:
        """``handler`` behind what decides whether this processor handles a request at
        all (outside its audit); a subclass may pass some on (partitioned replicas)."""
        return handler

    def audited_consumer(self, handler: Handler, operation: str) -> Handler:
        """``handler`` for a consumer whose every message performs ``operation``, audited
        as :meth:`serve_requests` audits (e.g. the learner's ``memory-forget`` queue)."""
        self._declare_audit()
        return audited(
            handler,
            processor=self.id,
            operations=frozenset({operation}),
            clock=self._now,
            operation_of=lambda message: operation,
        )

    def _declare_audit(self) -> None:
        if not any(s.name == AUDIT for s in self.specifications if isinstance(s, ProducerSpec)):
            self.register_specification(ProducerSpec(name=AUDIT, schema=AuditEvent, optional=True))

    def _now(self) -> float:
        """The processor's clock (a memory service's may be a test's movable one)."""
        clock = getattr(self, "clock", time.time)
        return float(clock())

    def register_config_handler(self, types: list[str], handler: ConfigHandler) -> None:
        """Call ``handler(workspace, {type: {key: value}}, version)`` when ``types`` change."""

        async def serialised(workspace: str, config: WorkspaceConfig, version: int) -> None:
            async with self._config_lock:
                await handler(workspace, config, version)

        self._config_handlers.append((frozenset(types), serialised))

    # -- metrics ---------------------------------------------------------------
    def consumer_metrics(self, consumer: str) -> ConsumerMetrics:
        return ConsumerMetrics(self._metrics, self.id, consumer)

    def producer_metrics(self, producer: str) -> ProducerMetrics:
        return ProducerMetrics(self._metrics, self.id, producer)

    def downstream_metrics(self, target: str) -> DownstreamMetrics:
        return DownstreamMetrics(self._metrics, self.id, target)

    def background_metrics(self) -> BackgroundMetrics:
        return BackgroundMetrics(self._metrics, self.id)

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        self._metrics.processor_info.labels(processor=self.id).info(
            {"class": f"{type(self).__module__}.{type(self).__qualname__}"}
        )
        if self.static_topics is not None:
            await self.start_flow("_", "static", FlowDefinition(topics=self.static_topics))
        elif self.settings.flows is not None:
            await apply_config_file(self.settings.flows, self._config_handlers)
            self._set_config_version(1)
        else:
            self._source = ConfigServiceSource(
                self.transport,
                self.id,
                self._config_handlers,
                timeout=self.settings.config_timeout,
                on_version=self._set_config_version,
            )
            await self._source.start()
        logger.info("%s started", self.id)

    def _set_config_version(self, version: int) -> None:
        self._metrics.config_version.labels(processor=self.id).set(version)

    async def run(self) -> None:
        """Serve until :meth:`stop`."""
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._source is not None:
            await self._source.stop()
            self._source = None
        async with self._config_lock:
            for key in list(self.flows):
                await self.stop_flow(*key)
        self._stopped.set()
        logger.info("%s stopped", self.id)

    # -- flows -----------------------------------------------------------------
    async def start_flow(self, workspace: str, name: str, definition: FlowDefinition) -> None:
        flow = Flow(self, workspace, name, definition)
        await flow.start()
        self.flows[(workspace, name)] = flow
        logger.info("%s: started flow %s/%s", self.id, workspace, name)

    async def stop_flow(self, workspace: str, name: str) -> None:
        flow = self.flows.pop((workspace, name), None)
        if flow is not None:
            await flow.stop()
            logger.info("%s: stopped flow %s/%s", self.id, workspace, name)

    async def on_configure_flows(
        self, workspace: str, config: WorkspaceConfig, version: int
    ) -> None:
        wanted: dict[str, FlowDefinition] = {}
        for name, value in config.get(f"processor:{self.id}", {}).items():
            try:
                wanted[name] = FlowDefinition.parse(f"{workspace}/{name}", value)
            except ReactMemError as exc:
                logger.error("%s: %s", self.id, exc)
        running = {name: f for (ws, name), f in self.flows.items() if ws == workspace}
        for name, flow in running.items():
            if wanted.get(name) != flow.definition:
                await self.stop_flow(workspace, name)
        for name, definition in wanted.items():
            if (workspace, name) not in self.flows:
                try:
                    await self.start_flow(workspace, name, definition)
                except ReactMemError as exc:
                    logger.error("%s: flow %s/%s not started: %s", self.id, workspace, name, exc)
        logger.debug("%s: config v%d applied to %s", self.id, version, workspace)
