"""The embedded broker's disk: publishes refused before it fills, the broker restarted after.

pulsar-lite, refused a write to its entry log (ENOSPC), drops the connection, but the torn
entry stays in the log: every message published after it is acknowledged to its producer
and never delivered ("entrylog checksum mismatch"), even after space returns, until the
broker is restarted (measured with 0.2.0; a restart reads the log back whole). So:

- a publish on a persistent queue is refused with :class:`~react_mem.errors.DiskFull`
  while the broker's disk has less free than ``broker_min_free_disk_mib`` (nothing sent,
  nothing acknowledged; the caller's message is answered ``disk-full`` or kept);
- the broker's owner (:func:`~react_mem.bus.embedded.keep_embedded`) looks at the disk with
  the process: while it is below the floor, or once the broker's log says it could not
  write, the bus is reported down; when space is back the broker is restarted before any
  publish goes through again.

Requests and replies (non-persistent queues) are never written by the broker: they pass.
Other processes on the broker (found through the state directory) check the same floor,
and the file ``broker.disk-full`` the owner keeps in the data directory from the moment the
disk is low until the broker has been restarted.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Receipt, Transport, send_queued
from react_mem.disk import MIB, DiskFloor
from react_mem.errors import DiskFull

logger = logging.getLogger(__name__)

#: What pulsar-lite logs when a write to its data fails for want of space.
NO_SPACE = b"No space left on device"
SETTING = "broker_min_free_disk_mib"
#: Present while the owner has not yet restarted a broker whose disk filled.
MARKER = "broker.disk-full"


class BrokerDisk:
    """The disk under an embedded broker's data directory ``data_dir``."""

    def __init__(self, data_dir: Path, min_free_mib: int) -> None:
        self.data_dir = data_dir
        self.floor = DiskFloor("the embedded broker", data_dir, min_free_mib, setting=SETTING)
        #: Set when the broker may have torn its log; cleared when it has been restarted.
        self.torn = False
        self._log = data_dir / "broker.log"
        self._read = self._log_size()

    def check_send(self) -> None:
        """Raise :class:`DiskFull` where a publish could not be kept."""
        free = self.floor.free()
        torn = self.torn or (self.data_dir / MARKER).exists()
        if torn or free < self.floor.min_free:
            then = ", and is restarted before it takes any again" if torn else ""
            raise DiskFull(
                f"the embedded broker's disk ({self.data_dir}) has {free / MIB:.1f} MiB free; "
                f"it takes no publishes below {SETTING} ({self.floor.min_free // MIB} MiB)"
                f"{then}: nothing was sent; ask again once space is freed"
            )

    def low(self) -> str | None:
        """Why the broker cannot take publishes now (None: it can). Looked at by its owner,
        which restarts it once this turns None after :attr:`torn` was set."""
        if self.floor.low():
            reason = self.floor.describe()
        elif self._log_says_full():
            reason = f"the embedded broker could not write to {self.data_dir} (no space)"
        else:
            return None
        if not self.torn:
            logger.error("%s: publishes are refused until space is freed", reason)
        self.torn = True
        self.mark()
        return reason

    def mark(self) -> None:
        """Tell the other processes on this broker (best effort: the disk may be full)."""
        with contextlib.suppress(OSError):
            (self.data_dir / MARKER).touch()

    def clear(self) -> None:
        """The broker has been (re)started: its log is whole again."""
        self.torn = False
        (self.data_dir / MARKER).unlink(missing_ok=True)

    def _log_size(self) -> int:
        try:
            return self._log.stat().st_size
        except OSError:
            return 0

    def _log_says_full(self) -> bool:
        size = self._log_size()
        if size <= self._read:
            self._read = min(self._read, size)
            return False
        with self._log.open("rb") as log:
            log.seek(self._read)
            added = log.read(size - self._read)
        self._read = size
        return NO_SPACE in added


class GuardedProducer:
    def __init__(self, producer: Producer, disk: BrokerDisk) -> None:
        self._producer, self._disk = producer, disk

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        self._disk.check_send()
        await self._producer.send(data, properties)

    async def send_queued(self, data: bytes, properties: dict[str, str]) -> Receipt:
        self._disk.check_send()
        return await send_queued(self._producer, data, properties)

    async def close(self) -> None:
        await self._producer.close()


class GuardedTransport:
    """``transport`` with its persistent publishes refused while ``disk`` is full."""

    def __init__(self, transport: Transport, disk: BrokerDisk) -> None:
        self.inner, self.disk = transport, disk

    async def connect(self) -> None:
        await self.inner.connect()

    async def producer(self, queue: Queue) -> Producer:
        producer = await self.inner.producer(queue)
        return GuardedProducer(producer, self.disk) if queue.persistent else producer

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        return await self.inner.consumer(queue, subscription, from_earliest=from_earliest)

    async def close(self) -> None:
        await self.inner.close()
