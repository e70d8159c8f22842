"""A message's send, receive and acknowledgement on the native Pulsar client, completed on
the event loop with one callback.

``pulsar.asyncio`` completes each call through a future, a ``functools.partial`` and a
callback scheduled from the client's thread, then wraps what came (a message, a message id)
in objects of its own; a send also went through a task of ours, so the message reached the
client only at the loop's next turn. Every hop of every message pays that on both sides.
Here a call hands its message to the native object ``pulsar.asyncio`` wraps at once, and its
completion is one callback: scheduled on the loop from the client's thread, or run in place
when the client completes it on the loop's own thread (a receive that finds a message
queued, an acknowledgement), where scheduling it would cost a wake-up of the loop.
If the installed ``pulsar-client`` no longer exposes that native object, the wrapper's own
calls serve instead.
"""

from __future__ import annotations

import asyncio
import functools
from asyncio import events
from collections.abc import Callable
from typing import Any

import _pulsar
import pulsar
import pulsar.asyncio

from react_mem.errors import BusError

Failed = Callable[[Any], BaseException]
_OK = _pulsar.Result.Ok
#: The native calls used, on the object ``pulsar.asyncio`` keeps as ``_producer`` or
#: ``_consumer``.
_NEEDS = {"_producer": ("send_async",), "_consumer": ("receive_async", "acknowledge_async")}


def _complete(future: asyncio.Future[Any], result: Any, value: Any, failed: Failed) -> None:
    if future.done():  # cancelled meanwhile (a receive at shutdown)
        return
    if result == _OK:
        future.set_result(value)
    else:
        future.set_exception(failed(result))


def _resolve(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    failed: Failed,
    result: Any,
    value: Any,
) -> None:
    if events._get_running_loop() is loop:  # the client called back on the loop's thread
        _complete(future, result, value, failed)
        return
    try:
        loop.call_soon_threadsafe(_complete, future, result, value, failed)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass


def _settled(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    failed: Failed,
    result: Any,
    _id: Any = None,
) -> None:
    _resolve(loop, future, failed, result, None)


def _received(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    failed: Failed,
    result: Any,
    message: Any,
) -> None:
    _resolve(loop, future, failed, result, message)


def _unchanged(result: Any) -> BaseException:
    exc: BaseException = pulsar.asyncio.PulsarException(result)
    return exc


class Native:
    """The native calls of one ``pulsar.asyncio`` producer or consumer (``attr``: the name
    under which the wrapper keeps its native object)."""

    def __init__(self, wrapper: Any, attr: str, topic: str) -> None:
        self._wrapper = wrapper
        native = getattr(wrapper, attr, None)
        usable = all(callable(getattr(native, call, None)) for call in _NEEDS[attr])
        self._native: Any = native if usable else None
        self._send_failed: Failed = lambda result: BusError(
            f"send to {topic} failed: {_unchanged(result)}"
        )
        self._ack_failed: Failed = lambda result: BusError(
            f"ack on {topic} failed: {_unchanged(result)}"
        )

    @property
    def direct(self) -> bool:
        """Whether the native client's calls are used (else the wrapper's)."""
        return self._native is not None

    def send(self, data: bytes, properties: dict[str, str]) -> asyncio.Future[None]:
        """Hand ``data`` to the client's producer queue now; the result is its receipt."""
        if self._native is None:
            return asyncio.ensure_future(self._wrapped_send(data, properties))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        builder = _pulsar.MessageBuilder()
        builder.content(data)
        if properties:
            builder.properties(properties)
        self._native.send_async(
            builder.build(), functools.partial(_settled, loop, future, self._send_failed)
        )
        return future

    async def _wrapped_send(self, data: bytes, properties: dict[str, str]) -> None:
        try:
            await self._wrapper.send(data, properties=properties)
        except (pulsar.PulsarException, pulsar.asyncio.PulsarException) as exc:
            raise BusError(f"send failed: {exc}") from exc

    async def receive(self) -> Any:
        """The next message (a ``_pulsar.Message``, or the wrapper's ``pulsar.Message``);
        a failure raises ``pulsar.asyncio.PulsarException``."""
        if self._native is None:
            return await self._wrapper.receive()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._native.receive_async(functools.partial(_received, loop, future, _unchanged))
        return await future

    async def ack(self, message: Any) -> None:
        if self._native is None:
            try:
                await self._wrapper.acknowledge(message)
            except (pulsar.PulsarException, pulsar.asyncio.PulsarException) as exc:
                raise BusError(f"ack failed: {exc}") from exc
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._native.acknowledge_async(
            message, functools.partial(_settled, loop, future, self._ack_failed)
        )
        await future
