"""Batch reflection (seed 002's ``batch_reflect``): lessons no single trajectory shows, read
across at least five of them.

Trajectories (episode memory's records of them) are grouped by task type; within a group,
each tool's record decides: one that succeeded in most of its attempts becomes a strategy
to follow, one that failed in most of them a pitfall. The lessons are built from labels
only (task types, tool names) and counts, never from what the user or a tool said, so they
may go into a shared playbook. Deterministic, no LLM: an on-demand pass an operator runs
(``react-mem trajectories reflect``) and curates into a playbook delta whose id derives
from the trajectories read, so running it twice over the same ones applies it once.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from react_mem.learner.curator import add_operation
from react_mem.learner.reflection import SECTIONS, Lesson, LessonType
from react_mem.schema.episodes import Episode
from react_mem.schema.playbook import Delta
from react_mem.schema.trajectory import PARSE_ERROR_ACTION

#: Seed 002: fewer trajectories than this show no pattern.
MIN_TRAJECTORIES = 5
#: A tool needs this many attempts in a group before its record says anything.
MIN_ATTEMPTS = 3
#: A record at or above this success rate is a strategy; at or below 1 - it, a pitfall.
DECISIVE = 0.8
_LABEL = re.compile(r"[^\w .:/-]+")


@dataclass(frozen=True)
class Pattern:
    """One tool's record in one task type across the trajectories read."""

    task_type: str
    tool: str
    attempts: int
    successes: int

    @property
    def rate(self) -> float:
        return self.successes / self.attempts if self.attempts else 0.0


class TooFew(ValueError):
    """Fewer trajectories than a batch reflection needs."""


def patterns(episodes: Sequence[Episode], *, min_attempts: int = MIN_ATTEMPTS) -> list[Pattern]:
    """Each (task type, tool) with at least ``min_attempts`` trajectories using the tool."""
    attempts: Counter[tuple[str, str]] = Counter()
    successes: Counter[tuple[str, str]] = Counter()
    for e in episodes:
        tools = {s.action for s in e.steps if s.action and s.action != PARSE_ERROR_ACTION}
        for tool in tools:
            key = (label(e.task_type) or "", label(tool))
            attempts[key] += 1
            successes[key] += e.outcome == "success"
    return [
        Pattern(task, tool, n, successes[(task, tool)])
        for (task, tool), n in sorted(attempts.items())
        if n >= min_attempts and tool
    ]


def batch_lessons(
    episodes: Sequence[Episode],
    *,
    min_trajectories: int = MIN_TRAJECTORIES,
    min_attempts: int = MIN_ATTEMPTS,
    limit: int = 10,
) -> list[Lesson]:
    """The cross-trajectory lessons, best evidenced first; :class:`TooFew` below
    ``min_trajectories``."""
    if len(episodes) < max(min_trajectories, 1):
        raise TooFew(
            f"batch reflection needs at least {min_trajectories} trajectories, "
            f"found {len(episodes)}"
        )
    found: list[tuple[int, Lesson]] = []
    for p in patterns(episodes, min_attempts=min_attempts):
        kind = f"{p.task_type} tasks" if p.task_type else "tasks"
        if p.rate >= DECISIVE:
            text = f"For {kind}, use {p.tool}: it succeeded in {p.successes} of {p.attempts} tries."
            found.append((p.attempts, _lesson(text, "success", p)))
        elif p.rate <= 1 - DECISIVE:
            failed = p.attempts - p.successes
            text = f"For {kind}, avoid {p.tool}: it failed in {failed} of {p.attempts} tries."
            found.append((p.attempts, _lesson(text, "failure", p)))
    found.sort(key=lambda x: -x[0])
    return [lesson for _, lesson in found[:limit]]


def batch_delta(
    lessons: Sequence[Lesson], episodes: Sequence[Episode], *, user: str | None
) -> Delta:
    """The lessons as ADD operations; the delta id derives from the trajectories read."""
    ids = "\n".join(sorted(e.id for e in episodes))
    digest = hashlib.sha256(ids.encode()).hexdigest()[:24]
    source = "batch-reflection"
    return Delta(
        delta_id=f"batch:{digest}",
        operations=[add_operation(x, user=user, source=source) for x in lessons],
        source=source,
        reason=f"batch reflection over {len(episodes)} trajectories",
    )


def label(text: str) -> str:
    """A task type or tool name as a lesson may carry it: one short line of plain marks."""
    return " ".join(_LABEL.sub(" ", text).split())[:60]


def _lesson(text: str, kind: LessonType, p: Pattern) -> Lesson:
    tags = [kind, "batch", *([p.task_type] if p.task_type else [])]
    return Lesson(content=text, type=kind, tags=tags, section=SECTIONS[kind])
