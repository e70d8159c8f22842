"""One hop of a message through the embedded broker, the way the transport makes it, against
the way it made it through ``pulsar.asyncio``'s own calls (``wrapper``): side by side in one
process, alternated round by round (ABBA), two clients (a sender's and a receiver's
connection) on one event loop.

- **one hop**: a 3 KB message sent after a pause (an idle loop, as in an ask), from the
  send's call to the receiver's ``receive()`` returning; and the sender's wait for the
  broker's receipt; medians in ms;
- **CPU per message**: this process's CPU (every thread: the loop's and the client's)
  over a burst of messages sent back to back, each received and acknowledged: what every
  hop costs its two processes.

    OMP_NUM_THREADS=1 chrt -r 1 python benchmarks/bus_hop.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarConsumer, PulsarOptions, PulsarProducer, PulsarTransport
from react_mem.bus.queues import Queue

BODY = b"x" * 3000
PROPS = {"id": "4f1c2b8e-0000-4000-8000-000000000000"}


async def pair(
    sender: PulsarTransport, receiver: PulsarTransport, mode: str
) -> tuple[PulsarProducer, PulsarConsumer]:
    queue = Queue.parse(f"response:tg:hop-{mode}")
    consumer = await receiver.consumer(queue, f"hop-{mode}")
    producer = await sender.producer(queue)
    if mode == "wrapper":  # pulsar.asyncio's own calls, as the transport made them before
        producer._native._native = consumer._native._native = None
    return producer, consumer


async def hops(
    producer: PulsarProducer, consumer: PulsarConsumer, n: int, pause: float
) -> tuple[list[float], list[float]]:
    hop, receipt = [], []
    for _ in range(n):
        await asyncio.sleep(pause)
        waiting = asyncio.ensure_future(consumer.receive())
        await asyncio.sleep(0)  # its receive is with the client before the send
        began = time.perf_counter()
        sent = producer.queue(BODY, PROPS)
        sent.add_done_callback(lambda _, b=began: receipt.append(time.perf_counter() - b))
        delivery = await waiting
        hop.append(time.perf_counter() - began)
        await sent
        await consumer.ack(delivery)
    return hop, receipt


async def burst(producer: PulsarProducer, consumer: PulsarConsumer, n: int) -> float:
    """Process CPU seconds per message: ``n`` sent at once, each received and acked."""

    async def drain() -> None:
        for _ in range(n):
            await consumer.ack(await consumer.receive())

    began = time.process_time()
    draining = asyncio.create_task(drain())
    await asyncio.gather(*(producer.queue(BODY, PROPS) for _ in range(n)))
    await draining
    return (time.process_time() - began) / n


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        sender, receiver = (PulsarTransport(PulsarOptions(url=broker.url)) for _ in range(2))
        await sender.connect()
        await receiver.connect()
        modes = ("wrapper", "direct")
        pairs = {mode: await pair(sender, receiver, mode) for mode in modes}
        for mode in modes:  # warm up
            await hops(*pairs[mode], 20, 0.01)
            await burst(*pairs[mode], 200)
        hop: dict[str, list[float]] = {m: [] for m in modes}
        receipt: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        for round_ in range(args.rounds):
            for mode in modes if round_ % 2 == 0 else modes[::-1]:
                h, r = await hops(*pairs[mode], args.hops, args.pause)
                hop[mode] += h
                receipt[mode] += r
                cpu[mode].append(await burst(*pairs[mode], args.burst))
        await sender.close()
        await receiver.close()

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    print(f"{args.rounds} rounds (ABBA), {args.hops} hops a round after {args.pause}s pauses,")
    print(f"bursts of {args.burst}; medians")
    print(f"{'':34} {'wrapper':>9} {'direct':>9} {'ratio':>6}")
    rows = [
        ("one hop (ms)", ms(hop["wrapper"]), ms(hop["direct"])),
        ("the sender's receipt (ms)", ms(receipt["wrapper"]), ms(receipt["direct"])),
        ("CPU per message, both sides (us)", ms(cpu["wrapper"]) * 1000, ms(cpu["direct"]) * 1000),
    ]
    for name, old, new in rows:
        print(f"{name:34} {old:9.3f} {new:9.3f} {new / old:6.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--hops", type=int, default=100, help="paced hops per round")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between hops")
    parser.add_argument("--burst", type=int, default=2000, help="messages per burst")
    asyncio.run(main(parser.parse_args()))
