"""Reading the LLM's ReAct reply: a tool call (Action + Args) or a Final Answer.

The format, asked for by the agent's prompt (TrustGraph's react agent's)::

    Thought: reasoning                  Thought: reasoning
    Action: tool_name          or       Final Answer: the answer, any number of lines
    Args: {"arg": "value"}

A ``Bullets:`` line before the Action or Final Answer (optional) names the playbook bullets
the decision relies on, by id (seed 003: the generator cites bullet ids); ids are read
leniently (commas, spaces, brackets, quotes) and the agent keeps only ids it showed.

Markers open a line and are read leniently: any case, indented, in markdown bold or under a
header (``**Thought:**``, ``### Final Answer:``); ``Action Input:`` is an alias of ``Args:``.
Text before the first marker is ignored, and a closing ``` fence is dropped when the reply
opened with one (a reply wrapped whole in a fence). Which of Action or Final Answer comes
first decides. Thought text runs to the next marker; several Thoughts are joined with
newlines. The Final Answer runs to the end of the reply, kept exactly (lines, indentation,
code) bar outer whitespace. Anything after an Action's Args is ignored, as is everything from
an ``Observation:`` line on while no Action or Final Answer came before it. Free text with
no Action or Final Answer is an error, never an answer: the agent retries with CORRECTION.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from react_mem.errors import ReactMemError

__all__ = ["CORRECTION", "Action", "Final", "ParseError", "parse_reply"]


@dataclass(frozen=True)
class Action:
    """A tool call. Argument values are strings: JSON text for non-string values.
    ``bullets``: the playbook bullet ids the model says it relied on."""

    thought: str
    name: str
    arguments: dict[str, str]
    bullets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Final:
    """The answer to the user, as the model wrote it."""

    thought: str
    answer: str
    bullets: tuple[str, ...] = ()


class ParseError(ReactMemError, ValueError):
    """The reply fits neither format; the message tells the model what was wrong."""


CORRECTION = """\
Reply in exactly one of these two formats, and nothing else.
To use a tool:
Thought: your reasoning
Action: the name of one tool from the list
Args: a JSON object with the tool's arguments, e.g. {"query": "..."}
To answer:
Thought: your reasoning
Final Answer: your answer to the user"""

# "Thought:", "  **Final Answer:**", "### Action:", "__Args__:"; group "close" is bold closed
# after the colon. The content of the marker's line starts at the match's end.
MARKER = re.compile(
    r"[ \t]*(?:\#{1,6}[ \t]*)?(?:[*_]{1,2}[ \t]*)?"
    r"(?P<kw>thought|action[ \t]*input|action|args|final[ \t]*answer|observation"
    r"|bullets(?:[ \t]*used)?)"
    r"[ \t]*(?:[*_]{1,2})?[ \t]*:(?P<close>[*_]{0,2})",
    re.IGNORECASE,
)
_KINDS = {
    "thought": "thought",
    "action": "action",
    "actioninput": "args",
    "args": "args",
    "finalanswer": "final",
    "observation": "observation",
    "bullets": "bullets",
    "bulletsused": "bullets",
}
#: A bullet id as cited: letters, digits and ``-_.:`` (uuids, ``section-00042``).
BULLET_ID = re.compile(r"[\w.:-]+")
OPEN_FENCE = re.compile(r"`{3,}[\w+.#-]*")
CLOSE_FENCE = re.compile(r"`{3,}")


def marker_kind(match: re.Match[str]) -> str:
    """ "thought", "action", "args", "final", "observation" or "bullets"."""
    return _KINDS[re.sub(r"[ \t]", "", match["kw"].lower())]


def parse_reply(text: str) -> Action | Final:
    """Read one ReAct reply; raise ParseError when it fits neither format."""
    text = _unwrap(text)
    if not text:
        raise ParseError("Your reply was empty.")
    thoughts: list[str] = []
    cited: list[str] = []
    start: int | None = None  # content start of the Thought being read
    seen = False
    for pos in _line_starts(text):
        m = MARKER.match(text, pos)
        if m is None:
            continue
        seen = True
        if start is not None:
            thoughts.append(text[start:pos].strip())
            start = None
        kind = marker_kind(m)
        if kind == "thought":
            start = m.end()
        elif kind == "bullets":
            nl = text.find("\n", m.end())
            cited += bullet_ids(text[m.end() : len(text) if nl < 0 else nl])
        elif kind == "final":
            answer = text[m.end() :].strip()
            if not answer:
                raise ParseError('Your "Final Answer:" is empty.')
            return Final(_join(thoughts), answer, tuple(dict.fromkeys(cited)))
        elif kind == "action":
            found = _action(_join(thoughts), text, m.end())
            return Action(found.thought, found.name, found.arguments, tuple(dict.fromkeys(cited)))
        elif kind == "observation":
            break  # the model is imagining a tool's result
    if seen:
        raise ParseError('Your reply has no "Action:" line and no "Final Answer:" line.')
    raise ParseError('Your reply has none of the "Thought:", "Action:", "Final Answer:" lines.')


def bullet_ids(text: str) -> list[str]:
    """The ids in a ``Bullets:`` line: ``[a, b]``, ``a b``, ``"a", "b"``; "none" is none."""
    found = BULLET_ID.findall(text)
    return [x for x in found if x.casefold() not in ("none", "n/a", "na", "-")]


def _action(thought: str, text: str, content: int) -> Action:
    nl = text.find("\n", content)
    name = text[content : len(text) if nl < 0 else nl].strip().strip("`'\"*").strip()
    if not name:
        raise ParseError('Your "Action:" line names no tool.')
    if nl >= 0:
        for pos in _line_starts(text, nl + 1):
            m = MARKER.match(text, pos)
            if m is None:
                continue  # stray text between Action and Args
            if marker_kind(m) == "args":
                return Action(thought, name, _arguments(name, text[m.end() :]))
            break  # another marker: the action has no Args
    return Action(thought, name, {})


def _arguments(tool: str, text: str) -> dict[str, str]:
    """The JSON object at the start of `text`, on its line or the next, maybe ```json fenced."""
    text = text.lstrip()
    fence = OPEN_FENCE.match(text)
    if fence:
        text = text[fence.end() :].lstrip()
    if not text.startswith("{"):
        first = text.partition("\n")[0].strip()
        if not first or MARKER.match(first):
            return {}  # "Args:" with nothing after it
        raise ParseError(
            f'The "Args:" for {tool} must be a JSON object such as {{"query": "..."}}, '
            f"not: {first[:200]}"
        )
    try:
        value, _ = json.JSONDecoder().raw_decode(text)  # stops at the object's closing brace
    except json.JSONDecodeError as exc:
        raise ParseError(
            f'The "Args:" for {tool} are not valid JSON: {exc.msg} '
            f"(line {exc.lineno}, column {exc.colno})."
        ) from exc
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        for k, v in value.items()
    }


def _unwrap(text: str) -> str:
    """Strip the reply, dropping its last line if it closes a fence that opened it."""
    text = text.strip()
    first = text.partition("\n")[0]
    head, nl, last = text.rpartition("\n")
    if nl and OPEN_FENCE.fullmatch(first.strip()) and CLOSE_FENCE.fullmatch(last.strip()):
        return head
    return text


def _line_starts(text: str, pos: int = 0) -> Iterator[int]:
    while True:
        yield pos
        nl = text.find("\n", pos)
        if nl < 0:
            return
        pos = nl + 1


def _join(thoughts: list[str]) -> str:
    return "\n".join(t for t in thoughts if t)
