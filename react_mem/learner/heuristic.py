"""The heuristic reflection (deterministic, always available) and the signals every
reflection is judged by: the verdict, the evidence for it, the tags bullets earn, and that
no lesson carries the user's words (:mod:`.generic`)."""

from __future__ import annotations

import re

from react_mem.learner import records
from react_mem.learner.extract import clip
from react_mem.learner.generic import leak
from react_mem.learner.reflection import (
    SECTIONS,
    BulletTag,
    Lesson,
    LessonType,
    Reflection,
    Tag,
    Verdict,
    checked,
    line,
)
from react_mem.schema.agent import MemoryRef
from react_mem.schema.playbook import Feedback
from react_mem.schema.trajectory import Trajectory

OUTCOME_VERDICT: dict[str, Verdict] = {
    "success": "positive",
    "partial": "neutral",
    "failure": "negative",
}
TAG_FOR: dict[str, Tag] = {"positive": "helpful", "negative": "harmful", "neutral": "neutral"}

# -- signals -----------------------------------------------------------------------------
def bullets_used(t: Trajectory) -> list[MemoryRef]:
    """The playbook bullets that were in the prompt, each once."""
    seen: dict[str, MemoryRef] = {}
    for ref in t.memory_used:
        if ref.kind == "bullet" and ref.id and ref.id not in seen:
            seen[ref.id] = ref
    return list(seen.values())


def bullets_credited(t: Trajectory) -> list[MemoryRef]:
    """The bullets in the prompt that the agent said it relied on: the only ones a
    reflection credits or blames (seed 003); the others shown only age. A record without
    citations (``bullets_used`` None, an older agent) credits every bullet shown."""
    shown = bullets_used(t)
    if t.bullets_used is None:
        return shown
    cited = set(t.bullets_used)
    return [b for b in shown if b.id in cited]


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
    lessons = checked(_heuristic_lessons(t, feedback, found), limit, max_chars)
    reflection = Reflection(
        by="heuristic",
        verdict=found,
        error_identification=clip(line(t.error or ""), 300) if found == "negative" else "",
        key_insight=lessons[0].content if lessons else "",
        lessons=lessons,
        bullet_tags=[
            BulletTag(id=b.id, tag=bullet_tag(t, feedback, found)) for b in bullets_credited(t)
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
    q = kind_of_task(t)
    lessons: list[Lesson] = []
    if t.ground_truth and t.ground_truth.strip() and not matches(t.answer, t.ground_truth):
        lessons.append(_truth_lesson(t, t.ground_truth))
    if t.outcome == "failure":
        error = clip(line(t.error or "no answer was given"), 200)
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
            why = clip(line(rubric.comment), 160).rstrip(".")
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
        said = f"A user {how} an answer to {kind_of_task(t)}; weigh this approach there."
        lessons.append(_lesson(said, kind, "feedback"))
    return lessons


def _truth_lesson(t: Trajectory, truth: str) -> Lesson:
    return _lesson(
        f"For {kind_of_task(t)}, the answer given differed from the expected one; check "
        "the answer against the sources before replying.",
        "failure",
        "ground-truth",
    )


_ASKS = ("how", "why", "what", "which", "when", "where", "who")


def kind_of_task(t: Trajectory) -> str:
    """The trajectory's task type as its kind ("temperature tasks"): lessons of different
    task types stay apart instead of merging as near-duplicates; without one, the
    question's kind. Lower-cased plain marks only: a label, never the user's wording."""
    label = " ".join(re.sub(r"[^\w -]+", " ", t.task_type).split())[:40].casefold()
    return f"{label} tasks" if label else kind_of(t.question)


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


def _sign(value: float) -> Verdict:
    return "positive" if value > 0 else "negative" if value < 0 else "neutral"


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))
