"""The ACE curator: a reflection becomes playbook delta operations (seed 003's ADD, UPDATE,
TAG and REMOVE).

Heuristic mode (the default: deterministic, no LLM) tags the bullets the reflection tagged,
updates or removes the ones it corrected, and adds each lesson as a bullet, unless the
lesson says what a bullet in the prompt already says (similarity at or above 0.9): that
bullet is counted helpful again instead of being cloned (seed 000's reinforce-over-clone;
the playbook service also merges near-duplicate ADDs into their canonical bullet).

LLM mode asks for the operations (JSON-constrained, retried) and keeps only sound ones on
bullets that were in the prompt. A lesson that none of them carries is curated as in
heuristic mode, and a reply that stays malformed yields the heuristic operations whole, so
no lesson is ever lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from react_mem.learner.extract import DATA_NOTE, STOP, as_object, clip, words, wrap_record
from react_mem.learner.llm import JsonLLM
from react_mem.learner.reflection import Correction, Lesson, Reflection
from react_mem.schema.agent import MemoryRef
from react_mem.schema.playbook import DeltaOperation, MemoryType

#: Seed 000: a lesson this similar to a bullet in the prompt reinforces it.
REINFORCE_SIMILARITY = 0.9
#: An LLM operation carries a lesson when this share of the shorter one's words is shared.
CARRIES = 0.5
MEMORY_TYPE: dict[str, MemoryType] = {
    "success": "procedural",
    "tool": "procedural",
    "failure": "episodic",
    "domain": "semantic",
}
_WORD = re.compile(r"\w+")

Mode = Literal["heuristic", "llm"]


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' word sets (seed 001's measure)."""
    x, y = words(a), words(b)
    return len(x & y) / len(x | y) if x and y else 0.0


def overlap(a: str, b: str) -> float:
    """Shared content words over the shorter text's: a rewording still overlaps."""
    x, y = _content_words(a), _content_words(b)
    return len(x & y) / min(len(x), len(y)) if x and y else 0.0


@dataclass
class _Delta:
    """Operations being assembled: counters per bullet, edits per bullet, additions."""

    used: dict[str, MemoryRef]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    reinforced: set[str] = field(default_factory=set)
    edits: dict[str, DeltaOperation] = field(default_factory=dict)
    adds: list[DeltaOperation] = field(default_factory=list)

    def tag(self, bullet: str, tag: str) -> None:
        counts = self.counts.setdefault(bullet, {"helpful": 0, "harmful": 0, "neutral": 0})
        counts[tag] += 1

    def reinforce(self, bullet: str) -> None:
        """At most once per bullet per delta, however many lessons repeat it."""
        if bullet not in self.reinforced:
            self.reinforced.add(bullet)
            self.tag(bullet, "helpful")

    def edit(self, op: DeltaOperation) -> None:
        """The first UPDATE or REMOVE of a bullet wins."""
        if op.bullet_id and op.bullet_id in self.used:
            self.edits.setdefault(op.bullet_id, op)

    def correct(self, corrections: Sequence[Correction], max_chars: int) -> None:
        for c in corrections:
            content = clip(" ".join(c.content.split()), max_chars)
            if not content:
                self.edit(DeltaOperation(type="REMOVE", bullet_id=c.id))
            elif len(words(content)) >= 3:
                self.edit(DeltaOperation(type="UPDATE", bullet_id=c.id, content=content))

    def lesson(self, lesson: Lesson, *, user: str | None, source: str, threshold: float) -> None:
        """Reinforce the most similar bullet in the prompt, or add the lesson."""
        live = [b for b in self.used.values() if self._kept(b.id)]
        best = max(live, key=lambda b: similarity(lesson.content, b.content), default=None)
        if best is not None and similarity(lesson.content, best.content) >= threshold:
            self.reinforce(best.id)
        elif all(similarity(lesson.content, a.content or "") < threshold for a in self.adds):
            self.adds.append(add_operation(lesson, user=user, source=source))

    def operations(self) -> list[DeltaOperation]:
        """TAGs, then UPDATEs and REMOVEs, then ADDs; a removed bullet is not tagged."""
        ops = [
            DeltaOperation(type="TAG", bullet_id=b, **counts)
            for b, counts in self.counts.items()
            if self._kept(b) and any(counts.values())
        ]
        return [*ops, *self.edits.values(), *self.adds]

    def _kept(self, bullet: str) -> bool:
        edit = self.edits.get(bullet)
        return edit is None or edit.type != "REMOVE"


def add_operation(lesson: Lesson, *, user: str | None, source: str) -> DeltaOperation:
    metadata: dict[str, str] = {"lesson-type": lesson.type}
    if source:
        metadata["learned-from"] = source
    return DeltaOperation(
        type="ADD",
        content=lesson.content,
        section=lesson.section,
        tags=lesson.tags,
        memory_type=MEMORY_TYPE[lesson.type],
        user=user,
        helpful=1,
        metadata=metadata,
    )


def heuristic_operations(
    reflection: Reflection,
    used: Sequence[MemoryRef],
    *,
    user: str | None = None,
    source: str = "",
    threshold: float = REINFORCE_SIMILARITY,
    max_chars: int = 400,
) -> list[DeltaOperation]:
    delta = _Delta({b.id: b for b in used})
    for tag in reflection.bullet_tags:
        if tag.id in delta.used:
            delta.tag(tag.id, tag.tag)
    delta.correct(reflection.corrections, max_chars)
    for lesson in reflection.lessons:
        delta.lesson(lesson, user=user, source=source, threshold=threshold)
    return delta.operations()


