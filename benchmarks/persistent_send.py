"""A send's wait for the embedded broker's receipt: on a persistent queue (the trajectory's)
and a non-persistent one (a reply's), a 3 KB message alone after a pause, and the
persistent one with two replies queued beside it (as an answer's end sends them); then two
replies awaited one after the other against two queued together (``send_queued``). Medians
in ms. pulsar-lite writes a persistent message to its entry log and index without a disk
sync (no fsync in an strace of it), so the wait is the broker's hops, not the disk's.

    OMP_NUM_THREADS=1 chrt -r 1 python benchmarks/persistent_send.py
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer

BODY, REPLY = b"x" * 3000, b"y" * 400


async def drain(consumer: Consumer) -> None:
    while True:
        await consumer.ack(await consumer.receive())


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        transport = PulsarTransport(PulsarOptions(url=broker.url))
        await transport.connect()
        flow, reply = Queue.parse("flow:tg:probe"), Queue.parse("response:tg:probe")
        drains = [
            asyncio.create_task(drain(await transport.consumer(q, "s"))) for q in (flow, reply)
        ]
        persistent, replies = await transport.producer(flow), await transport.producer(reply)
        for _ in range(50):
            await persistent.send(BODY, {})
        for pause in (0.005, 0.05, 0.2):
            alone, beside, reply_alone, in_turn, together = [], [], [], [], []
            for _ in range(25 if pause == 0.2 else 100):
                await asyncio.sleep(pause)
                began = time.perf_counter()
                await persistent.send(BODY, {})
                alone.append(time.perf_counter() - began)
                await asyncio.sleep(pause)
                began = time.perf_counter()
                await replies.send(REPLY, {})
                reply_alone.append(time.perf_counter() - began)
                await asyncio.sleep(pause)
                began = time.perf_counter()
                first = await persistent.send_queued(BODY, {})
                others = [await replies.send_queued(REPLY, {}) for _ in range(2)]
                await first
                beside.append(time.perf_counter() - began)
                await asyncio.gather(*others)
                await asyncio.sleep(pause)
                began = time.perf_counter()
                await replies.send(REPLY, {})
                await replies.send(REPLY, {})
                in_turn.append(time.perf_counter() - began)
                await asyncio.sleep(pause)
                began = time.perf_counter()
                await asyncio.gather(*[await replies.send_queued(REPLY, {}) for _ in range(2)])
                together.append(time.perf_counter() - began)
            ms = {
                k: statistics.median(v) * 1000
                for k, v in {
                    "persistent alone": alone,
                    "persistent beside two replies": beside,
                    "reply alone": reply_alone,
                    "two replies in turn": in_turn,
                    "two replies queued": together,
                }.items()
            }
            print(
                f"pause {pause * 1000:5.0f} ms: " + ", ".join(f"{k} {v:.2f}" for k, v in ms.items())
            )
        for task in drains:
            task.cancel()
        await transport.close()


if __name__ == "__main__":
    asyncio.run(main())
