"""A conversation's last turns, read alone against the whole conversation, as it grows.

The agent's recall and the learner's summary ask conversation-memory for a conversation's
last few turns (``get`` with a limit). That read used to fetch every turn and keep the last;
it now fetches only the turns from ``turn_count - limit`` on. This times both reads
(``ConversationMemory.turns`` whole, and from that sequence number) on the embedded store
at each size, medians of ``--reads`` reads, in process (no bus; a hashing embedder, since
no search runs).

    OMP_NUM_THREADS=1 python benchmarks/conversation_tail.py
    OMP_NUM_THREADS=1 python benchmarks/conversation_tail.py --sizes 10 100 1000 5000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_services.conversations.conversation_memory import ConversationMemory
from memory_services.conversations.records import ConversationLimits
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.edge import EdgeStore
from react_mem.schema.conversations import ConversationRequest
from react_mem.schema.scope import Scope
from tests.support.embedder import HashingEmbedder


async def timed(read: object, reads: int) -> float:
    spans = []
    for _ in range(reads):
        began = time.perf_counter()
        await read()  # type: ignore[operator]
        spans.append(time.perf_counter() - began)
    return statistics.median(spans) * 1000


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = EdgeStore(Path(tmp) / "edge", flush_interval=0)
        await store.open()
        limits = ConversationLimits(
            max_query_chars=16_000, max_answer_chars=64_000, max_summary_chars=16_000,
            max_turns=max(args.sizes) + 1,
        )  # fmt: skip
        memory = ConversationMemory(
            store,
            HashingEmbedder(),
            collection="conversations-384",
            registry=ScopeRegistry(store, "conversation-scopes-1"),
            limits=limits,
            clock=time.time,
        )
        await memory.ensure()
        scope, header, turns = Scope("ws", "default", "ada", "c1"), None, 0
        print(f"last {args.limit} turns of one conversation, median of {args.reads} reads (ms):")
        for size in sorted(args.sizes):
            while turns < size:
                request = ConversationRequest(
                    operation="append", query=f"question {turns}", answer=f"answer {turns}"
                )
                await memory.append(scope, request, key=f"t{turns}", flow="f1", header=header)
                header, turns = await memory.header(scope), turns + 1
            since = turns - args.limit
            whole = await timed(lambda: memory.turns(scope), args.reads)
            tail = await timed(lambda s=since: memory.turns(scope, since=s), args.reads)
            print(
                f"  {size:>6} turns: whole conversation {whole:8.2f}, last turns alone "
                f"{tail:6.2f} ({whole / tail:.0f}x)",
                flush=True,
            )
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 2000])
    parser.add_argument("--limit", type=int, default=5, help="turns asked for (the agent's 5)")
    parser.add_argument("--reads", type=int, default=30)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
