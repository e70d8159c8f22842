"""Transport over Apache Pulsar (or any Pulsar-protocol broker) with ``pulsar.asyncio``.

Queues map onto topics as TrustGraph maps them (:func:`pulsar_topic`); flow and request
queues are Shared subscriptions, response and notify queues Exclusive ones.

``pulsar.asyncio`` creates and closes every producer and consumer; a message's send, receive
and acknowledgement (every hop of every message) go to the native client beneath it
directly (:mod:`react_mem.bus.pulsar_calls`): one loop callback per completion instead of
its future, task and wrappers, and none at all for a completion on the loop's own thread.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import _pulsar
import pulsar
import pulsar.asyncio

from react_mem.bus.pulsar_calls import Native
from react_mem.bus.queues import Queue
from react_mem.bus.retrying import create_with_retries
from react_mem.bus.transport import Delivery, Receipt
from react_mem.errors import BusError, ConsumerClosed

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: ``pulsar.asyncio`` raises its own exception class, not the synchronous client's.
_ERRORS = (pulsar.PulsarException, pulsar.asyncio.PulsarException)


def _closed(exc: Exception) -> bool:
    """Whether ``exc`` says the consumer is closed (by us, or by the broker)."""
    result = exc.error() if isinstance(exc, pulsar.asyncio.PulsarException) else None
    closed = (pulsar.Result.AlreadyClosed, pulsar.Result.ConsumerNotFound)
    return result in closed or isinstance(exc, pulsar.AlreadyClosed)


def pulsar_topic(queue: Queue) -> str:
    """``flow:tg:x`` -> ``persistent://tg/flow/x``; the other classes are non-persistent."""
    scheme = "persistent" if queue.persistent else "non-persistent"
    return f"{scheme}://{queue.topicspace}/{queue.cls}/{queue.topic}"


@dataclass(frozen=True, kw_only=True)
class PulsarOptions:
    url: str
    api_key: str | None = None
    listener: str | None = None
    #: TLS (``pulsar+ssl://`` URLs): the CA bundle the broker's certificate is checked
    #: against (None: the system's), whether its host name must match, and a client
    #: certificate and key for mutual TLS authentication (used when no token is given).
    tls_trust_certs_file: str | None = None
    tls_validate_hostname: bool = True
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: How long to keep retrying to create a producer or consumer while the broker is away.
    connect_timeout: float = 60.0
    #: Delay before a negatively acknowledged message on a persistent queue comes back.
    nack_delay: float = 1.0
    #: Messages prefetched per consumer of a persistent queue; small, so Shared
    #: subscriptions balance their backlog across replicas.
    receiver_queue_size: int = 100
    #: The same for non-persistent queues, where the broker silently drops what a consumer
    #: has no permits for (the client returns permits only as the application receives,
    #: every half queue): a consumer whose event loop is busy for a while must not lose
    #: what arrives meanwhile. At 1000, a burst past it was lost (a streamed reply is a
    #: message per few tokens, and every subscription to a response queue gets every
    #: replica's replies); the client allocates nothing until messages are queued.
    non_persistent_receiver_queue_size: int = 20_000
    #: Off by default: batching trades up to its delay in latency for throughput.
    batching: bool = False


def tls_args(options: PulsarOptions) -> dict[str, Any]:
    """The client's TLS arguments: certificates are always verified (never
    ``tls_allow_insecure_connection``); host names too unless turned off."""
    args: dict[str, Any] = {
        "tls_validate_hostname": options.tls_validate_hostname,
        "tls_allow_insecure_connection": False,
    }
    if options.tls_trust_certs_file:
        args["tls_trust_certs_file_path"] = options.tls_trust_certs_file
    return args


class PulsarProducer:
    def __init__(self, producer: pulsar.asyncio.Producer, topic: str, open_: set[Any]) -> None:
        self._producer, self._topic, self._open = producer, topic, open_
        self._native = Native(producer, "_producer", topic)
        open_.add(self)

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        await self.queue(data, properties)

    async def send_queued(self, data: bytes, properties: dict[str, str]) -> Receipt:
        return self.queue(data, properties)

    def queue(self, data: bytes, properties: dict[str, str]) -> Receipt:
        """Send ``data`` in order behind every message given to this producer before, without
        waiting for their receipts; the result is its own receipt. The message is in the
        client's producer queue when this returns, which sends in that order (and sends
        again in that order after a reconnection)."""
        return self._native.send(data, properties)

    async def close(self) -> None:
        self._open.discard(self)
        try:
            await self._producer.close()
        except _ERRORS as exc:
            logger.debug("closing producer on %s: %s", self._topic, exc)


