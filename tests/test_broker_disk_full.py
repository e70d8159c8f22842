"""The embedded broker on a full disk (issue 26, finding 2). pulsar-lite, refused a write to
its entry log, tears it: every message published after is acknowledged and never delivered,
even once space returns (until it is restarted). Now a publish is refused while the broker's
disk is below ``broker_min_free_disk_mib`` (nothing acknowledged), the bus reports itself
down meanwhile, and once space is back the broker is restarted before publishes go through:
every message acknowledged before, during or after is delivered.

The embedded broker as ``react-mem up`` runs it (its backend's ``connect``, with the watcher
that keeps it), on a tmpfs mounted for the test (needs root).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus import health as bus_health
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.health import BusHealth
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.pulsar_backend import connect
from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer
from react_mem.errors import DiskFull
from react_mem.processor.settings import BusSettings
from tests.support.recording import eventually
from tests.test_disk_full import fill, small_disk

pytestmark = pytest.mark.broker

QUEUE = Queue.parse("flow:tg:disk-full-probe:default:default")
#: Bounds on a hang, not timing checks.
PATIENCE = 60.0


async def send(producer: Producer, n: int, size: int = 1000) -> bool:
    """Whether the broker acknowledged message ``n``."""
    try:
        await asyncio.wait_for(producer.send(os.urandom(size), {"n": str(n)}), 5)
    except (DiskFull, TimeoutError, Exception):  # noqa: BLE001 - any failure: not acknowledged
        return False
    return True


async def drain(consumer: Consumer, wanted: set[str]) -> set[str]:
    """Every message number received until ``wanted`` are all in, or none came for a while."""
    got: set[str] = set()
    with contextlib.suppress(TimeoutError):
        while not wanted <= got:
            delivery = await asyncio.wait_for(consumer.receive(), 10)
            got.add(delivery.properties["n"])
            await consumer.ack(delivery)
    return got


async def test_a_full_disk_refuses_publishes_and_the_broker_comes_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bus_health, "CHECK_INTERVAL", 0.1)
    gate, recycle = threading.Event(), EmbeddedBroker.recycle

    def held(broker: EmbeddedBroker) -> None:  # the restart waits for the test's say-so
        gate.wait(PATIENCE)
        recycle(broker)

    monkeypatch.setattr(EmbeddedBroker, "recycle", held)
    with small_disk(tmp_path / "state", 32) as disk:
        settings = BusSettings(state_dir=disk, broker_min_free_disk_mib=16)
        health = BusHealth(CollectorRegistry())
        async with (
            connect(settings, start_embedded=True, health=health) as transport,
            connect(settings, start_embedded=False) as beside,  # another process's view
        ):
            pid = int((disk / "broker" / "broker.pid").read_text())
            producer = await transport.producer(QUEUE)
            neighbour = await beside.producer(QUEUE)
            consumer = await transport.consumer(QUEUE, "probe")
            acked = {str(n) for n in range(3) if await send(producer, n)}
            assert len(acked) == 3

            fill(disk, leave_mib=8)
            refused = not await send(producer, 100)
            with pytest.raises(DiskFull, match="broker_min_free_disk_mib"):
                await producer.send(b"x", {"n": "101"})
            await eventually(lambda: not health.up, timeout=PATIENCE)
            down = health.reason or ""

            # A client that does not check (another process, an older one) fills the rest:
            # the broker's own write fails and tears its log.
            other = PulsarTransport(PulsarOptions(url=(disk / "broker" / "broker.url")
                                                  .read_text().strip(), connect_timeout=10))  # fmt: skip
            await other.connect()
            try:
                unguarded = await other.producer(QUEUE)
                for n in range(200, 400):
                    if not await send(unguarded, n, size=100_000):
                        break
                    acked.add(str(n))
            finally:
                await other.close()

            for filler in disk.glob("filler*"):
                filler.unlink()
            # Space is back, the broker not yet restarted: the other process is told too.
            with pytest.raises(DiskFull, match="restarted before it takes any again"):
                await neighbour.send(b"x", {"n": "102"})
            gate.set()
            await eventually(lambda: health.up, timeout=PATIENCE)
            restarted = int((disk / "broker" / "broker.pid").read_text()) != pid
            after = {str(n) for n in range(500, 505) if await send(producer, n)}
            after |= {str(n) for n in range(600, 603) if await send(neighbour, n)}
            got = await drain(consumer, acked | after)
    assert refused
    assert "broker_min_free_disk_mib" in down
    assert len(after) == 8
    assert acked | after <= got, sorted((acked | after) - got)  # every acknowledged one delivered
    assert restarted  # the torn log is read back whole only by a new broker
    assert not {"100", "101", "102"} & got  # refused: never sent
