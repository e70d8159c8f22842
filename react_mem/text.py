"""Text every service shares: the one rendering of an agent step, clipping, JSON extraction.

``render_step`` is the text the agent's LLM reads for a step of working memory; the same
text is what working memory counts against its threshold and what the learner records
(on one line), so the compression threshold measures what the LLM sees.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

from react_mem.schema.agent import AgentStep
from react_mem.schema.trajectory import PARSE_ERROR_ACTION
from react_mem.schema.working import SUMMARY_STEP_TYPE

#: Between two rendered steps in a prompt.
STEP_SEPARATOR = "\n\n"


def render_step(step: AgentStep) -> str:
    """A step as the LLM reads it (TrustGraph's ReAct lines, empty ones left out): a
    compressed summary as one line, a reply that could not be parsed as its observation."""
    if step.step_type == SUMMARY_STEP_TYPE:  # an empty one (no room for any) shows nothing
        return f"Summary of earlier steps: {step.observation}" if step.observation else ""
    lines = []
    if step.thought:
        lines.append(f"Thought: {step.thought}")
    if step.action and step.action != PARSE_ERROR_ACTION:
        lines.append(f"Action: {step.action}")
        lines.append(f"Args: {json.dumps(step.arguments, ensure_ascii=False)}")
    if step.observation:
        lines.append(f"Observation: {step.observation}")
    for plan in step.plan:
        lines.append(f"Plan: {plan.goal} [{plan.status}] {plan.result}".rstrip())
    for name, result in step.subagent_results.items():
        lines.append(f"Subagent {name}: {result}")
    return "\n".join(lines)


def render_steps(steps: Sequence[AgentStep]) -> str:
    return STEP_SEPARATOR.join(render_step(s) for s in steps)


def fold(text: str) -> str:
    """Text as a reader (an LLM, a regular expression) sees it: NFKC-folded (full-width
    and other compatibility forms made plain), invisible format characters (zero-width
    spaces and joiners, bidi controls) removed, and other control or separator characters
    made spaces (tabs and line breaks kept). The prompt renders memory through this, and
    the PII screen reads through it, so a value hidden from one is hidden from neither."""
    text = unicodedata.normalize("NFKC", text)
    if text.isprintable() or text.translate(_TABS_AND_BREAKS).isprintable():
        return text  # nothing to drop or replace (the character loop is the slow part)
    return "".join(_folded(c) for c in text)


#: The non-printable characters :func:`fold` keeps as they are.
_TABS_AND_BREAKS = str.maketrans("", "", "\t\n")


def _folded(char: str) -> str:
    if char in "\t\n" or char.isprintable():
        return char
    kind = unicodedata.category(char)
    return "" if kind == "Cf" else " "


def one_line(text: str) -> str:
    """Every run of whitespace, line breaks included, as one space."""
    return " ".join(text.split())


def clip(text: str, max_chars: int) -> str:
    """At most ``max_chars``, cut at a word boundary with an ellipsis."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1].rsplit(" ", 1)[0] or text[: max_chars - 1]
    return cut + "…"


def first_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (prose or code fences around it), or
    ``None`` when there is none."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            return value
    return None
