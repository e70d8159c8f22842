"""Memory as prompt items: each recalled record as one inert line, with what it refers to.

Text inside the memory fence cannot open or close a fence: every angle bracket in memory
text is escaped, after NFKC folding (full-width and other compatibility forms) and with
invisible format characters (zero-width joiners, bidi overrides) removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from react_mem.schema.agent import MemoryRef
from react_mem.schema.conversations import Conversation
from react_mem.schema.episodes import Episode
from react_mem.schema.facts import Fact
from react_mem.schema.playbook import Bullet
from react_mem.text import fold


@dataclass(frozen=True)
class Item:
    text: str
    ref: MemoryRef
    #: A heading the item is listed under (a playbook section), written once per group.
    group: str = ""
    #: The text's tokens in the agent's counter, when recall counted them while it waited
    #: for other sources (None: the render counts them).
    tokens: int | None = None


#: Escapes for everything that is, or reads as, an angle bracket once NFKC-folded: ``<`` and
#: ``>``, the two characters whose decomposition holds one (not-less/greater-than), and
#: lookalikes NFKC leaves alone. Escaping every bracket, not tag spellings, means no case,
#: spacing or hidden character can turn memory text into a fence.
_INERT = str.maketrans(
    {"<": "&lt;", ">": "&gt;", "\u226e": "&lt;\u0338", "\u226f": "&gt;\u0338"}
    | dict.fromkeys("\u2039\u3008\u27e8\u276c\u276e\u2770\u29fc\u02c2", "&lt;")
    | dict.fromkeys("\u203a\u3009\u27e9\u276d\u276f\u2771\u29fd\u02c3", "&gt;")
)


def clean(text: str) -> str:
    """Memory text as one inert fenced line: NFKC-folded, format characters dropped, control
    characters and line breaks made single spaces, angle brackets escaped."""
    return " ".join(fold(text).translate(_INERT).split())


def bullet_line(bullet: Bullet) -> str:
    """Seed 003's bullet line: ``- [id] content (helpful=5, harmful=0)``."""
    counts = f"(helpful={bullet.helpful}, harmful={bullet.harmful})"
    return f"- [{clean(bullet.id)}] {clean(bullet.content)} {counts}"


def section_heading(section: str) -> str:
    return f"## {clean(section) or 'general'}"


def as_prompt(bullets: Sequence[Bullet]) -> str:
    """Bullets in seed 003's playbook format: grouped under ``## Section`` headings, in
    the order sections first appear, blank lines between sections."""
    groups: dict[str, list[str]] = {}
    for b in bullets:
        groups.setdefault(section_heading(b.section), []).append(bullet_line(b))
    return "\n\n".join("\n".join([heading, *lines]) for heading, lines in groups.items())


def bullet_items(bullets: Sequence[Bullet]) -> list[Item]:
    return [
        Item(
            bullet_line(b),
            MemoryRef(kind="bullet", id=b.id, content=b.content, score=b.score),
            group=section_heading(b.section),
        )
        for b in bullets
    ]


def day(epoch: float | None) -> str:
    """``(YYYY-MM-DD) `` for a known time (UTC), else nothing."""
    if epoch is None:
        return ""
    return f"({datetime.fromtimestamp(epoch, UTC):%Y-%m-%d}) "


def fact_items(facts: Sequence[Fact]) -> list[Item]:
    """One line per fact, dated when what it says happened is known; a value an update
    superseded (recalled for a question about the past) says so, and until when, and one
    that another current fact contradicts is marked disputed."""
    return [
        Item(
            f"- {_standing(f)}{day(f.valid_at)}{clean(f.content)}",
            MemoryRef(kind="fact", id=f.id, content=f.content, score=f.score),
        )
        for f in facts
    ]


def _standing(fact: Fact) -> str:
    if fact.superseded_by:
        until = "" if fact.valid_until is None else f" (until {day(fact.valid_until)[1:-2]})"
        return f"earlier{until}: "
    return "disputed: " if fact.conflicts_with else ""


def episode_items(episodes: Sequence[Episode]) -> list[Item]:
    items = []
    for n, e in enumerate(episodes, 1):
        lessons = "; ".join(e.lessons)
        text = f"- Episode {n}: {clean(e.goal)} -> {e.outcome}"
        if lessons:
            text += f". Lessons: {clean(lessons)}"
        items.append(
            Item(text, MemoryRef(kind="episode", id=e.id, content=e.goal, score=e.similarity))
        )
    return items


def reflection_items(episodes: Sequence[Episode]) -> list[Item]:
    """Lessons of recent episodes (seed 003's recent reflections), each as one line."""
    return [
        Item(
            f"- Recent lesson ({e.outcome}): {clean('; '.join(e.lessons))}",
            MemoryRef(kind="episode", id=e.id, content="; ".join(e.lessons), score=e.similarity),
        )
        for e in episodes
    ]


def conversation_items(conversation: Conversation | None, turns: int) -> list[Item]:
    if conversation is None:
        return []
    items = []
    if conversation.summary:
        ref = MemoryRef(
            kind="summary", id=conversation.conversation_id, content=conversation.summary
        )
        items.append(Item(f"- Summary so far: {clean(conversation.summary)}", ref))
    recent = conversation.turns[-turns:] if turns else []
    for t in recent:
        said = t.summary or f"User asked: {t.query} Answer: {t.answer}"
        ref = MemoryRef(kind="turn", id=t.turn_id, content=said)
        items.append(Item(f"- Previous invocation {t.sequence + 1}: {clean(said)}", ref))
    return items
