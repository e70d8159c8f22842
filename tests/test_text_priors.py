"""Priors on a fact's text: in a hybrid search a record that only asks a question ranks below
one that tells, and a long record above a short one of about the same fused score, on both
store backends (Qdrant Edge, the Qdrant server code path in qdrant-client's in-memory mode)
and through the fact service, where a request can turn them off (``priors: false``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.retrieval import resolve
from memory_services.store import (
    CollectionSpec,
    Record,
    Retrieval,
    Scope,
    VectorStore,
    ties,
)
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FactInput
from react_mem.schema.retrieval import RetrievalOptions
from tests.support.backends import backend_named
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service

SPEC = CollectionSpec("priors-4", 4, text_fields=("content",))
C = SPEC.name
ANN = Scope("ws", "default", "ann")
QUESTION, QUERY = "best camping memory", [1.0, 0.0, 0.0, 0.0]
ASKS = "what is your best camping memory?"
TELLS = "my best camping trip was on the beach"
SHORT = "my best camping memory is the lake"
LONG = (
    "we went camping in the mountains with the whole family last summer and it was the best "
    "trip we ever had, the kids hiked every morning, we roasted marshmallows by the fire, "
    "watched the meteor shower at night and swam in a cold clear lake before breakfast"
)
ON, OFF = Retrieval(), Retrieval(ask_discount=0.0, length_prior=0.0)


@pytest.fixture(params=["edge", "hosted", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    backend = backend_named(request.param, tmp_path / "edge")
    await backend.open()
    await backend.ensure(SPEC)
    yield backend
    await backend.close()


def record(content: str | None, vector: list[float]) -> Record:
    payload = {**ANN.payload(), **({} if content is None else {"content": content})}
    return Record(str(uuid.uuid4()), payload, vector)


async def ranked(store: VectorStore, retrieval: Retrieval) -> list[str]:
    hits = await store.search(C, QUERY, scope=ANN, limit=2, text=QUESTION, retrieval=retrieval)
    return [str(h.payload.get("content")) for h in hits]


async def test_a_record_that_only_asks_ranks_below_one_that_tells(store: VectorStore) -> None:
    # first on both sides (nearest, and all three of the question's words)
    await store.upsert(C, [record(ASKS, [1.0, 0.0, 0.0, 0.0]), record(TELLS, [0.9, 0.3, 0.0, 0.0])])
    assert await ranked(store, OFF) == [ASKS, TELLS]
    assert await ranked(store, ON) == [TELLS, ASKS]


async def test_a_long_record_ranks_above_a_short_one_just_ahead(store: VectorStore) -> None:
    await store.upsert(C, [record(SHORT, [1.0, 0.0, 0.0, 0.0]), record(LONG, [0.9, 0.3, 0.0, 0.0])])
    assert await ranked(store, OFF) == [SHORT, LONG]
    assert await ranked(store, ON) == [LONG, SHORT]


async def test_records_without_content_keep_their_fused_order(store: VectorStore) -> None:
    """Another collection's records (no ``content``): the priors leave them as they are."""
    spec = CollectionSpec("other-4", 4, text_fields=("text",))
    await store.ensure(spec)
    first = Record(str(uuid.uuid4()), {**ANN.payload(), "text": ASKS}, [1.0, 0.0, 0.0, 0.0])
    second = Record(str(uuid.uuid4()), {**ANN.payload(), "text": TELLS}, [0.9, 0.3, 0.0, 0.0])
    await store.upsert(spec.name, [first, second])
    for retrieval in (ON, OFF):
        hits = await store.search(
            spec.name, QUERY, scope=ANN, limit=2, text=QUESTION, retrieval=retrieval
        )
        assert [h.id for h in hits] == [first.id, second.id]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_the_factor_is_bounded_and_asking_never_raises_it(
    text: str, ask: float, length: float
) -> None:
    retrieval = Retrieval(ask_discount=ask, length_prior=length)
    factor = ties.prior({"content": text}, retrieval)
    low, high = ties.LENGTH_BOUNDS
    assert (1 - ask) * low - 1e-9 <= factor <= high + 1e-9
    asked = ties.prior({"content": text.rstrip() + " ?"}, retrieval)
    told = ties.prior({"content": text.rstrip() + " ."}, retrieval)
    assert asked <= told
    assert ties.prior({"content": 3}, retrieval) == ties.prior(None, retrieval) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.integers(1, 200))
def test_a_longer_text_is_never_scaled_below_a_shorter_one(a: int, b: int) -> None:
    short, long = sorted((a, b))
    factor = functools.partial(ties.prior, retrieval=ON)
    assert factor({"content": "word " * short}) <= factor({"content": "word " * long})


def test_a_request_turns_the_priors_off() -> None:
    assert resolve(None).ask_discount > 0 and resolve(None).length_prior > 0
    off = resolve(RetrievalOptions(priors=False))
    assert off.ask_discount == off.length_prior == 0
    assert resolve(RetrievalOptions(priors=True)) == resolve(None)


# -- through the fact service ---------------------------------------------------------------

fact_service = functools.partial(
    shared_fact_service, client=FactService, embedder=HashingEmbedder()
)


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[FactService]:
    async with fact_service(transport, registry, tmp_path, unique) as service:
        yield service


async def top(facts: FactService, **options: Any) -> list[str]:
    retrieval = RetrievalOptions(**options) if options else None
    found = await facts.ok("retrieve", query=ASKS, top_k=2, user="ann", retrieval=retrieval)
    return [f.content for f in found.facts]


@pytest.mark.broker
async def test_the_fact_service_ranks_a_telling_fact_above_a_stored_question(
    facts: FactService,
) -> None:
    await facts.ok("store", facts=[FactInput(content=c) for c in (ASKS, TELLS)], user="ann")
    assert await top(facts, priors=False) == [ASKS, TELLS]  # the question repeats the query
    assert await top(facts) == [TELLS, ASKS]
