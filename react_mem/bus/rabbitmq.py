"""Transport over RabbitMQ, on FastStream's broker (connection, declarations, publishing)
with one aio-pika channel per consumer.

Queues map onto RabbitMQ as TrustGraph 2.11's RabbitMQ backend maps them, so react-mem
and TrustGraph processors share one broker:

- ``class:topicspace:topic`` is a durable fanout exchange ``topicspace.class.topic``,
  published to with routing key ``''``; the body is the JSON bytes, ``content_type``
  ``application/json``, persistent only on flow queues; properties (the ``id``) are
  AMQP headers.
- a flow/request subscription is a named queue ``{exchange}.{subscription}`` (durable only
  for flow, never exclusive or auto-delete, no arguments) whose consumers compete; a
  response/notify subscriber gets its own exclusive, auto-delete queue.

RabbitMQ counts no redeliveries, so a nack is a republish of the message to the same
queue with its count in a header, after a backoff, then an ack of the original (a message
left unsettled by a dead consumer comes back with RabbitMQ's ``redelivered`` flag, counted
too). A dead-letter queue holds what reaches it in a durable queue bound to its exchange
(:data:`DEAD_LETTERS`), so nothing is published into the void.

FastStream's subscribers are not used for consuming: its declarer caches one queue object
(bound to one channel) per queue name, so two competing consumers in one process would
share a channel and a prefetch window, and closing one would stop the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue
from faststream.rabbit import ExchangeType, RabbitBroker, RabbitExchange
from faststream.security import SASLPlaintext
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from react_mem.bus.queues import Queue
from react_mem.bus.retrying import create_with_retries
from react_mem.bus.transport import Delivery
from react_mem.errors import BusError, ConsumerClosed

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: What aio-pika and aiormq raise when the broker, the connection or a channel fails.
_ERRORS = (
    aio_pika.exceptions.AMQPException,
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    OSError,
)
#: The header carrying how often a message was handed back (react-mem's, not TrustGraph's).
COUNT_HEADER = "x-react-mem-redeliveries"
#: The subscription holding a dead-letter queue's messages: ``{exchange}.dead-letters``.
DEAD_LETTERS = "dead-letters"


def exchange_name(queue: Queue) -> str:
    """``request:tg:agent`` -> ``tg.request.agent`` (TrustGraph's exchange)."""
    return f"{queue.topicspace}.{queue.cls}.{queue.topic}"


def queue_name(queue: Queue, subscription: str) -> str:
    """A shared subscription's queue: ``{exchange}.{subscription}``."""
    return f"{exchange_name(queue)}.{subscription}"


def is_dead_letter(queue: Queue) -> bool:
    return queue.persistent and queue.topic.startswith("dlq--")


@dataclass(frozen=True, kw_only=True)
class RabbitMQOptions:
    host: str = "rabbitmq"
    port: int = 5672
    username: str = "guest"
    password: str = "guest"
    vhost: str = "/"
    #: How long to keep retrying to connect while the broker is away.
    connect_timeout: float = 60.0
    #: First delay before a nacked message comes back; doubled per redelivery, up to
    #: ``max_nack_delay``.
    nack_delay: float = 1.0
    max_nack_delay: float = 10.0
    #: Messages one consumer holds unsettled: a processor's ``concurrency``, so replicas
    #: sharing a queue share its backlog.
    prefetch: int = 32
    #: Bound on waiting for the broker to confirm a publish.
    publish_timeout: float = 30.0

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}/"

    def describe(self) -> str:
        return f"amqp://{self.host}:{self.port}{'' if self.vhost == '/' else '/' + self.vhost}"


def _properties(message: AbstractIncomingMessage) -> tuple[dict[str, str], int]:
    """The message's properties (headers) and its redelivery count: the count it was
    republished with, plus one if RabbitMQ hands it back from a consumer that went away
    (possibly one that had not yet handed it to a handler: counted all the same)."""
    properties: dict[str, str] = {}
    for key, value in (message.headers or {}).items():
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        properties[key] = "" if value is None else str(value)
    try:
        count = int(properties.pop(COUNT_HEADER, "0"))
    except ValueError:
        count = 0
    return properties, count + (1 if message.redelivered else 0)


def _stale(message: AbstractIncomingMessage) -> bool:
    """Delivered on a channel since lost with its connection: RabbitMQ delivers it again."""
    try:
        return message.channel.is_closed
    except aiormq.exceptions.ChannelInvalidStateError:
        return True


