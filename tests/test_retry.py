"""The memory services' one retry policy, at the store and embedder seams: a plain first
attempt, then tenacity's bounded retries; bad input and cancellation are never retried."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services import retry
from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.retry import (
    ATTEMPTS,
    RetryingEmbedder,
    RetryingStore,
    retrying_embedder,
    retrying_store,
)
from memory_services.runtime import make_store
from memory_services.store.base import Record, VectorStore
from react_mem.bus.in_process import InProcessTransport
from react_mem.bus.queues import Queue
from react_mem.embedding.base import Embedder
from react_mem.errors import BadRequest, TransientError
from react_mem.schema.conversations import ConversationRequest
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import flows_file, topics

#: Store and embedder calls that are lifecycle, not retried (see the module).
LIFECYCLE = {"open", "close", "start"}


def async_methods(protocol: type) -> list[str]:
    return sorted(
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    )


class Flaky:
    """An embedder failing with ``error`` for the first ``failures`` calls of ``embed``."""

    dimension, model_name = 2, "flaky"

    def __init__(self, failures: int, error: type[BaseException] = RuntimeError) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def start(self) -> None:
        """Nothing to load."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return [[float(self.calls), 0.0] for _ in texts]


@pytest.fixture
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the waits instead of sleeping them."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)  # tenacity's waits too
    return waits


async def test_a_call_that_succeeds_is_made_once(no_waits: list[float]) -> None:
    inner = Flaky(0)
    assert await RetryingEmbedder(inner).embed(["x"]) == [[1.0, 0.0]]
    assert (inner.calls, no_waits) == (1, [])


@pytest.mark.parametrize("failures", range(1, ATTEMPTS))
async def test_transient_failures_are_retried_up_to_the_attempts(
    failures: int, no_waits: list[float]
) -> None:
    inner = Flaky(failures)
    assert await RetryingEmbedder(inner).embed(["x"]) == [[failures + 1.0, 0.0]]


async def test_the_waits_double_from_the_first(no_waits: list[float]) -> None:
    with pytest.raises(TransientError):
        await RetryingEmbedder(Flaky(ATTEMPTS)).embed(["x"])
    assert no_waits == [retry.FIRST_WAIT * 2**n for n in range(ATTEMPTS - 1)]


async def test_exhausted_retries_name_the_dependency_and_keep_the_cause(
    no_waits: list[float],
) -> None:
    inner = Flaky(ATTEMPTS)
    with pytest.raises(TransientError, match=f"embedder failed after {ATTEMPTS} attempts") as err:
        await RetryingEmbedder(inner).embed(["x"])
    assert inner.calls == ATTEMPTS
    assert isinstance(err.value.__cause__, RuntimeError)
    assert str(err.value.__cause__) == f"failure {ATTEMPTS}"


async def test_bad_input_is_never_retried(no_waits: list[float]) -> None:
    inner = Flaky(1, BadRequest)
    with pytest.raises(BadRequest):
        await RetryingEmbedder(inner).embed(["x"])
    assert inner.calls == 1


async def test_bad_input_on_a_retry_is_not_retried_again(no_waits: list[float]) -> None:
    class Then(Flaky):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            self.calls += 1
            raise (RuntimeError if self.calls == 1 else BadRequest)("no")

    inner = Then(0)
    with pytest.raises(BadRequest):
        await RetryingEmbedder(inner).embed(["x"])
    assert inner.calls == 2


