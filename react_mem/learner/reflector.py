"""The ACE reflector (seeds 001 and 003): a finished trajectory, with its ground truth, user
feedback or rubric results when present, becomes lessons and helpful / harmful / neutral
tags for the playbook bullets the agent had in its prompt.

The heuristic reflection (:mod:`.heuristic`) is deterministic and always available. The
LLM reflection (here) asks for the same shape (:mod:`.reflection`: JSON-constrained, checked
item by item, retried by :class:`JsonLLM`), with the last few reflections of the same scope
as context (seed 003's reflection window) and the rubric results as PASS/FAIL lines (seed
001, enhancement 5); when its replies stay malformed the heuristic reflection is used.
"""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.learner import records
from react_mem.learner.extract import DATA_NOTE, as_object, clip, words, wrap_record
from react_mem.learner.heuristic import (
    bullets_credited,
    bullets_used,
    evidence,
    generalised,
    heuristic_reflection,
)
from react_mem.learner.llm import JsonLLM
from react_mem.learner.reflection import (
    BulletTag,
    Correction,
    Lesson,
    Reflection,
    ReflectionReply,
    ReflectionSchema,
    checked,
    item,
    line,
    text,
)
from react_mem.schema.agent import MemoryRef
from react_mem.schema.playbook import Feedback
from react_mem.schema.trajectory import Trajectory

REFLECTOR_SYSTEM = (
    "You are the reflector of an AI agent that learns from experience. Read one finished "
    "task, the playbook bullets the agent had in its prompt and any feedback, and judge what "
    "worked, what went wrong and why. " + DATA_NOTE + "\n"
    'Reply {{"reasoning": "...", "error_identification": "...", "root_cause": "...", '
    '"correct_approach": "...", "key_insight": "...", "lessons": [{{"content": "...", '
    '"type": "success | failure | domain | tool", "tags": ["..."], "section": "..."}}], '
    '"bullet_tags": [{{"id": "...", '
    '"tag": "helpful | harmful | neutral"}}], "corrections": []}}.\n'
    "lessons: at most {limit}, each one short sentence that will help with similar tasks "
    "later (a strategy to follow, a pitfall to avoid, a fact of the domain, how a tool "
    "behaves); type is success, failure, domain or tool. bullet_tags: for each bullet "
    "marked (relied on), helpful only if the bullet clearly led to a result the user or a "
    "tool confirmed, harmful if it misled, else neutral; leave out the bullets the agent "
    "did not rely on. corrections: only for a relied-on "
    'bullet that is wrong ({{"id": "...", "content": "what it should say", "reason": "..."}}) '
    'or obsolete ({{"id": "...", "content": "", "reason": "..."}}); usually none. If there '
    'is nothing to learn, reply with "lessons": [].'
)


# -- the LLM reflection --------------------------------------------------------------------
async def reflect(
    llm: JsonLLM | None,
    t: Trajectory,
    feedback: Feedback | None = None,
    *,
    window: Sequence[str] = (),
    limit: int = 3,
    max_chars: int = 400,
    prompt_chars: int = 8000,
) -> Reflection:
    """The LLM's reflection when ``llm`` is given and answers usably, else the heuristic's.

    With feedback the bullets' tags follow the feedback's verdict whatever the LLM says:
    the user, not the model, judged the answer.
    """
    fallback = heuristic_reflection(t, feedback, limit=limit, max_chars=max_chars)
    if llm is None:
        return fallback  # generalised already
    used = bullets_credited(t)
    record = reflection_record(t, feedback, bullets_used(t), window, max_chars=prompt_chars)
    reply = await llm.ask(
        REFLECTOR_SYSTEM.format(limit=limit),
        wrap_record(record),
        ReflectionReply,
        coerce=as_object("lessons"),
        schema=ReflectionSchema,
    )
    if reply is None:
        return fallback.model_copy(update={"by": "heuristic-fallback"})
    proven = evidence(t, feedback) is not None
    return generalised(
        _llm_reflection(reply, fallback, used, feedback, limit, max_chars, proven), t, feedback
    )


