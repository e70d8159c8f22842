"""Playbook lessons are generalised, never a user's words (issue 13, defect 2).

A lesson may be read by every user of a collection once it is shared, so the learner keeps
only lessons that carry nothing of the trajectory they came from: no quotation, no number or
identifier from the question, answer, feedback or tool results, no run of three words copied
from them, no name. :func:`leak` says why a lesson is refused (None: it is generic). The
services' PII screen still redacts what is stored; this is the learner's own side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

#: Words that make a copied three-word run ordinary ("the answer to", "in the list").
_COMMON = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "that",
        "the",
        "their",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "do",
        "does",
        "did",
        "not",
        "no",
        "can",
        "could",
        "should",
        "would",
    }
)
_WORD = re.compile(r"[\w@.+-]+", re.UNICODE)
_QUOTE = re.compile(r"[\"“”„«»]|(?<!\w)'[^']{3,}'(?!\w)")
_LONG_NUMBER = re.compile(r"\d{3,}")
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_IDENTIFIER = re.compile(r"@|\b(?=\w*\d)(?=\w*[^\W\d])\w{4,}\b")
_CAPITAL = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-z]+")


def _words(text: str) -> list[str]:
    return [w.strip(".-+").casefold() for w in _WORD.findall(text) if w.strip(".-+")]


def _runs(words: Sequence[str], n: int = 3) -> set[tuple[str, ...]]:
    return {
        tuple(words[i : i + n])
        for i in range(len(words) - n + 1)
        if not all(w in _COMMON for w in words[i : i + n])
    }


def leak(lesson: str, sources: Iterable[str]) -> str | None:
    """Why ``lesson`` is not a generic lesson given the texts it was learned from (the
    question, answer, ground truth, feedback, tool results), or None."""
    texts = [s for s in sources if s and s.strip()]
    if _QUOTE.search(lesson):
        return "a quotation"
    if _LONG_NUMBER.search(lesson) or _IDENTIFIER.search(lesson):
        return "a number or identifier"
    seen = " ".join(texts)
    numbers = set(_NUMBER.findall(seen))
    if any(len(n) > 1 and n in numbers for n in _NUMBER.findall(lesson)):
        return "a number from the trajectory"
    known = set(_words(seen))
    names = {m.casefold() for m in _CAPITAL.findall(lesson)}
    if names & known:
        return "a name from the trajectory"
    copied = set().union(*(_runs(_words(t)) for t in texts)) if texts else set()
    if _runs(_words(lesson)) & copied:
        return "words copied from the trajectory"
    return None
