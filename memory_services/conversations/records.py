"""Conversations as store records: a header per conversation, one record per turn.

The header (``kind: header``) holds the rolling summary, turn count, last activity and the
end state; it has a fixed placeholder vector and is never searched. Each turn
(``kind: turn``) is embedded by its query and answer, so past turns can be searched.
Ids are derived from workspace + collection + user + conversation (+ the turn's key), so a
redelivered write lands on the record it already wrote.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_services import when
from memory_services.store.base import Condition, Scope
from react_mem.errors import BadRequest
from react_mem.schema.agent import MemoryRef
from react_mem.schema.conversations import (
    Conversation,
    ConversationRequest,
    ConversationTurn,
    QuotaNotice,
)

_NAMESPACE = uuid.UUID("9b2e4c71-3d5a-5e8f-b6c0-1a7d9e2f4b63")
HEADER, TURN = "header", "turn"
IS_HEADER = Condition("kind", equals=HEADER)
IS_TURN = Condition("kind", equals=TURN)


@dataclass(frozen=True, kw_only=True)
class ConversationLimits:
    max_query_chars: int = 16_000
    max_answer_chars: int = 64_000
    max_summary_chars: int = 16_000
    max_turn_id_chars: int = 256
    max_turns: int = 10_000
    max_top_k: int = 50
    max_page: int = 200
    #: Quota notices pending on one conversation (the oldest give way) and notice ids
    #: remembered as given, so a redelivered notice is not told twice.
    max_notices: int = 16
    max_given_notices: int = 64


def _key(scope: Scope) -> str:
    assert scope.conversation, "a conversation scope"
    return "\x1f".join((scope.workspace, scope.collection, scope.user or "", scope.conversation))


def header_id(scope: Scope) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"header\x1f{_key(scope)}"))


def turn_record_id(scope: Scope, turn_key: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"turn\x1f{_key(scope)}\x1f{turn_key}"))


def event_id(scope: Scope, generation: int) -> str:
    """One id per end of one conversation (a reopened conversation ends anew)."""
    return str(uuid.uuid5(_NAMESPACE, f"ended\x1f{_key(scope)}\x1f{generation}"))


def placeholder_vector(dimension: int) -> list[float]:
    return [1.0] + [0.0] * (dimension - 1)


def validate_append(request: ConversationRequest, limits: ConversationLimits) -> None:
    query = request.query.strip()
    if not query:
        raise BadRequest("append: the turn needs a non-empty query")
    for name, text, most in (
        ("query", query, limits.max_query_chars),
        ("answer", request.answer, limits.max_answer_chars),
        ("summary", request.summary, limits.max_summary_chars),
    ):
        if len(text) > most:
            raise BadRequest(
                f"append: {name} of {len(text)} characters exceeds {most}", type="too-large"
            )
    if request.time is not None and not math.isfinite(request.time):
        raise BadRequest("append: time must be finite epoch seconds")


def validate_summary(summary: str, limits: ConversationLimits) -> str:
    text = summary.strip()
    if not text:
        raise BadRequest("update-summary: the summary is empty")
    if len(text) > limits.max_summary_chars:
        raise BadRequest(
            f"update-summary: summary of {len(text)} characters exceeds {limits.max_summary_chars}",
            type="too-large",
        )
    return text


def turn_key(request: ConversationRequest, correlation_id: str | None, limit: int) -> str:
    """The turn's identity: ``turn_id``, else ``session_id``, else the message's own id."""
    key = request.turn_id or request.session_id or correlation_id
    if not key:
        raise BadRequest("append: give turn_id or session_id to name the turn")
    if len(key) > limit:
        raise BadRequest(f"append: turn id longer than {limit} characters", type="too-large")
    return key


def turn_payload(
    scope: Scope, request: ConversationRequest, *, key: str, sequence: int, now: float
) -> dict[str, Any]:
    return scope.payload() | {
        "kind": TURN,
        "turn_id": key,
        "sequence": sequence,
        "query": request.query.strip(),
        "answer": request.answer,
        "summary": request.summary,
        "result": request.result,
        "time": request.time if request.time is not None else now,
        "session_id": request.session_id or None,
        # Ids, scores and token counts only: a deleted fact leaves no copy here.
        "memory_used": [
            r.model_dump(mode="json", exclude={"content"}) for r in request.memory_used
        ],
        # Says when ("last week", "on Friday"): boosted for a search that asks when.
        "tells_time": when.tells_time(f"{request.query}\n{request.answer}"),
    }


def turn_text(payload: Mapping[str, Any]) -> str:
    return f"{payload['query']}\n{payload['answer']}".strip()


def new_header(scope: Scope, *, now: float, flow: str) -> dict[str, Any]:
    return scope.payload() | {
        "kind": HEADER,
        "summary": "",
        "turn_count": 0,
        "created_at": now,
        "last_activity": now,
        "ended": False,
        "ended_at": None,
        "end_reason": None,
        "published": False,
        "generation": 0,
        "flow": flow,
    }


def header_scope(payload: Mapping[str, Any]) -> Scope:
    """The conversation (of its owner) a stored header belongs to."""
    return Scope.of_payload(payload)


def to_turn(payload: Mapping[str, Any], similarity: float | None = None) -> ConversationTurn:
    return ConversationTurn(
        turn_id=payload.get("turn_id", ""),
        sequence=int(payload.get("sequence", 0)),
        query=payload.get("query", ""),
        answer=payload.get("answer", ""),
        summary=payload.get("summary", ""),
        result=payload.get("result"),
        time=float(payload.get("time", 0.0)),
        session_id=payload.get("session_id"),
        conversation_id=payload.get("scope_conversation", ""),
        memory_used=[MemoryRef.model_validate(r) for r in payload.get("memory_used") or []],
        notices=[QuotaNotice.model_validate(n) for n in payload.get("notices") or []],
        similarity=similarity,
    )


def to_conversation(
    header: Mapping[str, Any], turns: list[ConversationTurn] | None = None
) -> Conversation:
    return Conversation(
        conversation_id=header.get("scope_conversation", ""),
        collection=header.get("scope_collection", ""),
        user=header.get("scope_user"),
        summary=header.get("summary", ""),
        turns=turns or [],
        turn_count=int(header.get("turn_count", 0)),
        created_at=float(header.get("created_at", 0.0)),
        last_activity=float(header.get("last_activity", 0.0)),
        ended=bool(header.get("ended", False)),
        ended_at=header.get("ended_at"),
        end_reason=header.get("end_reason"),
        notices_pending=len(header.get("notices") or []),
    )


def with_notice(
    header: Mapping[str, Any], notice: QuotaNotice, limits: ConversationLimits
) -> dict[str, Any] | None:
    """``header`` with ``notice`` pending; None when it is pending or was given already."""
    pending: list[dict[str, Any]] = list(header.get("notices") or [])
    known = {n["notice_id"] for n in pending} | set(header.get("given_notices") or [])
    if notice.notice_id in known:
        return None
    pending = [*pending, notice.model_dump(mode="json")][-limits.max_notices :]
    return dict(header) | {"notices": pending}


def notices_taken(
    header: Mapping[str, Any], given: list[dict[str, Any]], limits: ConversationLimits
) -> dict[str, Any]:
    """``header`` without the pending notices ``given`` (now on a turn), remembering their
    ids as given."""
    ids = [n["notice_id"] for n in given]
    pending = [n for n in header.get("notices") or [] if n["notice_id"] not in ids]
    remembered = [*(header.get("given_notices") or []), *ids][-limits.max_given_notices :]
    return dict(header) | {"notices": pending, "given_notices": remembered}
