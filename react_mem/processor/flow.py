"""One running flow of one processor: its producers, clients and consumers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Delivery, Producer, Receipt, send_queued
from react_mem.errors import BadRequest, ConfigurationError
from react_mem.metrics import ProducerMetrics
from react_mem.processor.background import Background
from react_mem.processor.consumer import ConsumerRunner
from react_mem.processor.context import MessageContext
from react_mem.processor.specs import ConsumerSpec, ProducerSpec, RequestResponseSpec
from react_mem.schema.base import MAX_MESSAGE_BYTES, WireModel

if TYPE_CHECKING:
    from react_mem.processor.base import Processor

logger = logging.getLogger(__name__)


class FlowDefinition(BaseModel):
    """The value of a ``processor:{id}`` config entry: queues per spec name, parameters."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    topics: dict[str, str] = Field(default_factory=dict)
    parameters: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def parse(cls, where: str, value: Any) -> FlowDefinition:
        try:
            if isinstance(value, str | bytes):
                return cls.model_validate_json(value)
            return cls.model_validate(value)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid flow definition {where}: {exc}") from exc


class Flow:
    """Producers and clients start before consumers, so handlers can send at once."""

    def __init__(
        self, processor: Processor, workspace: str, name: str, definition: FlowDefinition
    ) -> None:
        self.processor = processor
        self.workspace, self.name, self.definition = workspace, name, definition
        self._producers: dict[str, tuple[Producer, ProducerMetrics]] = {}
        self._clients: dict[str, RequestResponseClient[Any, Any]] = {}
        self._runners: list[ConsumerRunner] = []
        #: Work done after a reply (provenance), bounded, ended with the flow.
        self.background = Background(
            f"{processor.id} {workspace}/{name}", processor.background_metrics()
        )

    @property
    def parameters(self) -> dict[str, Any]:
        return self.definition.parameters

    def queue(self, spec_name: str) -> Queue:
        try:
            return Queue.parse(self.definition.topics[spec_name])
        except KeyError:
            raise ConfigurationError(
                f"flow {self.workspace}/{self.name} of {self.processor.id} "
                f"has no queue for {spec_name!r} (topics.{spec_name})"
            ) from None

    async def start(self) -> None:
        proc = self.processor
        try:
            for spec in proc.specifications:
                if isinstance(spec, ProducerSpec):
                    if spec.optional and spec.name not in self.definition.topics:
                        continue
                    producer = await proc.transport.producer(self.queue(spec.name))
                    self._producers[spec.name] = (producer, proc.producer_metrics(spec.name))
                elif isinstance(spec, RequestResponseSpec):
                    await self._start_client(spec)
            for spec in proc.specifications:
                if isinstance(spec, ConsumerSpec):
                    if spec.optional and spec.name not in self.definition.topics:
                        continue
                    await self._start_consumer(spec)
        except BaseException:
            await self.stop()
            raise

    async def _start_client(self, spec: RequestResponseSpec) -> None:
        topics = self.definition.topics
        if spec.optional and not (spec.request in topics and spec.response in topics):
            return
        client: RequestResponseClient[Any, Any] = RequestResponseClient(
            self.processor.transport,
            self.queue(spec.request).id,
            self.queue(spec.response).id,
            spec.response_schema,
            subscriber=self.processor.id,
            timeout=spec.timeout,
            metrics=self.processor.downstream_metrics(spec.request),
            resend=spec.resend,
        )
        await client.start()
        self._clients[spec.request] = client

    async def _start_consumer(self, spec: ConsumerSpec) -> None:
        proc = self.processor
        queue = self.queue(spec.name)

        def context(delivery: Delivery) -> MessageContext:
            return MessageContext(
                flow=self,
                id=delivery.properties.get("id"),
                properties=delivery.properties,
                redelivery_count=delivery.redelivery_count,
                response=spec.response,
            )

        runner = ConsumerRunner(
            spec=spec,
            queue=queue,
            # TrustGraph's flow subscription name, so replicas share the work.
            subscription=f"{proc.id}--{self.workspace}--{self.name}--{spec.name}",
            transport=proc.transport,
            context=context,
            concurrency=proc.settings.concurrency,
            settlement=proc.settlement,
            metrics=proc.consumer_metrics(queue.id),
        )
        await runner.start()
        self._runners.append(runner)

    async def send(self, producer: str, message: WireModel, *, id: str | None = None) -> None:
        """Send ``message`` on the named producer spec's queue, carrying the correlation id."""
        handle, metrics = self._producer(producer)
        await handle.send(_encoded(message), {"id": id} if id is not None else {})
        metrics.sent()

    async def send_queued(
        self, producer: str, message: WireModel, *, id: str | None = None
    ) -> Receipt:
        """:meth:`send`, returning once ``message`` is queued behind what was sent on that
        producer before: the result is the broker's receipt, to await later. Messages that
        must arrive in order can go out without each waiting for the last one's receipt."""
        handle, metrics = self._producer(producer)
        properties = {"id": id} if id is not None else {}
        receipt = await send_queued(handle, _encoded(message), properties)

        def count(done: Receipt) -> None:
            if not done.cancelled() and done.exception() is None:
                metrics.sent()

        receipt.add_done_callback(count)
        return receipt

    def _producer(self, name: str) -> tuple[Producer, ProducerMetrics]:
        try:
            return self._producers[name]
        except KeyError:
            raise ConfigurationError(f"{self.processor.id} declares no producer {name!r}") from None

    def has_producer(self, name: str) -> bool:
        """Whether the (optional) producer ``name`` runs in this flow."""
        return name in self._producers

    def has_client(self, request: str) -> bool:
        """Whether the (optional) client ``request`` runs in this flow."""
        return request in self._clients

    def client(self, request: str) -> RequestResponseClient[Any, Any]:
        """The request/response client declared with request spec name ``request``."""
        try:
            return self._clients[request]
        except KeyError:
            raise ConfigurationError(
                f"flow {self.workspace}/{self.name} has no client {request!r}"
            ) from None

    async def stop(self) -> None:
        """Consumers first (running handlers finish, bounded), then the after-reply work
        (bounded), then the clients and producers that work used."""
        closers: list[Callable[[], Any]] = [r.stop for r in self._runners]
        closers.append(self.background.close)
        closers += [c.close for c in self._clients.values()]
        closers += [p.close for p, _ in self._producers.values()]
        for close in closers:
            try:
                await close()
            except Exception as exc:  # noqa: BLE001 - every closer runs
                logger.warning("stopping flow %s/%s: %r", self.workspace, self.name, exc)
        self._runners.clear()
        self._clients.clear()
        self._producers.clear()


def _encoded(message: WireModel) -> bytes:
    data = message.encode()
    if len(data) > MAX_MESSAGE_BYTES:
        # Refused here, at once: the broker would refuse it only after its send timeout,
        # holding the handler's slot meanwhile. A reply's caller gets this as its error.
        raise BadRequest(
            f"{type(message).__name__} of {len(data)} bytes is over the bus's message "
            f"limit of {MAX_MESSAGE_BYTES} bytes ({MAX_MESSAGE_BYTES // 2**20} MiB): "
            "ask for less at a time (a smaller limit, or pages with offset)",
            type="too-large",
        )
    return data
