"""The ACE reflector (seeds 001 and 003): a finished trajectory, with its ground truth, user
feedback or rubric results when present, becomes lessons and helpful / harmful / neutral
tags for the playbook bullets the agent had in its prompt.

The heuristic reflection is deterministic and always available. The LLM reflection asks
for the same shape (JSON-constrained, checked item by item, retried by :class:`JsonLLM`),
with the last few reflections of the same scope as context (seed 003's reflection window)
and the rubric results as PASS/FAIL lines (seed 001, enhancement 5); when its replies
stay malformed the heuristic reflection is used instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from react_mem.learner import records
from react_mem.learner.extract import DATA_NOTE, as_object, clip, fact_key, words, wrap_record
from react_mem.learner.generic import leak
from react_mem.learner.llm import JsonLLM
from react_mem.schema.agent import MemoryRef
from react_mem.schema.playbook import Feedback
from react_mem.schema.trajectory import Trajectory

LessonType = Literal["success", "failure", "domain", "tool"]
Tag = Literal["helpful", "harmful", "neutral"]
Verdict = Literal["positive", "negative", "neutral"]

#: Where a lesson goes in the playbook when the reflection names no section.
SECTIONS: dict[str, str] = {
    "success": "strategies",
    "failure": "pitfalls",
    "domain": "domain knowledge",
    "tool": "tool use",
}
OUTCOME_VERDICT: dict[str, Verdict] = {
    "success": "positive",
    "partial": "neutral",
    "failure": "negative",
}
TAG_FOR: dict[str, Tag] = {"positive": "helpful", "negative": "harmful", "neutral": "neutral"}
MAX_TAGS = 5
_TAG_CHARS = re.compile(r"[^a-z0-9]+")


class Lesson(BaseModel):
    content: str
    type: LessonType = "domain"
    tags: list[str] = Field(default_factory=list)
    section: str = ""

    @field_validator("type", mode="before")
    @classmethod
    def _known_type(cls, value: Any) -> Any:
        return value if value in SECTIONS else "domain"

    @field_validator("tags", "section", mode="before")
    @classmethod
    def _lenient(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name == "section":
            return value if isinstance(value, str) else ""
        return [x for x in value if isinstance(x, str)] if isinstance(value, list) else []


class BulletTag(BaseModel):
    id: str
    tag: Tag


class Correction(BaseModel):
    """A bullet found wrong (``content``: what it should say) or obsolete (empty: remove)."""

    id: str
    content: str = ""
    reason: str = ""


class Reflection(BaseModel):
    #: ``heuristic-fallback``: the LLM was asked, but its replies stayed malformed.
    by: Literal["llm", "heuristic", "heuristic-fallback"] = "heuristic"
    verdict: Verdict = "neutral"
    error_identification: str = ""
    root_cause: str = ""
    correct_approach: str = ""
    key_insight: str = ""
    lessons: list[Lesson] = Field(default_factory=list)
    bullet_tags: list[BulletTag] = Field(default_factory=list)
    corrections: list[Correction] = Field(default_factory=list)

    def window_entry(self, t: Trajectory, chars: int = 600) -> str:
        """One line for the reflection window of later reflections."""
        parts = [f"Question: {clip(_line(t.question), 160)}", f"verdict: {self.verdict}"]
        if self.key_insight:
            parts.append(f"insight: {self.key_insight}")
        if self.lessons:
            parts.append("lessons: " + " | ".join(lesson.content for lesson in self.lessons))
        return clip(_line("; ".join(parts)), chars)


# -- what the LLM is asked for, and what is accepted -------------------------------------
class LessonSchema(BaseModel):
    content: str
    type: LessonType
    tags: list[str] = Field(max_length=MAX_TAGS)
    section: str


class ReflectionSchema(BaseModel):
    reasoning: str
    error_identification: str
    root_cause: str
    correct_approach: str
    key_insight: str
    lessons: list[LessonSchema] = Field(max_length=10)
    bullet_tags: list[BulletTag]
    corrections: list[Correction] = Field(max_length=10)


class ReflectionReply(BaseModel):
    """Lists are checked item by item, so one bad item costs only itself."""

    error_identification: Any = ""
    root_cause: Any = ""
    correct_approach: Any = ""
    key_insight: Any = ""
    lessons: list[Any]
    bullet_tags: list[Any] = Field(default_factory=list)
    corrections: list[Any] = Field(default_factory=list)


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
    "behaves); type is success, failure, domain or tool. bullet_tags: for each listed "
    "bullet id, helpful only if the bullet clearly led to a result the user or a tool "
    "confirmed, harmful if it misled, else neutral. corrections: only for a listed "
    'bullet that is wrong ({{"id": "...", "content": "what it should say", "reason": "..."}}) '
    'or obsolete ({{"id": "...", "content": "", "reason": "..."}}); usually none. If there '
    'is nothing to learn, reply with "lessons": [].'
)


# -- signals -----------------------------------------------------------------------------
def bullets_used(t: Trajectory) -> list[MemoryRef]:
    """The playbook bullets that were in the prompt, each once."""
    seen: dict[str, MemoryRef] = {}
    for ref in t.memory_used:
        if ref.kind == "bullet" and ref.id and ref.id not in seen:
            seen[ref.id] = ref
    return list(seen.values())


def matches(answer: str, truth: str) -> bool:
    """The expected answer is the answer, or stands in it as whole words."""
    a, want = _normal(answer), _normal(truth)
    if not want:
        return True
    return a == want or re.search(rf"(?<!\w){re.escape(want)}(?!\w)", a) is not None


def feedback_verdict(feedback: Feedback, answer: str) -> Verdict:
    """Rating, then helpful, then rubric results, then the ground truth decide."""
    if feedback.rating is not None:
        return _sign(feedback.rating)
    if feedback.helpful is not None:
        return "positive" if feedback.helpful else "negative"
    if feedback.rubric:
        return "positive" if all(r.passed for r in feedback.rubric) else "negative"
    if feedback.ground_truth and feedback.ground_truth.strip():
        return "positive" if matches(answer, feedback.ground_truth) else "negative"
    return "neutral"


def evidence(t: Trajectory, feedback: Feedback | None = None) -> str | None:
    """What shows the answer was good, if anything: user feedback, a ground truth, or a tool
    that ran without error. A final answer alone is no evidence (a small model answers
    something every time)."""
    if feedback is not None and feedback_verdict(feedback, t.answer) != "neutral":
        return "feedback"
    if t.ground_truth and t.ground_truth.strip():
        return "ground-truth"
    if any(s.action and not records.malformed(s) and s.step_type in ("", "tool") for s in t.steps):
        return "tool-outcome"
    return None


def bullet_tag(t: Trajectory, feedback: Feedback | None, found: Verdict) -> Tag:
    """The tag a bullet used in ``t`` earns: helpful only with :func:`evidence`."""
    if found == "positive" and evidence(t, feedback) is None:
        return "neutral"
    return TAG_FOR[found]


def verdict(t: Trajectory, feedback: Feedback | None = None) -> Verdict:
    if feedback is not None:
        return feedback_verdict(feedback, t.answer)
    if t.ground_truth and t.ground_truth.strip():
        return "positive" if matches(t.answer, t.ground_truth) else "negative"
    return OUTCOME_VERDICT[t.outcome]


# -- the heuristic reflection --------------------------------------------------------------
def heuristic_reflection(
    t: Trajectory, feedback: Feedback | None = None, *, limit: int = 3, max_chars: int = 400
) -> Reflection:
    found = verdict(t, feedback)
    lessons = _checked(_heuristic_lessons(t, feedback, found), limit, max_chars)
    reflection = Reflection(
        by="heuristic",
        verdict=found,
        error_identification=clip(_line(t.error or ""), 300) if found == "negative" else "",
        key_insight=lessons[0].content if lessons else "",
        lessons=lessons,
        bullet_tags=[
            BulletTag(id=b.id, tag=bullet_tag(t, feedback, found)) for b in bullets_used(t)
        ],
    )
    return generalised(reflection, t, feedback)


def sources(t: Trajectory, feedback: Feedback | None) -> list[str]:
    """What the user and their tools said: lessons may not carry any of it."""
    texts = [t.question, t.answer, t.ground_truth or ""]
    for step in t.steps:
        texts += [step.observation, *step.arguments.values(), *step.subagent_results.values()]
    if feedback is not None:
        texts += [feedback.comment, feedback.ground_truth or ""]
    return texts


def generalised(reflection: Reflection, t: Trajectory, feedback: Feedback | None) -> Reflection:
    """``reflection`` without a lesson, correction or note that carries the user's words,
    numbers, identifiers or names (:mod:`.generic`): what reaches the playbook is generic."""
    said = sources(t, feedback)
    notes = ("error_identification", "root_cause", "correct_approach", "key_insight")
    return reflection.model_copy(
        update={
            "lessons": [x for x in reflection.lessons if leak(x.content, said) is None],
            "corrections": [
                c for c in reflection.corrections if not c.content or leak(c.content, said) is None
            ],
            **{n: "" for n in notes if leak(getattr(reflection, n), said) is not None},
        }
    )


def _heuristic_lessons(t: Trajectory, feedback: Feedback | None, found: Verdict) -> list[Lesson]:
    """Most specific first: the cap keeps the ones that say the most. A feedback re-run
    learns from the feedback only; the trajectory's own lessons were learned with it."""
    if feedback is not None:
        return _feedback_lessons(t, feedback, found)
    q = kind_of(t.question)
    lessons: list[Lesson] = []
    if t.ground_truth and t.ground_truth.strip() and not matches(t.answer, t.ground_truth):
        lessons.append(_truth_lesson(t, t.ground_truth))
    if t.outcome == "failure":
        error = clip(_line(t.error or "no answer was given"), 200)
        lessons.append(
            _lesson(f"An attempt at {q} failed ({error}); try another approach.", "failure")
        )
    for tool in _failed_tools(t):
        lessons.append(
            _lesson(
                f"The {tool} tool failed; check the tool name and its arguments before calling it.",
                "tool",
                tool,
            )
        )
    if t.parse_retries:
        lessons.append(
            _lesson(
                "Reply in exactly the requested format: malformed replies had to be asked again.",
                "tool",
                "format",
            )
        )
    tools = records.tools_used(t.steps)
    if found == "positive" and tools:
        steps = records.real_steps(t.steps)
        lessons.append(
            _lesson(
                f"For {q}, using {', '.join(tools)} gave a good answer in "
                f"{steps} step{'' if steps == 1 else 's'}.",
                "success",
                *tools,
            )
        )
    return lessons