# -- LLM mode ------------------------------------------------------------------------------
class OperationSchema(BaseModel):
    type: Literal["ADD", "UPDATE", "TAG", "REMOVE"]
    bullet_id: str | None
    content: str | None
    section: str | None
    tags: list[str] = Field(max_length=5)


class CuratorSchema(BaseModel):
    reasoning: str
    operations: list[OperationSchema] = Field(max_length=20)


class CuratorReply(BaseModel):
    operations: list[Any]


class _Op(BaseModel):
    """One operation as accepted: checked against the bullets in the prompt afterwards."""

    type: Literal["ADD", "UPDATE", "TAG", "REMOVE"]
    bullet_id: str | None = None
    content: str | None = None
    section: str | None = None
    tags: list[str] = Field(default_factory=list)


CURATOR_SYSTEM = (
    "You are the curator of an AI agent's playbook: short strategy bullets, grouped in "
    "sections, that the agent reads before it works. Turn the lessons of a reflection into "
    "playbook operations. " + DATA_NOTE + "\n"
    'Reply {"reasoning": "...", "operations": [{"type": "ADD", "bullet_id": null, '
    '"content": "...", "section": "...", "tags": ["..."]}]}. Operations: ADD a lesson no '
    "bullet says yet, as one short general sentence; TAG a listed bullet (bullet_id) that "
    "already says a lesson, instead of adding a copy; UPDATE a listed bullet that a lesson "
    "refines or corrects (content: its new text); REMOVE a listed bullet only if it is wrong "
    "or obsolete. Every lesson must be carried by an operation."
)


async def curate(
    llm: JsonLLM | None,
    reflection: Reflection,
    used: Sequence[MemoryRef],
    *,
    user: str | None = None,
    source: str = "",
    threshold: float = REINFORCE_SIMILARITY,
    max_chars: int = 400,
) -> tuple[list[DeltaOperation], str]:
    """The operations and how they were made: ``heuristic``, ``llm`` or ``llm+heuristic``
    (some lessons curated heuristically) or ``heuristic-fallback`` (the LLM gave junk)."""

    def heuristic() -> list[DeltaOperation]:
        return heuristic_operations(
            reflection, used, user=user, source=source, threshold=threshold, max_chars=max_chars
        )

    if llm is None or not (reflection.lessons or reflection.corrections):
        return heuristic(), "heuristic"
    reply = await llm.ask(
        CURATOR_SYSTEM,
        wrap_record(curator_record(reflection, used)),
        CuratorReply,
        coerce=as_object("operations"),
        schema=CuratorSchema,
    )
    ops = [] if reply is None else [o for o in map(_op, reply.operations) if o is not None]
    if not ops:
        return heuristic(), "heuristic-fallback"
    delta = _Delta({b.id: b for b in used})
    for tag in reflection.bullet_tags:
        if tag.id in delta.used:
            delta.tag(tag.id, tag.tag)
    carried: list[str] = []
    for op in ops:
        content = clip(" ".join((op.content or "").split()), max_chars)
        known = op.bullet_id in delta.used
        if op.type == "ADD" and len(words(content)) >= 3:
            like = _closest(content, reflection.lessons)
            lesson = Lesson(
                content=content,
                type=like.type if like else "domain",
                tags=[t for t in op.tags if t][:5] or (like.tags if like else []),
                section=clip(" ".join((op.section or "").split()), 80)
                or (like.section if like else "domain knowledge"),
            )
            delta.lesson(lesson, user=user, source=source, threshold=threshold)
            carried.append(content)
        elif op.type == "TAG" and known and op.bullet_id:
            delta.reinforce(op.bullet_id)
            carried.append(delta.used[op.bullet_id].content)
        elif op.type == "UPDATE" and known and len(words(content)) >= 3:
            delta.edit(DeltaOperation(type="UPDATE", bullet_id=op.bullet_id, content=content))
            carried.append(content)
        elif op.type == "REMOVE" and known:
            delta.edit(DeltaOperation(type="REMOVE", bullet_id=op.bullet_id))
    delta.correct(reflection.corrections, max_chars)
    missed = [
        lesson
        for lesson in reflection.lessons
        if all(overlap(lesson.content, text) < CARRIES for text in carried)
    ]
    for lesson in missed:
        delta.lesson(lesson, user=user, source=source, threshold=threshold)
    return delta.operations(), "llm+heuristic" if missed else "llm"


def curator_record(reflection: Reflection, used: Sequence[MemoryRef]) -> str:
    lessons = [
        lesson.model_dump(include={"content", "type", "section"}) for lesson in reflection.lessons
    ]
    lines = ["Lessons:", json.dumps(lessons, ensure_ascii=False, indent=1)]
    if reflection.corrections:
        lines += ["Corrections the reflection asks for:"]
        lines += [
            f"- [{c.id}] " + (f"should say: {c.content}" if c.content else "obsolete")
            for c in reflection.corrections
        ]
    lines.append("Bullets in the agent's prompt:")
    lines += [f"- [{b.id}] {clip(' '.join(b.content.split()), 400)}" for b in used] or ["(none)"]
    return "\n".join(lines)


def _op(raw: Any) -> _Op | None:
    try:
        return _Op.model_validate(raw)
    except (ValidationError, TypeError, ValueError):
        return None


def _closest(content: str, lessons: Sequence[Lesson]) -> Lesson | None:
    best = max(lessons, key=lambda x: overlap(content, x.content), default=None)
    return best if best is not None and overlap(content, best.content) > 0 else None


def _content_words(text: str) -> set[str]:
    return {w for w in (x.casefold() for x in _WORD.findall(text)) if w not in STOP}
