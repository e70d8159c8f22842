"""What publishing the trajectory before the answer costs an ask (issue 26, finding 5).

The agent now appends the conversation turn and publishes the trajectory before it sends
the answer, so an answered "remember that ..." is never lost. This runs one caller's asks
through the real agent, conversation memory and embedded broker (scripted LLM answering at
once, memory on, a user and a conversation) twice, interleaved in rounds so both see the
same machine: "learning first" as the agent is, and "answer first", the agent with its
``finish`` (turn and trajectory) started in the background instead of awaited, which is
what the reply waited for before. It prints p50/p99 of each and the difference.

    OMP_NUM_THREADS=1 python benchmarks/answer_order.py
    OMP_NUM_THREADS=1 python benchmarks/answer_order.py --asks 200 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.agent.service import AgentProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.queues import Queue
from tests.support.agent_stack import Stack, agent_stack, trajectory_queue
from tests.test_agent_playbook import answer_at_once

ORIGINAL = AgentProcessor.finish


async def in_background(self: AgentProcessor, *args: Any, **kwargs: Any) -> None:
    """The answer-first order: the reply does not wait for the turn and the trajectory."""
    task = asyncio.create_task(ORIGINAL(self, *args, **kwargs))
    BACKGROUND.add(task)
    task.add_done_callback(BACKGROUND.discard)


BACKGROUND: set[asyncio.Task[None]] = set()


async def asks(stack: Stack, n: int, tag: str) -> list[float]:
    took = []
    for i in range(n):
        began = time.perf_counter()
        got = await stack.ask(
            f"Please remember that my locker {i} is on level {i % 7}.",
            user="bench",
            conversation_id=f"{tag}-{i // 10}",
        )
        took.append(time.perf_counter() - began)
        if got[-1].message_type != "answer":
            raise RuntimeError(f"ask failed: {got[-1]}")
    await asyncio.gather(*BACKGROUND)
    return took


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        transport = PulsarTransport(PulsarOptions(url=broker.url))
        await transport.connect()
        unique = uuid.uuid4().hex[:8]
        # Something subscribed to the trajectory flow, as the learner would be.
        drain = await transport.consumer(Queue.parse(trajectory_queue(unique)), "bench")
        try:
            async with agent_stack(
                transport,
                Path(tmp),
                unique,
                script=answer_at_once,
                services=("conversation-memory",),
                trajectories=True,
            ) as stack:
                await asks(stack, 10, "warm")
                results: dict[str, list[float]] = {"learning first": [], "answer first": []}
                for r in range(args.rounds):
                    for name, finish in (("learning first", ORIGINAL), ("answer first", None)):
                        AgentProcessor.finish = finish or in_background  # type: ignore[method-assign]
                        results[name] += await asks(stack, args.asks, f"{name[:3]}{r}")
                    AgentProcessor.finish = ORIGINAL  # type: ignore[method-assign]
        finally:
            await drain.close()
            await transport.close()
    print(f"{args.asks * args.rounds} asks each, one caller, pulsar-lite, scripted LLM")
    for name, values in results.items():
        print(f"  {name:<15} p50 {pct(values, 50):6.2f} ms  p99 {pct(values, 99):6.2f} ms")
    first, after = results["learning first"], results["answer first"]
    added = statistics.median(first) - statistics.median(after)
    print(f"  added by publishing before answering: {added * 1000:+.2f} ms at p50")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=100, help="asks per order per round")
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