class RabbitMQProducer:
    def __init__(self, transport: RabbitMQTransport, queue: Queue, exchange: RabbitExchange):
        self._transport, self._queue, self._exchange = transport, queue, exchange
        self.closed = False

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        if self.closed:
            raise BusError(f"producer on {self._exchange.name} is closed")
        await self._transport.publish(
            data, properties, exchange=self._exchange, persistent=self._queue.persistent
        )

    async def close(self) -> None:
        self.closed = True
        self._transport.forget(self)


class RabbitMQConsumer:
    """One channel, one queue consumer, at most ``prefetch`` messages unsettled (a nack
    waiting out its backoff holds its place)."""

    def __init__(self, transport: RabbitMQTransport, channel: AbstractChannel, name: str):
        self._transport, self._channel, self.name = transport, channel, name
        self._incoming: asyncio.Queue[AbstractIncomingMessage | None] = asyncio.Queue()
        self._unsettled: set[AbstractIncomingMessage] = set()
        self._pending: set[asyncio.Task[None]] = set()
        self.closed = False

    async def start(self, queue: AbstractQueue, prefetch: int) -> None:
        await self._channel.set_qos(prefetch_count=prefetch)
        await queue.consume(self._incoming.put, no_ack=False)

    async def receive(self) -> Delivery:
        while True:
            if self.closed:
                raise ConsumerClosed(f"consumer on {self.name} is closed")
            message = await self._incoming.get()
            if message is None or self.closed:
                self._incoming.put_nowait(None)
                raise ConsumerClosed(f"consumer on {self.name} is closed")
            if not _stale(message):
                break
        self._unsettled.add(message)
        properties, count = _properties(message)
        return Delivery(message.body, properties, count, message)

    async def ack(self, delivery: Delivery) -> None:
        message = self._message(delivery)
        try:
            await message.ack()
        except _ERRORS as exc:
            raise BusError(f"ack on {self.name} failed: {exc}") from exc
        finally:
            self._unsettled.discard(message)

    async def nack(self, delivery: Delivery) -> None:
        """Republish to this queue with the count raised, after the backoff, then ack."""
        message = self._message(delivery)
        task = asyncio.create_task(self._redeliver(message, delivery))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _redeliver(self, message: AbstractIncomingMessage, delivery: Delivery) -> None:
        options = self._transport.options
        await asyncio.sleep(
            min(options.nack_delay * 2**delivery.redelivery_count, options.max_nack_delay)
        )
        headers: dict[str, Any] = {
            **delivery.properties,
            COUNT_HEADER: str(delivery.redelivery_count + 1),
        }
        try:
            await self._transport.publish(
                message.body,
                headers,
                exchange=RabbitExchange(),  # the default exchange: this queue only
                routing_key=self.name,
                persistent=message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT,
            )
            await message.ack()
        except (BusError, *_ERRORS) as exc:
            # Left unsettled: RabbitMQ hands it back (counted) when the channel goes.
            logger.warning("%s: could not hand a message back: %s", self.name, exc)
        finally:
            self._unsettled.discard(message)

    def _message(self, delivery: Delivery) -> AbstractIncomingMessage:
        if not isinstance(delivery.handle, AbstractIncomingMessage):
            raise BusError(f"not a delivery of {self.name}")
        return delivery.handle

    async def close(self) -> None:
        """Stop consuming; RabbitMQ hands every unsettled message to another consumer."""
        if self.closed:
            return
        self.closed = True
        self._transport.forget(self)
        for task in list(self._pending):
            task.cancel()
        self._incoming.put_nowait(None)
        try:
            await self._channel.close()
        except _ERRORS as exc:
            logger.debug("closing consumer on %s: %s", self.name, exc)


