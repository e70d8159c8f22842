"""Episodes as store records: validation, deterministic ids, payloads and the embedded text."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_services.store.base import Scope
from react_mem.errors import BadRequest
from react_mem.schema import AgentStep
from react_mem.schema.episodes import Episode, EpisodeRequest

_NAMESPACE = uuid.UUID("0d5f6a3e-8c41-5f0b-a2d7-6b9e1c4f8e21")


@dataclass(frozen=True, kw_only=True)
class EpisodeLimits:
    """What one request may carry; beyond it the request is refused, nothing written."""

    max_goal_chars: int = 4000
    max_context_chars: int = 8000
    max_steps: int = 200
    max_lessons: int = 50
    max_lesson_chars: int = 2000
    #: The whole stored episode (goal, steps, lessons) as JSON.
    max_episode_bytes: int = 512 * 1024
    max_top_k: int = 50
    max_page: int = 200
    max_ids: int = 200


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalise_text(text: str) -> str:
    return " ".join(text.split()).casefold()


def _scope_key(scope: Scope) -> list[str]:
    return [scope.workspace, scope.collection, scope.user or "", scope.conversation or ""]


def episode_id(scope: Scope, request: EpisodeRequest) -> str:
    """The session's episode in this scope, or else the scope's episode with this goal and
    these steps: a redelivered store maps to the record it already wrote."""
    if request.session_id:
        parts = ["session", *_scope_key(scope), request.session_id]
    else:
        steps = hashlib.sha256(_canonical(_steps(request.steps)).encode()).hexdigest()
        parts = ["content", *_scope_key(scope), normalise_text(request.goal), steps]
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def _steps(steps: list[AgentStep]) -> list[dict[str, Any]]:
    return [step.model_dump(mode="json") for step in steps]


def validate_store(request: EpisodeRequest, limits: EpisodeLimits) -> None:
    goal = request.goal.strip()
    if not goal:
        raise BadRequest("store: the episode needs a non-empty goal")
    if len(goal) > limits.max_goal_chars:
        raise BadRequest(
            f"store: goal of {len(goal)} characters exceeds {limits.max_goal_chars}",
            type="too-large",
        )
    if request.outcome is None:
        raise BadRequest("store: outcome is required (success, failure or partial)")
    if len(request.steps) > limits.max_steps:
        raise BadRequest(
            f"store: {len(request.steps)} steps exceed {limits.max_steps}", type="too-large"
        )
    if len(request.lessons) > limits.max_lessons:
        raise BadRequest(
            f"store: {len(request.lessons)} lessons exceed {limits.max_lessons}", type="too-large"
        )
    if any(len(lesson) > limits.max_lesson_chars for lesson in request.lessons):
        raise BadRequest(
            f"store: a lesson exceeds {limits.max_lesson_chars} characters", type="too-large"
        )


def check_sizes(request: EpisodeRequest, limits: EpisodeLimits) -> None:
    """Refuse a ``store`` over the limits, the episode as sent: the service runs it before
    the PII screen, which would read every text of an oversized episode first (100,000
    lessons: tens of seconds). The stored, screened episode is checked again."""
    validate_store(request, limits)
    _encoded(_content(request), limits)


def _content(request: EpisodeRequest) -> dict[str, Any]:
    return {
        "goal": request.goal.strip(),
        "steps": _steps(request.steps),
        "outcome": request.outcome,
        "score": request.score,
        "lessons": [lesson.strip() for lesson in request.lessons if lesson.strip()],
        "tokens": request.tokens,
        "duration_seconds": request.duration_seconds,
        "session_id": request.session_id or None,
        "task_type": request.task_type or "",
        "parent_session_id": request.parent_session_id or "",
        "bullets_shown": list(dict.fromkeys(request.bullets_shown)),
        "bullets_used": list(dict.fromkeys(request.bullets_used)),
    }


def _encoded(content: dict[str, Any], limits: EpisodeLimits) -> bytes:
    encoded = _canonical(content).encode()
    if len(encoded) > limits.max_episode_bytes:
        raise BadRequest(
            f"store: episode of {len(encoded)} bytes exceeds {limits.max_episode_bytes}",
            type="too-large",
        )
    return encoded


def episode_payload(
    scope: Scope, request: EpisodeRequest, *, created_at: float, limits: EpisodeLimits
) -> dict[str, Any]:
    """The stored payload (scope keys included); refuses an oversized episode."""
    content = _content(request)
    encoded = _encoded(content, limits)
    content_hash = hashlib.sha256(encoded).hexdigest()
    return scope.payload() | content | {"created_at": created_at, "content_hash": content_hash}


#: The payload keys that hold the episode itself (its content hash and size cover them).
CONTENT_KEYS = (
    "goal",
    "steps",
    "outcome",
    "score",
    "lessons",
    "tokens",
    "duration_seconds",
    "session_id",
    "task_type",
    "parent_session_id",
    "bullets_shown",
    "bullets_used",
)


def canonical_size(payload: Mapping[str, Any]) -> int:
    """Bytes of the episode's canonical JSON."""
    return len(_canonical({k: payload.get(k) for k in CONTENT_KEYS}).encode())


def embedded_text(payload: Mapping[str, Any]) -> str:
    """What an episode is found by: its goal, then its lessons (MiniLM reads ~256 tokens,
    so the goal comes first and is never cut)."""
    lessons = " ".join(payload.get("lessons") or [])
    return f"{payload['goal']}\n{lessons}".strip()


def query_text(request: EpisodeRequest, limits: EpisodeLimits) -> str:
    """The retrieval text, "goal + context"; refuses an empty or oversized one."""
    goal, context = request.goal.strip(), request.context.strip()
    if len(goal) > limits.max_goal_chars or len(context) > limits.max_context_chars:
        raise BadRequest(
            f"retrieve: goal/context exceed {limits.max_goal_chars}/"
            f"{limits.max_context_chars} characters",
            type="too-large",
        )
    text = f"{goal}\n{context}".strip()
    if not text:
        raise BadRequest("retrieve: give a goal or a context (or a vector) to search by")
    return text


def to_episode(record_id: str, payload: Mapping[str, Any], similarity: float | None) -> Episode:
    return Episode.model_validate(
        {
            **{k: payload.get(k) for k in Episode.model_fields if k in payload},
            "id": record_id,
            "user": payload.get("scope_user"),
            "conversation_id": payload.get("scope_conversation"),
            "collection": payload.get("scope_collection", ""),
            "similarity": similarity,
            "consolidation_id": payload.get("consolidation_id")
            or (payload.get("consolidations") or [None])[-1],
        }
    )
