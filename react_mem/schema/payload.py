"""Checks on a decoded JSON payload before validation: nesting depth and encodable text.

Both are bad input, not transient failures: a payload nested thousands deep makes recursive
code (pydantic, ``json.dumps``, handlers) raise ``RecursionError``, and a string holding a
lone UTF-16 surrogate (valid JSON: ``"\\udfff"``) cannot be encoded as UTF-8, so the
embedder, the store and HTTP clients fail on it on every retry.
"""

from __future__ import annotations

import re
from typing import Any

from react_mem.schema.errors import ErrorType

#: Deepest nesting a message may have; TrustGraph's deepest (quoted triples in explain
#: messages) is well under this.
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
#: How a surrogate can reach a decoded string: as a JSON escape (strict UTF-8 has none).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def needs_check(data: bytes, *, max_depth: int = MAX_DEPTH) -> bool:
    """False when ``data`` can break neither limit: fewer brackets than the depth limit and
    no surrogate escape. Two byte scans, so most messages skip the walk."""
    brackets = data.count(b"[") + data.count(b"{")
    return brackets >= max_depth or _SURROGATE_ESCAPE.search(data) is not None


class PayloadError(ValueError):
    """The payload breaks a limit; ``path`` names the field (``history.0.thought``)."""

    def __init__(self, path: str, problem: str, *, type: ErrorType) -> None:
        super().__init__(f"{path or '<root>'}: {problem}")
        self.path = path
        self.type: ErrorType = type


def check_payload(payload: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`PayloadError` for the first field nested too deep or not encodable.

    Iterative, so the check itself cannot overflow the stack.
    """
    pending: list[tuple[Any, str, int]] = [(payload, "", 0)]
    while pending:
        value, path, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value, path)
            continue
        if not isinstance(value, dict | list):
            continue
        if depth >= max_depth:
            raise PayloadError(path, f"nested deeper than {max_depth} levels", type="malformed")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            where = f"{path}.{_printable(key)}" if path else _printable(key)
            if isinstance(key, str):
                _check_text(key, where)
            pending.append((item, where, depth + 1))


def _check_text(text: str, path: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise PayloadError(
            path,
            f"text is not valid Unicode (lone surrogate U+{ord(found.group()):04X} "
            f"at character {found.start()})",
            type="invalid",
        )


def _printable(key: object, limit: int = 40) -> str:
    """A key as it may appear in an error message: escaped, and short."""
    text = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"
