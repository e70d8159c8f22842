"""What one agent recall's episode searches cost episode memory, by the episodes' steps.

In one process on the embedded store: an owner's ``--episodes`` episodes, each with
``--steps`` steps (a thought, a tool call, an observation), stored as the learner stores
them; then the recall's one request (the episodes like the question, top 3, and the recent
ones as its ``also`` search, top 3) decoded, answered (``EpisodeMemory.retrieve_all``: the
engine's searches, the hits read, the episodes built), its reply encoded and decoded again
as the agent does. Prints the thread's CPU time of each part (median of ``--repeats``) and
the reply's size, per step count: for the request with ``with_steps=False`` (what the
recall asks now: the store reads no steps) and, alternating with it, the same request
with steps (what it asked before, and what other callers get).

    OMP_NUM_THREADS=1 python benchmarks/episode_search_cost.py --steps 0 2 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from memory_services.episodes.episode_memory import EpisodeMemory
from memory_services.episodes.records import EpisodeLimits
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import Scope
from memory_services.store.edge import EdgeStore
from react_mem.schema import AgentStep
from react_mem.schema.episodes import EpisodeHits, EpisodeRequest, EpisodeResponse, EpisodeSearch
from tests.support.embedder import HashingEmbedder

PARTS = ("request decode", "retrieve", "reply encode", "reply decode (agent)")
#: The recall's request now (no steps), and as before (with them).
WITHOUT, WITH = "without steps", "with steps"
KINDS = (WITHOUT, WITH)


async def measure(
    steps: int, episodes: int, repeats: int
) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        store, embedder = EdgeStore(Path(tmp)), HashingEmbedder()
        memory = EpisodeMemory(
            store,
            embedder,
            collection="episodes",
            registry=ScopeRegistry(store, "episode-scopes"),
            limits=EpisodeLimits(max_goal_chars=4000, max_steps=200, max_episode_bytes=512 << 10),
            max_per_scope=episodes + 1,
            max_age=None,
            default_top_k=3,
            clock=time.time,
        )
        await store.open()
        try:
            await memory.ensure()
            scope = Scope("bench", "default", "ada")
            trajectory = [
                AgentStep(
                    thought=f"step {i}: look the rate up",
                    action="search",
                    arguments={"q": "EUR USD rate"},
                    observation="the rate today is 1.08 " * 8,
                )
                for i in range(steps)
            ]
            for i in range(episodes):
                stored = EpisodeRequest(
                    operation="store",
                    goal=f"question {i} about topic {i % 17}",
                    outcome="success",
                    steps=trajectory,
                    lessons=["check the rate first"],
                    session_id=f"s{i}",
                    score=0.8,
                )
                await memory.store(scope, stored)
            [vector] = await embedder.embed(["question about topic 3"])
            recent = EpisodeSearch(top_k=3, since=time.time() - 7 * 86400)
            wires = {
                kind: EpisodeRequest(
                    operation="retrieve",
                    goal="question about topic 3",
                    vector=vector,
                    top_k=3,
                    also=[recent],
                    with_steps=kind == WITH,
                ).encode()
                for kind in KINDS
            }
            times = {kind: {part: [] for part in PARTS} for kind in KINDS}
            replies = dict.fromkeys(KINDS, b"")
            for n in range(repeats):
                for kind in KINDS if n % 2 else KINDS[::-1]:  # alternating, ABBA
                    replies[kind] = await _once(memory, scope, wires[kind], times[kind])
        finally:
            await store.close()
    medians = {
        kind: {part: statistics.median(v) * 1000 for part, v in parts.items()}
        for kind, parts in times.items()
    }
    return medians, {kind: len(reply) for kind, reply in replies.items()}


async def _once(
    memory: EpisodeMemory, scope: Scope, wire: bytes, times: dict[str, list[float]]
) -> bytes:
    t0 = time.thread_time()
    request = EpisodeRequest.model_validate_json(wire)
    t1 = time.thread_time()
    found, also = await memory.retrieve_all(scope, request)
    t2 = time.thread_time()
    hits = [EpisodeHits(episodes=e) for e in also]
    reply = EpisodeResponse(episodes=found, also=hits).encode()
    t3 = time.thread_time()
    EpisodeResponse.model_validate_json(reply)
    t4 = time.thread_time()
    for part, spent in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
        times[part].append(spent)
    return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 2, 20])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    for steps in args.steps:
        medians, sizes = asyncio.run(measure(steps, args.episodes, args.repeats))
        for kind in KINDS:
            shown = ", ".join(f"{part} {ms:.3f}" for part, ms in medians[kind].items())
            print(
                f"{steps:3d} steps an episode, {kind:13s}: CPU ms {shown};"
                f" reply {sizes[kind] / 1024:.1f} KB"
            )
        ratio = medians[WITHOUT]["retrieve"] / medians[WITH]["retrieve"]
        print(f"{steps:3d} steps an episode: retrieve without / with steps {ratio:.2f}")


if __name__ == "__main__":
    main()
