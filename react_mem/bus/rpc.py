"""Request/response over the bus: correlation by the ``id`` property, one or many replies."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Transport
from react_mem.errors import BadRequest, BusError, ConsumerClosed, NotStarted, RequestTimeout
from react_mem.metrics import DownstreamMetrics
from react_mem.schema.base import WireModel

logger = logging.getLogger(__name__)

Item = WireModel | BadRequest
Req = TypeVar("Req", bound=WireModel)
Resp = TypeVar("Resp", bound=WireModel)


class _Waiter:
    """One request's responses, in the order they came. A response that finds its caller
    waiting is handed to it through one future: the caller's task resumes at the loop's next
    turn (``asyncio.wait_for`` on a queue's ``get`` made a task of the get, and the response
    passed through it and a done callback first: three more turns of the loop, each one
    behind whatever else was ready)."""

    __slots__ = ("_future", "_items")

    def __init__(self) -> None:
        self._items: deque[Item] = deque()
        self._future: asyncio.Future[Item] | None = None

    def put(self, item: Item) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(item)
        else:
            self._items.append(item)

    async def get(self) -> Item:
        if self._items:
            return self._items.popleft()
        future: asyncio.Future[Item] = asyncio.get_running_loop().create_future()
        self._future = future
        try:
            return await future
        except asyncio.CancelledError:
            # A timeout (or a cancelled caller) after the response was handed over: keep it
            # for the next get, as a queue would.
            if future.done() and not future.cancelled():
                self._items.appendleft(future.result())
            raise
        finally:
            self._future = None


class RequestResponseClient(Generic[Req, Resp]):
    """Send requests on one queue and route responses from another to their callers.

    Each client has its own Exclusive subscription to the response queue, as TrustGraph's
    clients do, so replicas of a processor never steal each other's responses.

    With ``resend``, :meth:`request` sends its request again every ``resend`` seconds
    (within its timeout, same id) until the service has answered this client once, and
    again after a timeout: a service still starting (after a restart of the stack) drops
    requests sent before it subscribed, which would otherwise wait the whole timeout.
    Only for idempotent services: a slow first answer can be asked for twice.
    """

    def __init__(
        self,
        transport: Transport,
        request_queue: str,
        response_queue: str,
        response_schema: type[Resp],
        *,
        subscriber: str = "react-mem",
        timeout: float = 60.0,
        metrics: DownstreamMetrics | None = None,
        resend: float | None = None,
    ) -> None:
        self._transport = transport
        self._request_queue = Queue.parse(request_queue)
        self._response_queue = Queue.parse(response_queue)
        self._schema = response_schema
        self._subscription = f"{subscriber}--rr--{uuid.uuid4().hex[:12]}"
        self.timeout = timeout
        self._metrics = metrics
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._waiting: dict[str, _Waiter] = {}
        self._resend = resend
        #: Whether the service has answered this client since it started or last timed out.
        self.heard = False
        #: Requests sent again because no answer had come yet (see ``resend``).
        self.resent = 0

    async def start(self) -> None:
        # Subscribe before the first request can be sent, so no response is missed.
        consumer = await self._transport.consumer(self._response_queue, self._subscription)
        self._consumer = consumer
        self._producer = await self._transport.producer(self._request_queue)
        self._receiver = asyncio.create_task(
            self._route(consumer), name=f"rr:{self._response_queue.id}"
        )

    async def request(
        self,
        message: Req,
        *,
        timeout: float | None = None,
        sent: Callable[[], None] | None = None,
    ) -> Resp:
        """Send one request and return its (first) response; ``sent`` is called once the
        broker has taken the request (before any response)."""
        resend = self._resend
        async for response in self.stream(
            message, timeout=timeout, last=lambda _: True, resend=resend, sent=sent
        ):
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(
        self,
        message: Req,
        *,
        last: Callable[[Resp], bool],
        timeout: float | None = None,
        resend: float | None = None,
        sent: Callable[[], None] | None = None,
    ) -> AsyncIterator[Resp]:
        """Yield every response to ``message`` until ``last(response)`` is true.

        ``timeout`` bounds the wait for each response, not the whole stream; ``resend``:
        see the class (for the first response only); ``sent``: called once the request is
        sent (the broker has it, so it reaches a consumer ahead of anything sent later).
        """
        if self._producer is None:
            raise NotStarted("request/response client is not started")
        timeout = self.timeout if timeout is None else timeout
        request_id = str(uuid.uuid4())
        waiter = _Waiter()
        self._waiting[request_id] = waiter
        started = time.monotonic()
        data, first = message.encode(), True
        try:
            await self._producer.send(data, {"id": request_id})
            if sent is not None:
                sent()
            while True:
                deadline = time.monotonic() + timeout
                try:
                    item = await self._next(waiter, deadline, resend if first else None)
                    while item is None:  # nothing yet from a service not heard from: again
                        self.resent += 1
                        await self._producer.send(data, {"id": request_id})
                        item = await self._next(waiter, deadline, resend)
                except TimeoutError:
                    self.heard = False
                    if self._metrics:
                        self._metrics.timeout()
                    raise RequestTimeout(
                        f"no response on {self._response_queue.id} within {timeout}s"
                    ) from None
                if isinstance(item, BadRequest):
                    if self._metrics:
                        self._metrics.error("malformed-response")
                    raise item
                first = False
                yield item  # type: ignore[misc]
                if last(item):  # type: ignore[arg-type]
                    return
        finally:
            self._waiting.pop(request_id, None)
            if self._metrics:
                self._metrics.observe(time.monotonic() - started)

    async def _next(
        self, waiter: _Waiter, deadline: float, resend: float | None
    ) -> WireModel | BadRequest | None:
        """The next item before ``deadline`` (else TimeoutError); None when ``resend``
        seconds passed first while the service has not been heard from."""
        left = deadline - time.monotonic()
        if resend is None or self.heard or left <= resend:
            async with asyncio.timeout(max(left, 0.0)):
                return await waiter.get()
        try:
            async with asyncio.timeout(resend):
                return await waiter.get()
        except TimeoutError:
            return None

    async def _route(self, consumer: Consumer) -> None:
        while True:
            try:
                delivery = await consumer.receive()
            except ConsumerClosed as exc:  # its topic went away (a stopped flow's): no retry
                logger.info("responses end: %s", exc)
                return
            except BusError as exc:
                logger.warning("response receive failed, retrying: %s", exc)
                await asyncio.sleep(0.5)
                continue
            waiter = self._waiting.get(delivery.properties.get("id", ""))
            self.heard = True
            if waiter is not None:
                try:
                    waiter.put(self._schema.decode(delivery.data))
                except BadRequest as exc:
                    waiter.put(exc)
            await consumer.ack(delivery)

    async def close(self) -> None:
        if self._receiver is not None:
            self._receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._receiver
        for endpoint in (self._producer, self._consumer):
            if endpoint is not None:
                await endpoint.close()
        self._producer = self._consumer = self._receiver = None
