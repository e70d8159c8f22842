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

CORRECTION = f"Reply with one JSON object only, as described: {FORMAT}"


def schema(tool_names: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of a decision: ``action`` is one of the tools or the answer.
    ``answer`` is always required, right after ``action`` (a grammar writes required keys
    in order): a small model otherwise chooses the answer and ends the object without one;
    with a tool it is ignored. (No ``maxLength``: llama.cpp expands it into a grammar too
    large to load.)"""
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "action": {"type": "string", "enum": [*tool_names, ANSWER]},
            "answer": {"type": "string"},
            "args": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["thought", "action", "answer"],
    }


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
        return Final(thought=thought, answer=answer)
    args = data.get("args") or {}
    if not isinstance(args, dict):
        raise ParseError('"args" must be a JSON object.')
    arguments = {
        str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        for k, v in args.items()
    }
    return Action(thought=thought, name=action, arguments=arguments)