class PulsarConsumer:
    def __init__(self, consumer: pulsar.asyncio.Consumer, topic: str, open_: set[Any]) -> None:
        self._consumer, self._topic, self._open = consumer, topic, open_
        self._native = Native(consumer, "_consumer", topic)
        open_.add(self)

    async def receive(self) -> Delivery:
        try:
            msg = await self._native.receive()
        except _ERRORS as exc:
            if _closed(exc):
                raise ConsumerClosed(f"consumer on {self._topic} is closed: {exc}") from exc
            raise BusError(f"receive from {self._topic} failed: {exc}") from exc
        return Delivery(msg.data(), msg.properties(), msg.redelivery_count(), msg)

    async def ack(self, delivery: Delivery) -> None:
        await self._native.ack(delivery.handle)

    async def nack(self, delivery: Delivery) -> None:
        try:
            await self._consumer.negative_acknowledge(delivery.handle)
        except _ERRORS as exc:
            raise BusError(f"nack on {self._topic} failed: {exc}") from exc

    async def close(self) -> None:
        self._open.discard(self)
        try:
            await self._consumer.close()
        except _ERRORS as exc:
            logger.debug("closing consumer on %s: %s", self._topic, exc)


class PulsarTransport:
    """One client per process; producers and consumers are created with bounded retry.

    The transport holds every producer and consumer until it is closed, and closes them
    before its client: the native client aborts the process when a consumer is dropped
    unclosed while a receive is outstanding.
    """

    def __init__(self, options: PulsarOptions) -> None:
        self.options = options
        self._client: pulsar.asyncio.Client | None = None
        self._open: set[PulsarProducer | PulsarConsumer] = set()

    async def connect(self) -> None:
        if self._client is not None:
            return
        args: dict[str, Any] = {
            "service_url": self.options.url,
            "logger": pulsar.ConsoleLogger(_pulsar.LoggerLevel.Error),
        }
        if self.options.listener:
            args["listener_name"] = self.options.listener
        args |= tls_args(self.options)
        if self.options.api_key:
            args["authentication"] = pulsar.AuthenticationToken(self.options.api_key)
        elif self.options.tls_cert_file and self.options.tls_key_file:
            args["authentication"] = pulsar.AuthenticationTLS(
                self.options.tls_cert_file, self.options.tls_key_file
            )
        self._client = pulsar.asyncio.Client(**args)

    @property
    def client(self) -> pulsar.asyncio.Client:
        if self._client is None:
            raise BusError("transport is not connected")
        return self._client

    async def producer(self, queue: Queue) -> PulsarProducer:
        topic = pulsar_topic(queue)
        producer = await self._retry(
            f"producer on {topic}",
            lambda: self.client.create_producer(
                topic,
                schema=pulsar.schema.BytesSchema(),
                batching_enabled=self.options.batching,
                block_if_queue_full=True,
            ),
        )
        return PulsarProducer(producer, topic, self._open)

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> PulsarConsumer:
        topic = pulsar_topic(queue)
        kind = pulsar.ConsumerType.Exclusive if queue.exclusive else pulsar.ConsumerType.Shared
        position = (
            pulsar.InitialPosition.Earliest if from_earliest else pulsar.InitialPosition.Latest
        )
        consumer = await self._retry(
            f"subscription {subscription} on {topic}",
            lambda: self.client.subscribe(
                topic,
                subscription,
                consumer_type=kind,
                schema=pulsar.schema.BytesSchema(),
                initial_position=position,
                receiver_queue_size=(
                    self.options.receiver_queue_size
                    if queue.persistent
                    else self.options.non_persistent_receiver_queue_size
                ),
                negative_ack_redelivery_delay_ms=int(self.options.nack_delay * 1000),
            ),
        )
        return PulsarConsumer(consumer, topic, self._open)

    async def _retry(self, what: str, make: Callable[[], Awaitable[T]]) -> T:
        return await create_with_retries(
            make,
            errors=_ERRORS,
            timeout=self.options.connect_timeout,
            failed=f"could not create {what} at {self.options.url}",
        )

    async def close(self) -> None:
        for endpoint in list(self._open):
            await endpoint.close()
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.close()
            except _ERRORS as exc:
                logger.debug("closing client: %s", exc)
