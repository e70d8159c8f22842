"""Every memory service's operations are a closed type (a ``Literal`` in its schema module):
an unknown or missing operation is refused when a request is decoded (``bad-operation``,
naming the valid ones), so it never reaches a dispatch; each dispatch is an exhaustive
``match`` (mypy checks it) and every declared operation reaches a branch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.errors import BadRequest
from react_mem.schema.base import WireModel
from react_mem.schema.conversations import OPERATIONS as CONVERSATION_OPERATIONS
from react_mem.schema.conversations import ConversationRequest
from react_mem.schema.episodes import OPERATIONS as EPISODE_OPERATIONS
from react_mem.schema.episodes import EpisodeRequest
from react_mem.schema.facts import FACT_OPERATIONS, FactRequest
from react_mem.schema.playbook import OPERATIONS as PLAYBOOK_OPERATIONS
from react_mem.schema.playbook import PlaybookRequest
from react_mem.schema.working import OPERATIONS as WORKING_OPERATIONS
from react_mem.schema.working import WorkingMemoryRequest
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService, fact_service

KINDS: list[tuple[type[WireModel], tuple[str, ...]]] = [
    (FactRequest, FACT_OPERATIONS),
    (EpisodeRequest, EPISODE_OPERATIONS),
    (ConversationRequest, CONVERSATION_OPERATIONS),
    (PlaybookRequest, PLAYBOOK_OPERATIONS),
    (WorkingMemoryRequest, WORKING_OPERATIONS),
]
IDS = [schema.__name__ for schema, _ in KINDS]


def refusal(schema: type[WireModel], body: object) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        schema.decode(json.dumps(body).encode())
    return caught.value


@pytest.mark.parametrize(("schema", "operations"), KINDS, ids=IDS)
def test_an_unknown_operation_is_refused_when_decoded_naming_the_valid_ones(
    schema: type[WireModel], operations: tuple[str, ...]
) -> None:
    for operation in ("archive", "PURGE", "", 7, ["purge"]):
        error = refusal(schema, {"operation": operation, "collection": "c"})
        assert error.type == "bad-operation", operation
        assert "unknown operation" in str(error)
        assert all(repr(op) in str(error) for op in operations)


@pytest.mark.parametrize(("schema", "operations"), KINDS, ids=IDS)
def test_a_missing_operation_is_refused_and_every_declared_one_decodes(
    schema: type[WireModel], operations: tuple[str, ...]
) -> None:
    for body in ({}, {"operation": None}, {"collection": "c"}):
        error = refusal(schema, body)
        assert (error.type, str(error)) == (
            "bad-operation",
            f"{schema.__name__}: operation is required",
        )
    for operation in operations:
        decoded = schema.decode(json.dumps({"operation": operation}).encode())
        assert decoded.to_wire()["operation"] == operation


def test_a_bad_operation_beside_another_bad_field_is_invalid_and_both_are_named() -> None:
    error = refusal(FactRequest, {"operation": "archive", "top_k": 0})
    assert error.type == "invalid"
    assert "unknown operation 'archive'" in str(error) and "top_k" in str(error)


def test_a_long_unknown_operation_is_not_repeated_whole() -> None:
    error = refusal(FactRequest, {"operation": "x" * 100_000})
    assert error.type == "bad-operation" and len(str(error)) < 400


@pytest.mark.broker
async def test_every_declared_fact_operation_reaches_its_branch(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """None falls out of the dispatch (``assert_never`` would fail the request): each is
    answered, with its own result or its own refusal of the empty request."""
    async with fact_service(
        transport, registry, tmp_path, unique, client=FactService, embedder=HashingEmbedder()
    ) as facts:
        for operation in FACT_OPERATIONS:
            reply = await facts.ask(operation, user="u")
            kind = reply.error.type if reply.error else None
            assert kind not in ("bad-operation", "processing-failed"), (operation, reply.error)