@pytest.mark.parametrize("error", [asyncio.CancelledError, KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("failures_before", [0, 1])
async def test_cancellation_and_exits_are_never_retried(
    error: type[BaseException], failures_before: int, no_waits: list[float]
) -> None:
    """On the first attempt (a plain await) or a later one (tenacity's)."""

    class Then(Flaky):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            self.calls += 1
            raise (RuntimeError if self.calls <= failures_before else error)("stop")

    inner = Then(0)
    with pytest.raises(error):
        await RetryingEmbedder(inner).embed(["x"])
    assert inner.calls == failures_before + 1


class Recorder:
    """Any store or embedder method: records each call, and fails its first one."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.dimension, self.model_name = 7, "recorder"

    def __getattr__(self, name: str) -> Any:
        async def method(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            if len(self.calls) == 1:
                raise ConnectionError("down")
            return f"{name} result"

        return method


@pytest.mark.parametrize(
    ("protocol", "wrapper"), [(VectorStore, RetryingStore), (Embedder, RetryingEmbedder)]
)
async def test_the_wrappers_cover_every_async_method_of_their_seam(
    protocol: type, wrapper: type, no_waits: list[float]
) -> None:
    """A method added to the seam fails here until its wrapper passes it on, whole and
    retried (or, for lifecycle, straight through)."""
    methods = async_methods(protocol)
    assert {"upsert", "search", "embed"} & set(methods)  # the protocol was read
    for name in methods:
        own = vars(wrapper).get(name)
        assert own is not None, f"{wrapper.__name__} does not wrap {name}"
        assert inspect.signature(own) == inspect.signature(getattr(protocol, name)), name
        params = list(inspect.signature(own).parameters.values())[1:]
        args = tuple(object() for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
        kwargs = {p.name: object() for p in params if p.kind is p.KEYWORD_ONLY}
        inner = Recorder()
        wrapped = wrapper(inner)
        if name in LIFECYCLE:
            with pytest.raises(ConnectionError):
                await getattr(wrapped, name)(*args, **kwargs)
            assert inner.calls == [(name, args, kwargs)]
        else:
            assert await getattr(wrapped, name)(*args, **kwargs) in (None, f"{name} result")
            assert inner.calls == [(name, args, kwargs)] * 2, name
    if wrapper is RetryingEmbedder:
        embedder = RetryingEmbedder(Recorder())  # type: ignore[arg-type]
        assert (embedder.dimension, embedder.model_name) == (7, "recorder")


def test_a_store_or_embedder_is_wrapped_once() -> None:
    store = retrying_store(Recorder())  # type: ignore[arg-type]
    embedder = retrying_embedder(Recorder())  # type: ignore[arg-type]
    assert retrying_store(store) is store and retrying_embedder(embedder) is embedder
    assert isinstance(store, RetryingStore) and isinstance(embedder, RetryingEmbedder)
    assert not isinstance(store.inner, RetryingStore)


class Stalling:
    """The real store, whose upserts (once armed) fail once, then hang until cancelled;
    any later upsert fails again (so a retried cancellation shows as a third call)."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store
        self.armed = False
        self.upserts = 0
        self.stalled = asyncio.Event()
        self.cancelled = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        if not self.armed:
            return await self._store.upsert(collection, records)
        self.upserts += 1
        if self.upserts == 2:
            self.stalled.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        raise ConnectionError(f"store down (upsert {self.upserts})")


def consumer_total(registry: CollectorRegistry, family: str) -> float:
    return sum(
        sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if metric.name == family and sample.name.endswith("_total")
    )


async def test_a_handler_cancelled_mid_retry_stops_at_once(tmp_path: Path) -> None:
    """Stopping a service cancels a handler whose store call is being retried: the call
    ends, nothing is retried after it, and the message is neither failed nor redelivered
    here (left unacknowledged, the broker hands it out again)."""
    queues = topics("conversation-memory", "cancel", "default", ("ended",))
    settings = ConversationMemoryProcessor.Settings.load(
        {
            "id": "conversation-memory-cancel",
            "flows": flows_file(
                tmp_path / "flows.yaml", "conversation-memory-cancel", {"default": queues}
            ),
            "data_dir": tmp_path / "store",
            "max_redeliveries": 1,
            "retry_delay": 0,
            "pii_policy": "allow",  # no detector to load: nothing here is screened
        }
    )
    bus, registry = InProcessTransport(), CollectorRegistry()
    store = Stalling(make_store(settings))  # type: ignore[arg-type]
    processor = ConversationMemoryProcessor(
        settings,
        bus,
        registry=registry,
        store=store,
        embedder=HashingEmbedder(),  # type: ignore[arg-type]
    )
    # Stopping cancels running handlers at once instead of waiting for them.
    processor.settlement = dataclasses.replace(processor.settlement, drain_timeout=0.0)
    await processor.start()
    stopped = False
    try:
        store.armed = True
        request = ConversationRequest(
            operation="append", conversation_id="c1", query="q", answer="a"
        )
        producer = await bus.producer(Queue.parse(queues["request"]))
        await producer.send(request.encode(), {"id": "r1"})
        await asyncio.wait_for(store.stalled.wait(), 10)  # inside the retry, attempt 2
        await processor.stop()
        stopped = True
    finally:
        if not stopped:
            await processor.stop()
    assert store.cancelled
    assert store.upserts == 2  # never retried after the cancel
    assert consumer_total(registry, "tg_consumer_redelivery") == 0
    assert consumer_total(registry, "tg_consumer_processing") == 0
