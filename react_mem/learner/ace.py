"""The learner's ACE step (seeds 001 and 003): reflect on a trajectory, or on feedback about
one, and curate the reflection into a playbook delta.

The delta is part of the record's plan: computed once (LLM included), saved in the ledger
before it is sent, and sent with a delta id derived from the record (the trajectory id, or
the feedback id), so the playbook service applies it once however often it arrives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from react_mem.learner import records
from react_mem.learner.curator import Mode, curate
from react_mem.learner.extract import clip
from react_mem.learner.heuristic import bullets_credited, bullets_used
from react_mem.learner.llm import JsonLLM
from react_mem.learner.reflection import Reflection
from react_mem.learner.reflector import reflect
from react_mem.schema.playbook import Delta, Feedback
from react_mem.schema.trajectory import Trajectory


@dataclass(frozen=True, kw_only=True)
class AceConfig:
    reflector: Mode = "heuristic"
    curator: Mode = "heuristic"
    #: Earlier reflections of the same window given to the LLM reflector (seed 003: 3).
    window: int = 3
    #: Lessons kept per trajectory or feedback.
    max_lessons: int = 3
    max_chars: int = 400
    prompt_chars: int = 8000
    #: A lesson this similar to a bullet in the prompt reinforces it (seed 000: 0.9).
    similarity: float = 0.9


class AcePlan(BaseModel):
    """Where the delta goes (the playbook scope) and what it is, with its reasoning."""

    collection: str = "default"
    context_scope_id: str = ""
    user: str | None = None
    reflection: Reflection
    curated_by: str = "heuristic"
    delta: Delta


def window_key(t: Trajectory) -> str:
    """Reflections share a window within one scope, user and conversation."""
    return json.dumps([t.collection, t.context_scope_id, t.user or "", t.conversation_id])


def feedback_key(feedback: Feedback) -> str:
    """The record key and delta id of one feedback message: its id, or (without one) its
    session and content, so a re-sent message is the same feedback."""
    if feedback.feedback_id:
        return f"feedback:{feedback.feedback_id}"
    body = feedback.model_dump(mode="json", exclude={"feedback_id"})
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
    return f"feedback:{feedback.session_id}:{digest}"


def worth_reflecting(t: Trajectory, min_steps: int) -> bool:
    """Bullets to judge, a task done, or a known right answer: not every chat line."""
    return bool(bullets_used(t)) or records.is_task(t, min_steps) or bool(t.ground_truth)


async def plan_ace(
    llm: JsonLLM | None,
    t: Trajectory,
    config: AceConfig,
    *,
    delta_id: str,
    source: str,
    feedback: Feedback | None = None,
    window: Sequence[str] = (),
) -> AcePlan:
    reflection = await reflect(
        llm if config.reflector == "llm" else None,
        t,
        feedback,
        window=window,
        limit=config.max_lessons,
        max_chars=config.max_chars,
        prompt_chars=config.prompt_chars,
    )
    operations, curated_by = await curate(
        llm if config.curator == "llm" else None,
        reflection,
        bullets_credited(t),  # the bullets shown but not relied on only age
        user=t.user,
        source=source,
        threshold=config.similarity,
        max_chars=config.max_chars,
    )
    reason = reflection.key_insight or f"{reflection.verdict} {source}"
    return AcePlan(
        collection=t.collection,
        context_scope_id=t.context_scope_id,
        user=t.user,
        reflection=reflection,
        curated_by=curated_by,
        delta=Delta(
            delta_id=delta_id,
            operations=operations,
            source=source,
            reason=clip(reason, 300),
            # New lessons are filed under the task's type (seed 001's topic), so the
            # playbook's topic boost finds them for the next task of that type.
            topic=clip(t.task_type, 64) or None,
        ),
    )