def _feedback_lessons(t: Trajectory, feedback: Feedback, found: Verdict) -> list[Lesson]:
    lessons: list[Lesson] = []
    for rubric in feedback.rubric:
        if not rubric.passed:
            # The evaluator's criterion, unquoted; its comment only where it is generic.
            why = clip(_line(rubric.comment), 160).rstrip(".")
            why = f": {why}" if why and leak(why, sources(t, feedback)) is None else ""
            lessons.append(
                _lesson(f"Make sure the answer meets {rubric.name}{why}.", "failure", "rubric")
            )
    truth = (feedback.ground_truth or "").strip()
    if truth and not matches(t.answer, truth):
        lessons.append(_truth_lesson(t, truth))
    if feedback.comment.strip():
        how = {"positive": "valued", "negative": "objected to", "neutral": "commented on"}[found]
        kind: LessonType = "success" if found == "positive" else "failure"
        # What the user wrote is theirs: the lesson says only that they judged it.
        said = f"A user {how} an answer to {kind_of(t.question)}; weigh this approach there."
        lessons.append(_lesson(said, kind, "feedback"))
    return lessons


def _truth_lesson(t: Trajectory, truth: str) -> Lesson:
    return _lesson(
        f"For {kind_of(t.question)}, the answer given differed from the expected one; check "
        "the answer against the sources before replying.",
        "failure",
        "ground-truth",
    )