def _llm_reflection(
    reply: ReflectionReply,
    fallback: Reflection,
    used: Sequence[MemoryRef],
    feedback: Feedback | None,
    limit: int,
    max_chars: int,
    proven: bool,
) -> Reflection:
    lessons = checked(
        [x for x in (item(Lesson, i) for i in reply.lessons) if x is not None], limit, max_chars
    )
    known = {b.id for b in used}
    tags: dict[str, BulletTag] = {}
    if feedback is None:
        found = (item(BulletTag, i) for i in reply.bullet_tags)
        tags = {x.id: x for x in found if x is not None and x.id in known}
        if not proven:  # the model's "helpful" is its opinion, not evidence
            tags = {
                i: x.model_copy(update={"tag": "neutral"}) if x.tag == "helpful" else x
                for i, x in tags.items()
            }
    # Bullets the LLM left out are tagged as the heuristic would.
    for tag in fallback.bullet_tags:
        tags.setdefault(tag.id, tag)
    corrections = [
        Correction(id=c.id, content=clip(line(c.content), max_chars), reason=c.reason)
        for c in (item(Correction, i) for i in reply.corrections)
        if c is not None and c.id in known and (not c.content.strip() or len(words(c.content)) >= 3)
    ]
    return Reflection(
        by="llm",
        verdict=fallback.verdict,
        error_identification=text(reply.error_identification),
        root_cause=text(reply.root_cause),
        correct_approach=text(reply.correct_approach),
        key_insight=text(reply.key_insight),
        lessons=lessons,
        bullet_tags=[tags[b.id] for b in used if b.id in tags],
        corrections=corrections,
    )


def reflection_record(
    t: Trajectory,
    feedback: Feedback | None,
    used: Sequence[MemoryRef],
    window: Sequence[str],
    *,
    max_chars: int,
) -> str:
    """The trajectory as prompt data, then what it is judged by, then recent reflections."""
    extra: list[str] = [f"Tool errors: {t.tool_errors}; malformed replies: {t.parse_retries}"]
    if t.ground_truth:
        extra.append(f"Ground truth: {clip(t.ground_truth, 1000)}")
    if used:
        relied = {b.id for b in bullets_credited(t)}
        extra.append("Playbook bullets in the agent's prompt:")
        extra += [
            f"- [{b.id}]{' (relied on)' if b.id in relied else ''} {clip(line(b.content), 400)}"
            for b in used
        ]
    if feedback is not None:
        extra += feedback_lines(feedback)
    if window:
        extra.append("Recent reflections on this context (oldest first):")
        extra += [f"{n}. {clip(line(w), 600)}" for n, w in enumerate(window, 1)]
    tail = "\n".join(extra)
    budget = max(500, max_chars - len(tail) - 1)
    return records.trajectory_record(t, max_chars=budget) + "\n" + tail


def feedback_lines(feedback: Feedback) -> list[str]:
    """User feedback, with each rubric as a PASS/FAIL line (seed 001, enhancement 5)."""
    said = []
    if feedback.rating is not None:
        said.append(f"rating {feedback.rating:+.2f} (-1 harmful .. +1 helpful)")
    if feedback.helpful is not None:
        said.append("helpful" if feedback.helpful else "not helpful")
    lines = [f"User feedback: {', '.join(said) or 'no rating'}"]
    if feedback.ground_truth:
        lines.append(f"Expected answer: {clip(feedback.ground_truth, 1000)}")
    if feedback.comment.strip():
        lines.append(f"Comment: {clip(line(feedback.comment), 1000)}")
    if feedback.rubric:
        lines.append("Rubric results:")
        for r in feedback.rubric:
            why = f" ({clip(line(r.comment), 300)})" if r.comment.strip() else ""
            lines.append(f"{'PASS' if r.passed else 'FAIL'}: {clip(line(r.name), 200)}{why}")
    return lines
