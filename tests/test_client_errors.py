"""The clients' error model: every ``Error.type`` a service answers with becomes one exception
of the project's hierarchy, and so does everything the bus, the clock and the reply's
decoding can raise at a client's boundary (as HTTPX tests its transport's mapping)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pulsar
import pulsar.asyncio
import pytest
from pydantic import ValidationError

from react_mem.bus.in_process import InProcessTransport
from react_mem.bus.pulsar import PulsarProducer
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.errors import EXCEPTIONS, exception_for
from react_mem.clients.facts import FactClient
from react_mem.clients.llm import TextCompletionClient
from react_mem.errors import (
    BadReply,
    BadRequest,
    BusError,
    Forbidden,
    LLMError,
    LLMUnavailable,
    NotFound,
    QuotaExceeded,
    ReactMemError,
    RequestTimeout,
    ServiceDiskFull,
    ServiceError,
    ServiceFailed,
    ServiceRefused,
    ServiceTimeout,
    ServiceUnavailable,
    TransientError,
)
from react_mem.schema import Error, TextCompletionRequest, TextCompletionResponse
from react_mem.schema.errors import ERROR_TYPES
from react_mem.schema.facts import FactRequest, FactResponse
from react_mem.schema.scope import Scope

SCOPE = Scope("default", "default", "alice")

#: What each error type raises; every other type is the service's final word.
SPECIAL: dict[str, type[ServiceError]] = {
    "not-found": NotFound,
    "forbidden": Forbidden,
    "quota-exceeded": QuotaExceeded,
    "processing-failed": ServiceFailed,
    "disk-full": ServiceDiskFull,
    "llm-error": LLMUnavailable,
}


def test_the_error_types_are_the_ones_the_services_raise() -> None:
    assert "too-large" in ERROR_TYPES and "processing-failed" in ERROR_TYPES
    assert set(EXCEPTIONS) == set(SPECIAL) and set(SPECIAL) <= ERROR_TYPES


@pytest.mark.parametrize("kind", sorted(ERROR_TYPES))
def test_every_error_type_maps_to_its_exception(kind: str) -> None:
    error = exception_for("fact-memory", Error(type=kind, message="why"))
    assert type(error) is SPECIAL.get(kind, ServiceRefused)
    assert isinstance(error, ReactMemError)
    assert (error.service, error.type) == ("fact-memory", kind)
    assert "fact-memory" in str(error) and "why" in str(error)
    # Worth a retry exactly when the service, not the request, failed.
    assert isinstance(error, TransientError) == (kind in {"processing-failed", "disk-full", "llm-error"})
    # A refusal settles the caller's own message with an error reply of the same type.
    if isinstance(error, BadRequest):
        assert error.type == kind


def test_a_type_no_react_mem_service_sends_is_a_refusal() -> None:
    error = exception_for("fact-memory", Error(type="peer-specific", message="no"))
    assert type(error) is ServiceRefused and error.type == "peer-specific"


# -- error replies through a client ----------------------------------------------------------
class Replying:
    """A requester answering every request with ``reply`` (or raising it)."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.sent: list[Any] = []

    async def request(self, message: Any, *, timeout: float | None = None) -> Any:
        self.sent.append(message)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply

    async def stream(
        self, message: Any, *, last: Callable[[Any], bool], timeout: float | None = None
    ) -> AsyncIterator[Any]:
        yield await self.request(message, timeout=timeout)


@pytest.mark.parametrize("kind", sorted(ERROR_TYPES))
async def test_a_clients_error_reply_raises_the_mapped_exception(kind: str) -> None:
    client = FactClient(Replying(FactResponse(error=Error(type=kind, message="m"))))
    with pytest.raises(SPECIAL.get(kind, ServiceRefused)) as raised:
        await client.retrieve(SCOPE, "q")
    assert raised.value.service == "fact-memory"


@pytest.mark.parametrize("kind", sorted(ERROR_TYPES))
async def test_every_text_completion_failure_is_an_llm_error(kind: str) -> None:
    client = TextCompletionClient(
        Replying(TextCompletionResponse(error=Error(type=kind, message="m")))
    )
    with pytest.raises(LLMError) as raised:
        await client.complete(TextCompletionRequest(prompt="p"))
    assert isinstance(raised.value, LLMUnavailable) == (kind == "llm-error")


async def test_bad_arguments_are_refused_before_anything_is_sent() -> None:
    requester = Replying(FactResponse())
    with pytest.raises(BadRequest, match="top_k") as raised:
        await FactClient(requester).retrieve(SCOPE, "q", top_k=0)
    assert raised.value.type == "invalid" and requester.sent == []


# -- what the boundary maps --------------------------------------------------------------------
def _validation_error() -> ValidationError:
    try:
        FactResponse.model_validate({"facts": "not a list"})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