_ASKS = ("how", "why", "what", "which", "when", "where", "who")


def kind_of(question: str) -> str:
    """A question named by its kind, never by its words ("how questions", "tasks")."""
    first = {w.casefold() for w in question.split()[:3]}
    asked = next((w for w in _ASKS if w in first), None)
    return f"{asked} questions" if asked else "tasks like this one"


def _failed_tools(t: Trajectory) -> dict[str, str]:
    """Each tool that failed, with its first error."""
    failed: dict[str, str] = {}
    for step in t.steps:
        if step.step_type == "tool-error" and step.action:
            failed.setdefault(step.action, step.observation or "an error")
    return failed


def _lesson(content: str, kind: LessonType, *tags: str) -> Lesson:
    return Lesson(content=content, type=kind, tags=[kind, *tags], section=SECTIONS[kind])


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
    used = bullets_used(t)
    record = reflection_record(t, feedback, used, window, max_chars=prompt_chars)
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
    lessons = _checked(
        [x for x in (_item(Lesson, i) for i in reply.lessons) if x is not None], limit, max_chars
    )
    known = {b.id for b in used}
    tags: dict[str, BulletTag] = {}
    if feedback is None:
        found = (_item(BulletTag, i) for i in reply.bullet_tags)
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
        Correction(id=c.id, content=clip(_line(c.content), max_chars), reason=c.reason)
        for c in (_item(Correction, i) for i in reply.corrections)
        if c is not None and c.id in known and (not c.content.strip() or len(words(c.content)) >= 3)
    ]
    return Reflection(
        by="llm",
        verdict=fallback.verdict,
        error_identification=_text(reply.error_identification),
        root_cause=_text(reply.root_cause),
        correct_approach=_text(reply.correct_approach),
        key_insight=_text(reply.key_insight),
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
        extra.append("Playbook bullets in the agent's prompt:")
        extra += [f"- [{b.id}] {clip(_line(b.content), 400)}" for b in used]
    if feedback is not None:
        extra += feedback_lines(feedback)
    if window:
        extra.append("Recent reflections on this context (oldest first):")
        extra += [f"{n}. {clip(_line(w), 600)}" for n, w in enumerate(window, 1)]
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
        lines.append(f"Comment: {clip(_line(feedback.comment), 1000)}")
    if feedback.rubric:
        lines.append("Rubric results:")
        for r in feedback.rubric:
            why = f" ({clip(_line(r.comment), 300)})" if r.comment.strip() else ""
            lines.append(f"{'PASS' if r.passed else 'FAIL'}: {clip(_line(r.name), 200)}{why}")
    return lines


# -- checking --------------------------------------------------------------------------------
def _checked(lessons: list[Lesson], limit: int, max_chars: int) -> list[Lesson]:
    """Distinct lessons of three words or more, clipped, tidy tags and sections, capped."""
    kept: dict[str, Lesson] = {}
    for lesson in lessons:
        content = clip(_line(lesson.content), max_chars)
        key = fact_key(content)
        if len(words(content)) < 3 or key in kept:
            continue
        tags = [t for t in (_TAG_CHARS.sub("-", x.casefold()).strip("-") for x in lesson.tags) if t]
        section = clip(_line(lesson.section), 80) or SECTIONS[lesson.type]
        kept[key] = Lesson(
            content=content,
            type=lesson.type,
            tags=list(dict.fromkeys(x[:40] for x in tags))[:MAX_TAGS],
            section=section,
        )
    return list(kept.values())[:limit]


def _item(model: type[Any], raw: Any) -> Any:
    if isinstance(raw, str) and model is Lesson:
        raw = {"content": raw}
    try:
        return model.model_validate(raw)
    except (ValidationError, TypeError, ValueError):
        return None


def _text(value: Any, chars: int = 600) -> str:
    return clip(_line(value), chars) if isinstance(value, str) else ""


def _sign(value: float) -> Verdict:
    return "positive" if value > 0 else "negative" if value < 0 else "neutral"


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _line(text: str) -> str:
    return " ".join(text.split())
