"""Invocation end: the conversation turn and the trajectory record for the learner."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from react_mem.agent.config import AgentMemConfig
from react_mem.agent.notices import told
from react_mem.clients.conversations import ConversationClient
from react_mem.errors import BadRequest, ReactMemError, TransientError
from react_mem.processor.flow import Flow
from react_mem.schema import AgentRequest, AgentStep
from react_mem.schema.agent import MemoryState
from react_mem.schema.scope import Scope
from react_mem.schema.trajectory import PARSE_ERROR_ACTION, Outcome, Trajectory, success_score
from react_mem.text import clip, one_line

logger = logging.getLogger(__name__)


def tool_errors(steps: list[AgentStep]) -> int:
    return sum(1 for s in steps if s.step_type == "tool-error")


def short(text: str, limit: int = 300) -> str:
    return clip(one_line(text), limit)


def trajectory(
    request: AgentRequest,
    state: MemoryState,
    scope: Scope,
    cfg: AgentMemConfig,
    answer: str,
    outcome: Outcome,
    error: str | None,
) -> Trajectory:
    finished = time.time()
    return Trajectory(
        trajectory_id=request.session_id,
        collection=scope.collection,
        user=scope.user,
        conversation_id=scope.conversation or "",
        session_id=request.session_id,
        question=request.question,
        answer=answer,
        steps=state.steps,
        outcome=outcome,
        error=error,
        iterations=state.iteration,
        tool_errors=tool_errors(state.steps),
        parse_retries=state.parse_retries,
        compressions=state.compressions,
        in_tokens=state.in_tokens,
        out_tokens=state.out_tokens,
        duration_seconds=max(finished - state.started_at, 0.0),
        started_at=state.started_at,
        finished_at=finished,
        memory_used=state.used,
        context_scope_id=cfg.playbook_context_scope,
        task_type=request.task_type,
        parent_session_id=request.parent_session_id,
        score=success_score(outcome, tool_errors(state.steps), state.parse_retries),
        bullets_used=list(state.cited),
        extract_facts=cfg.enable_auto_fact_extraction,
        record_episode=cfg.enable_episode_recording,
    )


#: Attempts at a turn's append that no answer waits for, and the pause before the second.
BACKGROUND_ATTEMPTS, FIRST_PAUSE = 3, 0.5


async def append_turn(
    flow: Flow,
    request: AgentRequest,
    scope: Scope,
    state: MemoryState,
    answer: str,
    outcome: Outcome,
    timeout: float,
    *,
    take_notices: bool = False,
    sent: asyncio.Event | None = None,
    attempts: int = 1,
    lost: Callable[[], None] | None = None,
) -> str | None:
    """The turn, with a cheap deterministic summary; a failure is logged, never raised.
    Returns what the caller must be told: why a turn the service refused for good (the
    conversation at its cap) was not kept, or (``take_notices``: an answer still to be
    sent) the quota notices the turn took (what a quota did to the user's memory after an
    earlier answer), else None. ``sent`` is set while the request is on the bus (cleared
    while a failed one waits to be sent again); a transient failure is tried again, up to
    ``attempts`` in all (the same turn id: a turn stored already is not stored twice);
    ``lost`` is called when it is not stored for good (a refusal at the cap included)."""
    tools_used = sorted({s.action for s in state.steps if s.action} - {PARSE_ERROR_ACTION})
    did = f" using {', '.join(tools_used)}" if tools_used else ""
    said = answer if answer else "no answer"
    summary = f"User asked: {short(request.question)} Agent answered{did}: {short(said)}"
    client = ConversationClient.of(flow, timeout=timeout)
    for attempt in range(1, attempts + 1):
        try:
            turn, _ = await client.append(
                scope,
                query=request.question,
                answer=answer,
                summary=summary,
                turn_id=request.session_id,
                session_id=request.session_id,
                result=outcome,
                # What the prompt held, for the inspector's "context of an answer"; no contents.
                memory_used=[r.model_copy(update={"content": ""}) for r in state.used],
                take_notices=take_notices,
                sent=None if sent is None else sent.set,
            )
        except TransientError as exc:
            if attempt < attempts:
                if sent is not None:
                    sent.clear()  # a later read would no longer come after it
                logger.warning("conversation turn not stored yet, trying again: %s", exc)
                await asyncio.sleep(FIRST_PAUSE * 2 ** (attempt - 1))
                continue
            return _not_stored(exc, attempt, lost)
        except ReactMemError as exc:  # the client maps every failure to one
            return _not_stored(exc, attempt, lost)
        # A redelivered append returns the turn as stored, notices included: told again only
        # in the retried answer of the same turn.
        return told(turn.notices)
    return None  # pragma: no cover - every attempt returns or continues


def _not_stored(exc: ReactMemError, attempts: int, lost: Callable[[], None] | None) -> str | None:
    level = logging.ERROR if lost is not None else logging.WARNING
    logger.log(level, "conversation turn not stored (%d attempts): %s", attempts, exc)
    if lost is not None:
        lost()
    if getattr(exc, "type", None) == "quota-exceeded":
        return (
            "This conversation has reached its limit of turns: this exchange was not "
            "saved to it. Start a new conversation to keep the next ones."
        )
    return None


async def publish_trajectory(flow: Flow, record: Trajectory, *, answered: bool) -> None:
    """``record`` on the flow's persistent ``trajectory`` queue. Before an answer
    (``answered`` false) a failure is raised, so the iteration is retried and the answer held
    back; after a reply it is only logged."""
    try:
        await flow.send("trajectory", record, id=record.session_id)
    except Exception as exc:
        if not answered:
            if isinstance(exc, BadRequest):  # too large to publish: never retried
                raise
            raise TransientError(
                f"trajectory {record.session_id} not published, so the answer is held back: {exc}"
            ) from exc
        logger.error("trajectory %s not published: %r", record.session_id, exc)