#: (what the bus or the decoding raised, what a memory client raises, what the LLM client raises)
THIRD_PARTY: list[tuple[BaseException, type[ReactMemError], type[ReactMemError]]] = [
    (RequestTimeout("no response"), ServiceTimeout, LLMUnavailable),
    (TimeoutError(), ServiceTimeout, LLMUnavailable),
    (BusError("broker gone"), ServiceUnavailable, LLMUnavailable),
    (ConnectionResetError("reset"), ServiceUnavailable, LLMUnavailable),
    (OSError("network unreachable"), ServiceUnavailable, LLMUnavailable),
    (BadRequest("reply is not JSON", type="malformed"), BadReply, LLMError),
    (_validation_error(), BadReply, LLMError),
    (json.JSONDecodeError("bad", "{", 0), BadReply, LLMError),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), BadReply, LLMError),
]


@pytest.mark.parametrize(
    ("raised", "memory", "llm"), THIRD_PARTY, ids=[type(t[0]).__name__ for t in THIRD_PARTY]
)
async def test_every_failure_at_the_boundary_becomes_a_project_exception(
    raised: BaseException, memory: type[ReactMemError], llm: type[ReactMemError]
) -> None:
    with pytest.raises(memory) as caught:
        await FactClient(Replying(raised)).purge(SCOPE)
    assert type(caught.value) is memory and caught.value.__cause__ is raised
    with pytest.raises(llm) as caught_llm:
        await TextCompletionClient(Replying(raised)).complete(TextCompletionRequest(prompt="p"))
    assert type(caught_llm.value) is llm and caught_llm.value.__cause__ is raised


class _FailingPulsarProducer:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        raise self.error


class _OverPulsar:
    """A requester whose send goes through the Pulsar transport's producer."""

    def __init__(self, error: Exception) -> None:
        self.producer = PulsarProducer(_FailingPulsarProducer(error), "t", set())

    async def request(self, message: Any, *, timeout: float | None = None) -> Any:
        await self.producer.send(message.encode(), {"id": "1"})
        raise AssertionError("unreachable")

    def stream(self, message: Any, **_: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@pytest.mark.parametrize(
    "error",
    [
        pulsar.Timeout("send timed out"),
        pulsar.ConnectError("connection refused"),
        pulsar.asyncio.PulsarException(pulsar.Result.AlreadyClosed),
    ],
    ids=["Timeout", "ConnectError", "asyncio.PulsarException"],
)
async def test_pulsar_errors_reach_a_caller_as_service_unavailable(error: Exception) -> None:
    with pytest.raises(ServiceUnavailable) as caught:
        await FactClient(_OverPulsar(error)).purge(SCOPE)
    assert isinstance(caught.value.__cause__, BusError)
    with pytest.raises(LLMUnavailable):
        await TextCompletionClient(_OverPulsar(error)).complete(TextCompletionRequest(prompt="p"))


# -- over a bus, end to end ----------------------------------------------------------------------
REQUEST = "request:tg:fact-memory:default:default"
RESPONSE = "response:tg:fact-memory:default:default"


@contextlib.asynccontextmanager
async def fact_client(
    transport: InProcessTransport, answer: Callable[[bytes], bytes] | None
) -> AsyncIterator[FactClient]:
    """A fact client over ``transport``; ``answer`` (if any) replies to every request."""
    rpc: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        transport, REQUEST, RESPONSE, FactResponse, timeout=0.2
    )
    await rpc.start()
    server = None
    if answer is not None:
        consumer = await transport.consumer(Queue.parse(REQUEST), "server")
        producer = await transport.producer(Queue.parse(RESPONSE))

        async def serve() -> None:
            while True:
                delivery = await consumer.receive()
                await producer.send(answer(delivery.data), delivery.properties)
                await consumer.ack(delivery)

        server = asyncio.create_task(serve())
    try:
        yield FactClient(rpc)
    finally:
        if server is not None:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server
        await rpc.close()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, ServiceTimeout),
        (lambda _: b"\xff not json", BadReply),
        (lambda _: json.dumps({"facts": "not a list"}).encode(), BadReply),
        (lambda _: FactResponse(error=Error(type="not-found", message="x")).encode(), NotFound),
        (lambda _: FactResponse(error=Error(type="processing-failed")).encode(), ServiceFailed),
    ],
    ids=["silence", "not-json", "not-the-schema", "not-found", "processing-failed"],
)
async def test_over_the_bus_a_failure_is_one_project_exception(
    answer: Callable[[bytes], bytes] | None, expected: type[ReactMemError]
) -> None:
    transport = InProcessTransport()
    async with fact_client(transport, answer) as client:
        with pytest.raises(expected):
            await client.delete(SCOPE, ["4c1e7a8e-0000-4000-8000-000000000000"])


async def test_over_a_closed_bus_the_service_is_unavailable() -> None:
    transport = InProcessTransport()
    async with fact_client(transport, None) as client:
        await transport.close()
        with pytest.raises(ServiceUnavailable):
            await client.purge(SCOPE)


async def test_over_the_bus_a_reply_comes_back_typed() -> None:
    def answer(data: bytes) -> bytes:
        request = FactRequest.decode(data)
        assert (request.operation, request.user, request.ids) == ("delete", "alice", ["a", "b"])
        return FactResponse(deleted=2).encode()

    async with fact_client(InProcessTransport(), answer) as client:
        assert await client.delete(SCOPE, ["a", "b"]) == 2
