"""What a reflection is (lessons, bullet tags, corrections), what the LLM is asked to reply
and how a reply's items are checked: one bad item costs only itself."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from react_mem.learner.extract import clip, fact_key, words
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
        parts = [f"Question: {clip(line(t.question), 160)}", f"verdict: {self.verdict}"]
        if self.key_insight:
            parts.append(f"insight: {self.key_insight}")
        if self.lessons:
            parts.append("lessons: " + " | ".join(lesson.content for lesson in self.lessons))
        return clip(line("; ".join(parts)), chars)


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


# -- checking --------------------------------------------------------------------------------
def checked(lessons: list[Lesson], limit: int, max_chars: int) -> list[Lesson]:
    """Distinct lessons of three words or more, clipped, tidy tags and sections, capped."""
    kept: dict[str, Lesson] = {}
    for lesson in lessons:
        content = clip(line(lesson.content), max_chars)
        key = fact_key(content)
        if len(words(content)) < 3 or key in kept:
            continue
        tags = [t for t in (_TAG_CHARS.sub("-", x.casefold()).strip("-") for x in lesson.tags) if t]
        section = clip(line(lesson.section), 80) or SECTIONS[lesson.type]
        kept[key] = Lesson(
            content=content,
            type=lesson.type,
            tags=list(dict.fromkeys(x[:40] for x in tags))[:MAX_TAGS],
            section=section,
        )
    return list(kept.values())[:limit]


def item(model: type[Any], raw: Any) -> Any:
    if isinstance(raw, str) and model is Lesson:
        raw = {"content": raw}
    try:
        return model.model_validate(raw)
    except (ValidationError, TypeError, ValueError):
        return None


def text(value: Any, chars: int = 600) -> str:
    return clip(line(value), chars) if isinstance(value, str) else ""


def line(text: str) -> str:
    return " ".join(text.split())