class RabbitMQTransport:
    """One FastStream broker (one robust connection) per process."""

    def __init__(self, options: RabbitMQOptions) -> None:
        self.options = options
        self._broker: RabbitBroker | None = None
        self._connection: aio_pika.abc.AbstractRobustConnection | None = None
        self._open: set[RabbitMQProducer | RabbitMQConsumer] = set()
        self._declared: set[str] = set()

    async def connect(self) -> None:
        if self._broker is not None:
            return
        broker = RabbitBroker(
            self.options.url,
            virtualhost=self.options.vhost,
            security=_security(self.options),
            logger=None,
            reconnect_interval=1.0,
        )
        with _quiet_client_logs():  # a refused attempt is reported once, below
            self._connection = await self._retry(
                f"connect to {self.options.describe()}", broker.connect
            )
        self._broker = broker

    @property
    def broker(self) -> RabbitBroker:
        if self._broker is None:
            raise BusError("transport is not connected")
        return self._broker

    async def producer(self, queue: Queue) -> RabbitMQProducer:
        exchange = await self._declare(queue)
        if is_dead_letter(queue):
            await self._hold(queue)
        producer = RabbitMQProducer(self, queue, exchange)
        self._open.add(producer)
        return producer

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> RabbitMQConsumer:
        """``from_earliest`` has no effect: a RabbitMQ subscription is a queue, and a new
        queue holds only what is published after it is bound (as with TrustGraph)."""
        if self._connection is None:
            raise BusError("transport is not connected")
        exchange = exchange_name(queue)
        try:
            channel = await self._connection.channel()
            amqp_exchange = await channel.declare_exchange(
                exchange, aio_pika.ExchangeType.FANOUT, durable=True
            )
            if queue.exclusive:
                name = f"{queue_name(queue, subscription)}.{uuid.uuid4().hex[:12]}"
                amqp_queue = await channel.declare_queue(
                    name, durable=False, exclusive=True, auto_delete=True
                )
            else:
                name = queue_name(queue, subscription)
                amqp_queue = await channel.declare_queue(
                    name, durable=queue.persistent, exclusive=False, auto_delete=False
                )
            await amqp_queue.bind(amqp_exchange, routing_key="")
            consumer = RabbitMQConsumer(self, channel, name)
            await consumer.start(amqp_queue, self.options.prefetch)
        except _ERRORS as exc:
            raise BusError(f"could not subscribe {subscription} to {exchange}: {exc}") from exc
        self._open.add(consumer)
        return consumer

    async def publish(
        self,
        data: bytes,
        headers: dict[str, Any],
        *,
        exchange: RabbitExchange,
        persistent: bool,
        routing_key: str = "",
    ) -> None:
        """Publish and wait for the broker's confirmation. While the connection is being
        restored, retried for up to ``publish_timeout`` (as a Pulsar producer waits)."""
        where = exchange.name or routing_key
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type((TimeoutError, *_ERRORS, RuntimeError)),
                wait=wait_exponential(multiplier=0.05, max=2.0),
                stop=stop_after_delay(self.options.publish_timeout),
                reraise=True,
            ):
                with attempt:
                    await self.broker.publish(
                        data,
                        exchange=exchange,
                        routing_key=routing_key,
                        headers=headers,
                        content_type="application/json",
                        persist=persistent,
                        mandatory=False,
                        timeout=self.options.publish_timeout,
                    )
        except (TimeoutError, *_ERRORS, RuntimeError) as exc:
            raise BusError(f"send to {where} failed: {exc!r}") from exc

    async def _declare(self, queue: Queue) -> RabbitExchange:
        """The queue's exchange, declared before the first publish (FastStream only checks
        that an exchange exists when it publishes)."""
        exchange = RabbitExchange(exchange_name(queue), type=ExchangeType.FANOUT, durable=True)
        if exchange.name not in self._declared:
            try:
                await self.broker.declare_exchange(exchange)
            except _ERRORS as exc:
                raise BusError(f"could not declare {exchange.name}: {exc}") from exc
            self._declared.add(exchange.name)
        return exchange

    async def _hold(self, queue: Queue) -> None:
        """Bind the durable queue that keeps a dead-letter queue's messages."""
        consumer = await self.consumer(queue, DEAD_LETTERS)
        await consumer.close()

    def forget(self, endpoint: RabbitMQProducer | RabbitMQConsumer) -> None:
        self._open.discard(endpoint)

    async def _retry(self, what: str, make: Callable[[], Awaitable[T]]) -> T:
        return await create_with_retries(
            make,
            errors=_ERRORS,
            timeout=self.options.connect_timeout,
            failed=f"could not {what}",
            log=logger,
        )

    async def close(self) -> None:
        for endpoint in list(self._open):
            await endpoint.close()
        if self._broker is not None:
            broker, self._broker, self._connection = self._broker, None, None
            self._declared.clear()
            try:
                await broker.stop()
            except _ERRORS as exc:
                logger.debug("closing the connection: %s", exc)


@contextlib.contextmanager
def _quiet_client_logs() -> Iterator[None]:
    """aio-pika and aiormq log every refused connection attempt at ERROR, with a traceback."""
    loggers = [logging.getLogger(n) for n in ("aiormq.connection", "aio_pika.robust_connection")]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.setLevel(level)


def _security(options: RabbitMQOptions) -> SASLPlaintext:
    return SASLPlaintext(username=options.username, password=options.password)
