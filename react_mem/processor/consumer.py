"""The consume loop and the settlement rules every processor keeps (DESIGN §5).

- success: ack.
- bad input (undecodable, invalid, or a handler's :class:`BadRequest`): an error reply when
  the message has an ``id``; undecodable messages are also dead-lettered; then ack.
- a full disk (a handler's :class:`DiskFull`: nothing was written): a request is answered
  ``disk-full`` at once; a message on a persistent queue is kept and redelivered (a pause
  first, growing while the disk stays full) until space returns, never dead-lettered for it.
- any other failure: redelivered with bounded backoff (nack on persistent queues; on
  non-persistent ones the broker cannot redeliver, so the retry happens here); after
  ``max_redeliveries`` the message is dead-lettered, answered with an error, and acked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.bus.transport import Consumer, Delivery, Producer, Transport
from react_mem.errors import BadRequest, BusError, ConsumerClosed, DiskFull
from react_mem.metrics import ConsumerMetrics
from react_mem.processor.context import MessageContext
from react_mem.processor.specs import ConsumerSpec
from react_mem.schema import Error

logger = logging.getLogger(__name__)

#: The longest pause before a message deferred by a full disk is handed back (the pause
#: doubles from ``retry_delay`` while the disk stays full): how late writing resumes.
DISK_FULL_PAUSE = 2.0


def full_disk(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised from, a :class:`DiskFull` (a handler may wrap it
    in its own words with ``raise ... from``)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, DiskFull):
            return True
        cause = cause.__cause__
    return False


@dataclass(frozen=True, kw_only=True)
class Settlement:
    """How failures are retried; see the module docstring."""

    max_redeliveries: int = 5
    retry_delay: float = 0.5
    max_retry_delay: float = 10.0
    #: How long stopping waits for running handlers before cancelling them.
    drain_timeout: float = 10.0

    def delay(self, attempt: int) -> float:
        return float(min(self.retry_delay * 2**attempt, self.max_retry_delay))


class ConsumerRunner:
    """Runs one consumer spec on one queue with at most ``concurrency`` handlers at once."""

    def __init__(
        self,
        *,
        spec: ConsumerSpec,
        queue: Queue,
        subscription: str,
        transport: Transport,
        context: Callable[[Delivery], MessageContext],
        concurrency: int,
        settlement: Settlement,
        metrics: ConsumerMetrics,
    ) -> None:
        self.spec, self.queue, self.subscription = spec, queue, subscription
        self._transport = transport
        self._context = context
        self._slots = asyncio.Semaphore(concurrency)
        self._settlement = settlement
        self._metrics = metrics
        self._consumer: Consumer | None = None
        self._dlq: Producer | None = None
        #: One dead-letter producer per runner, and dead letters sent in the order their
        #: handlers failed (concurrent handlers would each open one, and the later-made
        #: producer could send first).
        self._dlq_lock = asyncio.Lock()
        self._loop_task: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        #: Messages deferred by a full disk since the last one handled: paces redelivery
        #: and logs the start and the end of a full disk once.
        self._deferred = 0

    async def start(self) -> None:
        consumer = self._consumer = await self._transport.consumer(self.queue, self.subscription)
        self._loop_task = asyncio.create_task(self._receive_loop(consumer), name=self.subscription)
        self._metrics.state("running")

    async def stop(self) -> None:
        """Stop receiving, let running handlers finish (bounded), close the subscription."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._handlers:
            # Unfinished handlers are cancelled unacknowledged: the broker redelivers them.
            _, unfinished = await asyncio.wait(
                self._handlers, timeout=self._settlement.drain_timeout
            )
            for task in unfinished:
                task.cancel()
            if unfinished:
                await asyncio.wait(unfinished)
        for endpoint in (self._consumer, self._dlq):
            if endpoint is not None:
                await endpoint.close()
        self._consumer = self._dlq = self._loop_task = None
        self._metrics.state("stopped")

    async def _receive_loop(self, consumer: Consumer) -> None:
        while True:
            await self._slots.acquire()
            try:
                delivery = await consumer.receive()
            except ConsumerClosed as exc:  # its topic went away (a stopped flow's): no retry
                self._slots.release()
                logger.info("%s: consumer closed, receiving ends: %s", self.subscription, exc)
                self._metrics.state("stopped")
                return
            except BusError as exc:
                self._slots.release()
                logger.warning("%s: receive failed, retrying: %s", self.subscription, exc)
                await asyncio.sleep(0.5)
                continue
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.create_task(self._settle(consumer, delivery))
            self._handlers.add(task)
            task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "%s: settling a message failed", self.subscription, exc_info=task.exception()
            )

    async def _settle(self, consumer: Consumer, delivery: Delivery) -> None:
        started = time.monotonic()
        while True:
            try:
                outcome = await self._handle(delivery)
            except BusError as exc:
                # The dead-letter queue is unreachable: keep the message, so it comes round
                # again once the bus is back rather than being lost.
                logger.warning(
                    "%s: could not settle a message; retrying: %s", self.subscription, exc
                )
                outcome = "retry"
            except Exception as exc:
                if full_disk(exc) and self.queue.persistent:
                    outcome = "deferred"  # no room for its dead letter: kept for later
                else:
                    # A defect in settling itself. Counted like a failed attempt, so that one
                    # message can never hold a slot for ever; past the limit it is set aside.
                    logger.exception("%s: could not settle a message", self.subscription)
                    outcome = await self._unsettled(delivery)
            if outcome == "deferred":
                self._metrics.redelivered()
                pause = min(self._settlement.delay(self._deferred), DISK_FULL_PAUSE)
                self._deferred += 1
                await asyncio.sleep(pause)
                await consumer.nack(delivery)
                self._metrics.processed("disk-full", time.monotonic() - started)
                return
            if outcome == "retry" and not self.queue.persistent:
                # The broker cannot redeliver a non-persistent message: retry here.
                self._metrics.redelivered()
                await asyncio.sleep(self._settlement.delay(delivery.redelivery_count))
                delivery.redelivery_count += 1
                continue
            break
        if outcome == "retry":
            self._metrics.redelivered()
            await consumer.nack(delivery)
        else:
            await consumer.ack(delivery)
        if outcome == "ok" and self._deferred:
            logger.warning(
                "%s: writing again after %d deferrals for a full disk",
                self.subscription,
                self._deferred,
            )
            self._deferred = 0
        status = outcome if outcome in ("ok", "disk-full") else "error"
        self._metrics.processed(status, time.monotonic() - started)

    async def _handle(self, delivery: Delivery) -> str:
        """Run the handler once; return ``ok``, ``answered`` (failed but settled), ``retry``,
        or for a full disk ``disk-full`` (a request answered) or ``deferred`` (kept)."""
        try:
            message = self.spec.schema.decode(delivery.data)
        except BadRequest as exc:
            await self._dead_letter(delivery, "invalid", str(exc))
            await self._reply_error(delivery, exc.type, str(exc))
            return "answered"
        except Exception as exc:
            # A decoder defect: still the message's fault, never worth a retry.
            logger.exception("%s: decoding failed unexpectedly", self.subscription)
            await self._dead_letter(delivery, "invalid", repr(exc))
            await self._reply_error(delivery, "malformed", f"undecodable message: {exc!r}")
            return "answered"
        try:
            await self.spec.handler(message, self._context(delivery))
        except BadRequest as exc:
            await self._reply_error(delivery, exc.type, str(exc))
            return "answered"
        except Exception as exc:  # noqa: BLE001 - any failure is an attempt, then a dead letter
            if full_disk(exc):
                return await self._disk_full(delivery, exc)
            if delivery.redelivery_count < self._settlement.max_redeliveries:
                logger.warning(
                    "%s: attempt %d failed: %r",
                    self.subscription,
                    delivery.redelivery_count + 1,
                    exc,
                )
                return "retry"
            logger.error(
                "%s: giving up after %d attempts: %r",
                self.subscription,
                delivery.redelivery_count + 1,
                exc,
            )
            try:
                await self._dead_letter(delivery, "exhausted", repr(exc))
            except Exception as error:
                # No room for it: a persistent message is kept (``_settle``), a request is
                # still answered.
                if self.queue.persistent or not full_disk(error):
                    raise
                logger.error("%s: not dead-lettered: %s", self.subscription, error)
            await self._reply_error(delivery, "processing-failed", str(exc) or repr(exc))
            return "answered"
        return "ok"

    async def _disk_full(self, delivery: Delivery, exc: Exception) -> str:
        """Nothing was written: a request is told so at once (its caller asks again later),
        a persistent message is kept (``deferred``) however often this happens."""
        if not self.queue.persistent:
            await self._reply_error(delivery, "disk-full", str(exc))
            return "disk-full"
        if not self._deferred:
            logger.error(
                "%s: %s; the message is kept and retried until space is freed",
                self.subscription,
                exc,
            )
        return "deferred"

    async def _unsettled(self, delivery: Delivery) -> str:
        if delivery.redelivery_count < self._settlement.max_redeliveries:
            return "retry"
        try:
            await self._dead_letter(delivery, "unsettled", "settling failed repeatedly")
        except Exception:
            logger.exception("%s: dropping a message that cannot be settled", self.subscription)
        return "answered"

    async def _dead_letter(self, delivery: Delivery, reason: str, error: str) -> None:
        properties = delivery.properties | {
            "dlq-reason": reason,
            "dlq-error": error[:1000].encode("utf-8", "backslashreplace").decode("utf-8"),
            "dlq-queue": self.queue.id,
            "dlq-subscription": self.subscription,
            "dlq-attempts": str(delivery.redelivery_count + 1),
        }
        async with self._dlq_lock:
            if self._dlq is None:
                self._dlq = await self._transport.producer(
                    dead_letter_queue(self.queue, self.subscription)
                )
            await self._dlq.send(delivery.data, properties)
        self._metrics.dead_lettered(reason)

    async def _reply_error(self, delivery: Delivery, kind: str, message: str) -> None:
        if self.spec.error_reply is None or delivery.properties.get("id") is None:
            return
        try:
            reply = self.spec.error_reply(Error(type=kind, message=message))
            await self._context(delivery).reply(reply)
        except BusError as exc:
            logger.error("%s: could not send error reply: %s", self.subscription, exc)
        except Exception:
            # Best effort, like a reply the bus refuses: the message is settled either way,
            # so a faulty reply builder cannot make it come round (and dead-letter) again.
            logger.exception("%s: could not build an error reply", self.subscription)
