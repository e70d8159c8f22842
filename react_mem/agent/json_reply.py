"""The decision as constrained JSON, for backends that enforce a JSON Schema (llama.cpp's
grammars, vLLM, OpenAI): a small model cannot then break the format or name a tool that
does not exist. agent-mem ``reply-format: json`` turns it on; the default stays
TrustGraph's text format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from react_mem.agent.parse import Action, Final, ParseError

ANSWER = "final-answer"

#: The shape in words, no filled-in example: a small model copies an example verbatim.
FORMAT = f"""Reply with one JSON object: "thought" (your reasoning about the Question), \
"action" ("{ANSWER}" to answer, or a tool name), then "answer" (your reply to the user) \
or "args" (the tool's arguments).
Memory tells you about the user: your answer must respect it."""

#: Added when the prompt holds playbook bullets (seed 003: the generator cites bullet ids).
CITE = (
    'Also give "bullets": the ids of the playbook bullets your decision relies on '
    "(an empty list if none)."
)

CORRECTION = f"Reply with one JSON object only, as described: {FORMAT}"


def schema(tool_names: Sequence[str], bullet_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON Schema of a decision: ``action`` is one of the tools or the answer.
    ``answer`` is always required, right after ``action`` (a grammar writes required keys
    in order): a small model otherwise chooses the answer and ends the object without one;
    with a tool it is ignored. With ``bullet_ids`` (the bullets in the prompt),
    ``bullets`` is required last and each item is one of those ids, so a constrained
    model always writes a valid list, if only ``[]``. (No ``maxLength``: llama.cpp expands
    it into a grammar too large to load.)"""
    properties: dict[str, Any] = {
        "thought": {"type": "string"},
        "action": {"type": "string", "enum": [*tool_names, ANSWER]},
        "answer": {"type": "string"},
        "args": {"type": "object", "additionalProperties": {"type": "string"}},
    }
    required = ["thought", "action", "answer"]
    if bullet_ids:
        ids = list(dict.fromkeys(bullet_ids))
        properties["bullets"] = {"type": "array", "items": {"type": "string", "enum": ids}}
        required.append("bullets")
    return {"type": "object", "properties": properties, "required": required}


def cited(value: Any) -> tuple[str, ...]:
    """The ids a reply's ``bullets`` holds: a list of strings (others ignored, in order,
    once each); anything else is none. Which of them were shown is the agent's check."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(dict.fromkeys(x.strip() for x in value if isinstance(x, str) and x.strip()))


def parse_json_reply(text: str) -> Action | Final:
    """Read a decision; a reply the backend failed to constrain raises ParseError."""
    start, end = text.find("{"), text.rfind("}")
    try:
        # strict=False: a raw newline or tab inside a string (small models write them) is
        # the text the model meant, not a malformed reply.
        data = json.loads(text[start : end + 1], strict=False) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise ParseError(f"Your reply is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ParseError("Your reply is not a JSON object.")
    thought = str(data.get("thought") or "").strip()
    action = str(data.get("action") or "").strip()
    if not action:
        raise ParseError('Your reply has no "action".')
    if action == ANSWER:
        answer = str(data.get("answer") or "").strip()
        if not answer:
            raise ParseError(f'Your reply chose "{ANSWER}" but its "answer" is empty.')
        return Final(thought=thought, answer=answer, bullets=cited(data.get("bullets")))
    args = data.get("args") or {}
    if not isinstance(args, dict):
        raise ParseError('"args" must be a JSON object.')
    arguments = {
        str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        for k, v in args.items()
    }
    return Action(
        thought=thought, name=action, arguments=arguments, bullets=cited(data.get("bullets"))
    )
