"""A search's ``leave_out`` in the VectorStore contract, on every backend: the hits are the
same records in the same order with the same scores, and their payloads are the full ones
less the keys left out, whatever the ranking (dense, lexical, hybrid, boosted) and in a
batch too."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_services.store import (
    CollectionSpec,
    Condition,
    Hit,
    Record,
    Retrieval,
    Scope,
    VectorStore,
)
from tests.support.backends import BACKENDS, backend_named

SPEC = CollectionSpec("episodes-4", 4, text_fields=("goal",))
C = SPEC.name
HOME = Scope("ws-a", "default", "ann")
QUERIES = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.2, 0.0]]
TEXTS = ["convert euros to dollars", "book a table in Paris"]
GOALS = [
    "convert 100 euros to dollars",
    "convert 50 pounds to yen",
    "book a table for two in Paris",
    "find the capital of Australia",
    "convert a recipe from cups to grams",
    "book a train to Lyon",
]
SEARCHES: list[dict[str, Any]] = [
    {},  # dense: no text
    {"text": TEXTS[0], "retrieval": Retrieval("lexical")},
    {"text": TEXTS[0], "retrieval": Retrieval()},
    {"text": TEXTS[0], "retrieval": Retrieval(fusion="dbsf")},
    {"text": TEXTS[0], "boost": [Condition("day", gte=3)]},
    {"text": TEXTS[0], "where": [Condition("outcome", equals="success")]},
]


def episode(i: int, goal: str) -> Record:
    payload = {
        **HOME.payload(),
        "goal": goal,
        "outcome": "success" if i % 2 == 0 else "failure",
        "day": i,
        "steps": [{"thought": f"step {n} of {goal}", "observation": "x" * 50} for n in range(4)],
        "trace": {"tokens": 10 * i},
    }
    return Record(str(uuid.uuid4()), payload, [1.0 - 0.1 * i, 0.1 * i, 0.3, 0.05 * (i % 3)])


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    backend = backend_named(request.param, tmp_path / "edge")
    await backend.open()
    await backend.ensure(SPEC)
    await backend.upsert(C, [episode(i, goal) for i, goal in enumerate(GOALS)])
    yield backend
    await backend.close()


def less(hits: list[Hit], keys: set[str]) -> list[tuple[str, float, dict[str, Any]]]:
    return [(h.id, h.score, {k: v for k, v in h.payload.items() if k not in keys}) for h in hits]


def shown(hits: list[Hit]) -> list[tuple[str, float, dict[str, Any]]]:
    return [(h.id, h.score, dict(h.payload)) for h in hits]


@pytest.mark.parametrize(
    "search", SEARCHES, ids=["dense", "lexical", "rrf", "dbsf", "boost", "where"]
)
@pytest.mark.parametrize("keys", [("steps",), ("steps", "trace"), ("absent",)])
async def test_leave_out_drops_only_those_keys_and_ranks_the_same(
    store: VectorStore, search: dict[str, Any], keys: tuple[str, ...]
) -> None:
    full = await store.search(C, QUERIES[0], scope=HOME, limit=4, **search)
    lean = await store.search(C, QUERIES[0], scope=HOME, limit=4, leave_out=keys, **search)
    assert full and all("steps" in h.payload for h in full)
    assert all(not set(keys) & set(h.payload) for h in lean)
    assert shown(lean) == less(full, set(keys))
    if "absent" in keys:
        assert shown(lean) == shown(full)


async def test_leave_out_in_a_batch(store: VectorStore) -> None:
    full = await store.search_many(C, QUERIES, scope=HOME, limit=3, texts=TEXTS)
    lean = await store.search_many(
        C, QUERIES, scope=HOME, limit=3, texts=TEXTS, leave_out=["steps"]
    )
    assert len(lean) == len(full) == 2 and all(full)
    for lean_hits, full_hits in zip(lean, full, strict=True):
        assert all("steps" in h.payload for h in full_hits)
        assert shown(lean_hits) == less(full_hits, {"steps"})
    # What was left out of a search stays stored: the records read back whole.
    got = await store.get(C, [h.id for h in lean[0]], scope=HOME)
    assert got and all(r.payload["steps"] for r in got)
