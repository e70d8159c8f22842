"""Is a text made of what was said? The learner keeps only memories grounded in the
conversation: a fact's key terms must all appear in the user's own words, and a summary's
mostly in the conversation, or the LLM made them up (a 135M model readily does).

Key terms are the words left after function words and the framing words a rewrite adds
("the user's name is ..."). Two words match when they are equal or share a stem: the
common prefix of four letters or more that misses at most two letters of the shorter word
("peanut"/"peanuts", "allergic"/"allergy"); numbers and short words must be equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from react_mem.schema.agent import AgentStep
from react_mem.schema.trajectory import PARSE_ERROR_ACTION

_WORDS = re.compile(r"[\w']+")
_FUNCTION = """
    a an the is are was were be been being am do does did has have had of to in on at for
    by with from and or not no it its this that these those what which who whom whose when
    where why how there here as about can could will would should may might must shall
    i i'm i've i'd i'll me my mine you your yours we our us he him his she her they them
    their theirs s 's so also just very then than too into onto over some any all
"""
#: Words a third-person rewrite of what the user said brings in.
_FACT_FRAME = "user user's users name named called person"
#: Words any summary of a conversation may use without them being said.
_SUMMARY_FRAME = (
    _FACT_FRAME
    + " agent assistant asked asks said says told tells mentioned discussed conversation"
    " summary wanted wants requested replied answered answer question introduced"
)
FUNCTION = frozenset(_FUNCTION.split())
FACT_FRAME = frozenset(_FACT_FRAME.split())
SUMMARY_FRAME = frozenset(_SUMMARY_FRAME.split())
#: Share of a summary's key terms that must have been said.
SUMMARY_GROUNDED = 2 / 3


def key_terms(text: str, frame: frozenset[str] = FACT_FRAME) -> list[str]:
    """The content words of ``text``, casefolded, in order, each once."""
    seen: dict[str, None] = {}
    for word in _WORDS.findall(text.casefold()):
        word = word.strip("'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in FUNCTION and word not in frame:
            seen.setdefault(word, None)
    return list(seen)


def _vocabulary(said: Iterable[str]) -> set[str]:
    return {w for text in said for w in key_terms(text, frozenset())}


def _match(word: str, vocabulary: set[str]) -> bool:
    if word in vocabulary:
        return True
    if len(word) < 4 or word.isdigit():
        return False
    for known in vocabulary:
        if len(known) < 4 or known[:3] != word[:3]:
            continue
        common = 0
        for a, b in zip(word, known, strict=False):
            if a != b:
                break
            common += 1
        if common >= 4 and common >= min(len(word), len(known)) - 2:
            return True
    return False


def ungrounded(text: str, said: Iterable[str], frame: frozenset[str] = FACT_FRAME) -> list[str]:
    """The key terms of ``text`` that appear nowhere in ``said``."""
    vocabulary = _vocabulary(said)
    return [w for w in key_terms(text, frame) if not _match(w, vocabulary)]


def fact_grounded(fact: str, said: Iterable[str]) -> bool:
    """Every key term of ``fact`` was said, and it has at least one."""
    return bool(key_terms(fact)) and not ungrounded(fact, said)


def summary_grounded(summary: str, said: Iterable[str]) -> bool:
    """At least :data:`SUMMARY_GROUNDED` of the summary's key terms were said."""
    terms = key_terms(summary, SUMMARY_FRAME)
    if not terms:
        return False
    missing = ungrounded(summary, said, SUMMARY_FRAME)
    return len(terms) - len(missing) >= SUMMARY_GROUNDED * len(terms)


def tool_results(steps: Sequence[AgentStep]) -> list[str]:
    """What tools returned without error: a source of facts as good as the user's words
    (the agent's own reply is not one)."""
    return [
        s.observation
        for s in steps
        if s.action and s.action != PARSE_ERROR_ACTION and s.step_type in ("", "tool")
    ]
