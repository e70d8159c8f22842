"""Same store, same query, same ranking, in any process.

Hybrid fusion used to break ties between equal fused scores in an order seeded per process:
two runs of one benchmark gave a different top 10 for one question in nine. Here one store
on disk is searched by two fresh processes (different ``PYTHONHASHSEED``) and the rankings
must agree, item by item, for every query.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from memory_services.store import CollectionSpec, EdgeStore, Record, Retrieval, Scope, VectorStore
from tests.support.backends import backend_named

SPEC = CollectionSpec("notes-8", 8, text_fields=("text",))
OWNER = Scope("ws", "default", "ann")
WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "music",
    "paper",
    "garden",
    "window",
    "candle",
    "forest",
]
QUERIES = [f"{a} {b}" for a, b in zip(WORDS, WORDS[3:] + WORDS[:3], strict=True)]
RANKINGS = {
    "rrf": Retrieval(),
    "dbsf": Retrieval(fusion="dbsf"),
    "weighted": Retrieval(weights=(1.0, 2.0)),
    "lexical": Retrieval("lexical"),
}

#: Run in a child process: open the store, print every query's ranking as JSON.
CHILD = """
import asyncio, json, sys
from pathlib import Path
from tests.test_ranking_determinism import rankings
print(json.dumps(asyncio.run(rankings(Path(sys.argv[1])))))
"""


def records(count: int = 240) -> list[Record]:
    """Notes of two words from a small vocabulary (many equal BM25 scores) with vectors on
    a coarse grid (many equal cosines): the fused lists are full of ties, and lifted
    neighbours make more."""
    rng = np.random.default_rng(7)
    out = []
    for n in range(count):
        text = " ".join(rng.choice(WORDS, size=2, replace=False))
        vector = rng.integers(0, 3, size=8).astype(float) + 0.01
        key = uuid.uuid5(uuid.NAMESPACE_OID, str(n))
        # three interleaved writes in order: neighbours lift each other (ties.lift)
        place = {"thread": f"w{n % 3}", "seq": n // 3}
        out.append(Record(str(key), {**OWNER.payload(), "text": text, **place}, vector.tolist()))
    return out


def probe(query: str) -> list[float]:
    return [1.0 + WORDS.index(query.split()[0]) % 3, 1.0, 0.5, 0.0, 1.0, 2.0, 0.0, 1.0]


async def rankings(path: Path, store: VectorStore | None = None) -> dict[str, list[list[str]]]:
    own = store is None
    store = store or EdgeStore(path)
    if own:
        await store.open()
    await store.ensure(SPEC)
    try:
        return {
            name: [
                [h.id for h in await store.search(
                    SPEC.name, probe(q), scope=OWNER, limit=10, text=q, retrieval=retrieval
                )]
                for q in QUERIES
            ]
            for name, retrieval in RANKINGS.items()
        }  # fmt: skip
    finally:
        if own:
            await store.close()


def in_process(path: Path, seed: str) -> dict[str, list[list[str]]]:
    root = Path(__file__).resolve().parents[1]
    env = os.environ | {"PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        env=env, cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, list[list[str]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def test_two_processes_rank_one_store_alike(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "edge")
    await store.open()
    await store.ensure(SPEC)
    await store.upsert(SPEC.name, records())
    await store.close()
    first, second = in_process(tmp_path / "edge", "1"), in_process(tmp_path / "edge", "2")
    assert all(len(r) == 10 for ranked in first.values() for r in ranked)
    for name in RANKINGS:
        assert first[name] == second[name], name


@pytest.mark.parametrize("kind", ["edge", "hosted"])
async def test_equal_fused_scores_come_in_id_order(kind: str, tmp_path: Path) -> None:
    store = backend_named(kind, tmp_path / "edge")
    await store.open()
    await store.ensure(SPEC)
    # Mirror images: one is first by its vector only, the other by its words only.
    a, b = str(uuid.UUID(int=2)), str(uuid.UUID(int=1))
    await store.upsert(SPEC.name, [
        Record(a, {**OWNER.payload(), "text": "window"}, [1.0, *[0.0] * 7]),
        Record(b, {**OWNER.payload(), "text": "apple"}, [0.0, 1.0, *[0.0] * 6]),
    ])  # fmt: skip
    query = [1.0, 0.1, *[0.0] * 6]
    hits = await store.search(SPEC.name, query, scope=OWNER, limit=1, text="apple")
    await store.close()
    assert [h.id for h in hits] == [b]  # rank 1 on one side each: a tie, the lower id wins
