"""A transport that tells a test when its producers' sends are done, so the test can wait
for "the request is out" itself rather than for a pause long enough on a fast machine."""

from __future__ import annotations

import asyncio

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Transport


class SendsSeen:
    """``inner``, with ``sent[queue id]`` counting the sends its producers have finished and
    :meth:`wait_sent` waiting for a count."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.sent: dict[str, int] = {}
        self._changed = asyncio.Condition()

    async def producer(self, queue: Queue) -> Producer:
        return _Counted(await self.inner.producer(queue), queue.id, self)

    async def wait_sent(self, queue: str, count: int = 1, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self.sent.get(queue, 0) >= count)

    async def _count(self, queue: str) -> None:
        async with self._changed:
            self.sent[queue] = self.sent.get(queue, 0) + 1
            self._changed.notify_all()

    async def connect(self) -> None:
        await self.inner.connect()

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        return await self.inner.consumer(queue, subscription, from_earliest=from_earliest)

    async def close(self) -> None:
        await self.inner.close()


class _Counted:
    def __init__(self, inner: Producer, queue: str, seen: SendsSeen) -> None:
        self._inner, self._queue, self._seen = inner, queue, seen

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        await self._inner.send(data, properties)
        await self._seen._count(self._queue)

    async def close(self) -> None:
        await self._inner.close()
