"""What to write for one record, computed once (LLM included) and saved before writing."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from react_mem.learner import records
from react_mem.learner.ace import AceConfig, AcePlan, plan_ace, worth_reflecting
from react_mem.learner.explicit import explicit_facts
from react_mem.learner.extract import (
    FactCandidate,
    clip,
    extract_facts,
    extract_lessons,
    fact_key,
    merge_summary,
)
from react_mem.learner.grounding import tool_results
from react_mem.learner.heuristic import bullets_credited, matches
from react_mem.learner.llm import JsonLLM
from react_mem.schema.conversations import ConversationEnded
from react_mem.schema.episodes import MAX_BULLETS, MAX_LABEL_CHARS, EpisodeRequest
from react_mem.schema.facts import FactInput
from react_mem.schema.playbook import Feedback
from react_mem.schema.trajectory import Trajectory

#: The user's words kept beside a learned fact for lexical search (the schema allows 4000).
CONTEXT_CHARS = 1000


class Plan(BaseModel):
    """The writes for one record. Steps: ``summary``, ``facts``, ``episode``, ``playbook``."""

    #: The new rolling summary, written only while the stored one is still ``previous``.
    summary: str | None = None
    previous_summary: str = ""
    facts: list[FactInput] = Field(default_factory=list)
    episode: EpisodeRequest | None = None
    #: The reflection and the playbook delta (ACE), when the flow learns a playbook.
    ace: AcePlan | None = None
    #: What the LLM made that was not said, dropped: counts by kind (``fact``, ``summary``).
    ungrounded: dict[str, int] = Field(default_factory=dict)

    def empty(self) -> bool:
        """Nothing to write."""
        delta = self.ace is not None and bool(self.ace.delta.operations)
        return self.summary is None and not self.facts and self.episode is None and not delta


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_facts: int = 5
    max_fact_chars: int = 400
    summary_chars: int = 2000
    prompt_chars: int = 8000
    min_episode_steps: int = 2
    max_episode_steps: int = 40
    step_chars: int = 1000
    max_lessons: int = 3
    llm_lessons: bool = True
    min_conversation_turns: int = 3
    #: Facts the user explicitly asked to be remembered (see :mod:`.explicit`).
    explicit_importance: float = 0.8


class Planner:
    """``llm=None`` plans without the LLM: deterministic summary, heuristic lessons, and only
    the facts the user explicitly asked to be remembered. Those are in every plan, LLM or
    not, so an LLM that is down, slow or talking nonsense never loses them."""

    def __init__(self, llm: JsonLLM | None, limits: Limits) -> None:
        self._llm, self._limits = llm, limits
        self._dropped: Counter[str] = Counter()

    async def for_trajectory(
        self,
        t: Trajectory,
        previous_summary: str | None,
        *,
        ace: AceConfig | None = None,
        key: str = "",
        window: Sequence[str] = (),
    ) -> Plan:
        """``previous_summary`` None: no conversation to summarise into. With ``ace`` the
        trajectory is also reflected on (``window``: earlier reflections) into a playbook
        delta whose id is the record ``key``."""
        lim = self._limits
        plan = Plan()
        record = records.trajectory_record(t, max_chars=lim.prompt_chars)

        async def summary(previous: str) -> None:
            plan.previous_summary = previous
            plan.summary = await self._merge(previous, t)

        async def facts() -> None:
            said = [t.question, *tool_results(t.steps)]
            plan.facts = await self._facts(
                record, [t.question], t.conversation_id, "invocation", said, t.session_id
            )

        async def reflection(ace: AceConfig) -> None:
            source = f"trajectory:{t.trajectory_id or t.session_id}"
            plan.ace = await plan_ace(
                self._llm, t, ace, delta_id=key or source, source=source, window=window
            )

        # Independent questions, asked at once: the record waits for the slowest only.
        await _together(
            summary(previous_summary) if previous_summary is not None else None,
            facts() if t.extract_facts else None,
            reflection(ace)
            if ace is not None and worth_reflecting(t, lim.min_episode_steps)
            else None,
        )
        if t.record_episode and records.is_task(t, lim.min_episode_steps):
            plan.episode = await self._episode(t, record, plan.ace)
        plan.ungrounded = dict(self._dropped)
        return plan

    async def for_feedback(
        self, t: Trajectory, feedback: Feedback, ace: AceConfig, *, key: str, window: Sequence[str]
    ) -> Plan:
        """Feedback on trajectory ``t``: its reflection re-run with the feedback."""
        source = f"feedback:{feedback.session_id}"
        found = await plan_ace(
            self._llm, t, ace, delta_id=key, source=source, feedback=feedback, window=window
        )
        return Plan(ace=found)

    async def for_conversation(
        self, event: ConversationEnded, *, facts: bool, episode: bool
    ) -> Plan:
        lim = self._limits
        plan = Plan()
        if facts and (event.turns or event.summary):
            record = records.conversation_record(event, max_chars=lim.prompt_chars)
            queries = [t.query for t in event.turns]
            plan.facts = await self._facts(
                record, queries, event.conversation_id, "conversation-end"
            )
        if episode and len(event.turns) >= lim.min_conversation_turns:
            first = event.turns[0].query
            plan.episode = EpisodeRequest(
                operation="store",
                goal=clip(f"Conversation: {event.summary or first}", 1000),
                steps=records.turn_steps(
                    event.turns, limit=lim.max_episode_steps, chars=lim.step_chars
                ),
                outcome=records.conversation_outcome(event.turns),
                score=records.BASE_SCORE[records.conversation_outcome(event.turns)],
                session_id=f"conversation-end:{event.event_id}",
            )
        plan.ungrounded = dict(self._dropped)
        return plan

    async def _merge(self, previous: str, t: Trajectory) -> str:
        turn = records.invocation_summary(t)
        limit = self._limits.summary_chars
        merged = None
        if self._llm is not None:
            merged = await merge_summary(
                self._llm, previous, turn, max_chars=limit, dropped=self._dropped
            )
        return merged or records.fallback_merge(previous, turn, limit)

    async def _episode(self, t: Trajectory, record: str, ace: AcePlan | None) -> EpisodeRequest:
        lim = self._limits
        lessons: list[str] = []
        if lim.llm_lessons and ace is not None and ace.reflection.by == "llm":
            # The LLM reflector's lessons: no second question for the same thing.
            lessons = [lesson.content for lesson in ace.reflection.lessons][: lim.max_lessons]
        elif lim.llm_lessons and self._llm is not None:
            lessons = await extract_lessons(
                self._llm, record, limit=lim.max_lessons, max_chars=lim.max_fact_chars
            )
        judged = judged_by_truth(t)
        return EpisodeRequest(
            operation="store",
            goal=clip(t.question.strip(), 4000),
            steps=records.episode_steps(t.steps, limit=lim.max_episode_steps, chars=lim.step_chars),
            outcome=judged.outcome,
            score=records.score(judged),
            lessons=lessons or records.heuristic_lessons(judged),
            tokens=max(0, t.in_tokens + t.out_tokens),
            duration_seconds=max(0.0, t.duration_seconds),
            session_id=t.session_id or t.trajectory_id,
            task_type=clip(t.task_type, MAX_LABEL_CHARS) or None,
            parent_session_id=clip(t.parent_session_id, MAX_LABEL_CHARS) or None,
            bullets_shown=t.bullets_shown()[:MAX_BULLETS],
            bullets_used=[b.id for b in bullets_credited(t)][:MAX_BULLETS],
        )

    async def _facts(
        self,
        record: str,
        questions: list[str],
        conversation: str,
        origin: str,
        said: list[str] | None = None,
        session: str = "",
    ) -> list[FactInput]:
        """The user's explicit requests first, then the LLM's facts that say something else
        and say only what was said (``said``: the user's words and tool results; by default
        ``questions``)."""
        lim = self._limits
        asked = [
            FactCandidate(content=c, importance=lim.explicit_importance)
            for c in explicit_facts(questions, max_chars=lim.max_fact_chars)
        ]
        found: list[FactCandidate] = []
        if self._llm is not None:
            found = await extract_facts(
                self._llm,
                record,
                questions=questions,
                limit=lim.max_facts,
                max_chars=lim.max_fact_chars,
                said=said,
                dropped=self._dropped,
            )
        seen = {fact_key(f.content) for f in asked}
        found = [f for f in found if fact_key(f.content) not in seen]
        # The user's own words beside each fact: indexed for lexical search (a question
        # worded like what was said finds it), screened for PII, never returned.
        context = clip(" ".join(q for q in questions if q), CONTEXT_CHARS)
        # The invocation's session is its conversation turn's id: the fact's source turn.
        where = {"learned-from": origin} | ({"session": session} if session else {})
        return [
            *self._inputs(asked, conversation, where, "explicit-request", context),
            *self._inputs(found, conversation, where, "llm", context),
        ]

    @staticmethod
    def _inputs(
        found: list[FactCandidate],
        conversation: str,
        where: dict[str, str],
        by: str,
        context: str,
    ) -> list[FactInput]:
        return [
            FactInput(
                content=f.content,
                importance=f.importance,
                source_conversation=conversation or None,
                metadata=where | {"extracted-by": by},
                context=context,
            )
            for f in found
        ]


def judged_by_truth(t: Trajectory) -> Trajectory:
    """``t`` as its ground truth judges it: an answer that misses a known right answer is a
    failure, whatever the agent thought (so its episode does not teach it as a success)."""
    truth = (t.ground_truth or "").strip()
    if not truth or matches(t.answer, truth) or t.outcome == "failure":
        return t
    return t.model_copy(
        update={"outcome": "failure", "error": "the answer differed from the expected one"}
    )


async def _together(*calls: Coroutine[Any, Any, None] | None) -> None:
    """Run ``calls`` concurrently; the first failure cancels the others and is raised as is."""
    tasks = [asyncio.ensure_future(call) for call in calls if call is not None]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
