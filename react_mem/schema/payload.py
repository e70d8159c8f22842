"""Checks on a decoded JSON payload before validation: nesting depth, encodable text and
(for requests that declare one) how many values it holds.

Both are bad input, not transient failures: a payload nested thousands deep makes recursive
code (pydantic, ``json.dumps``, handlers) raise ``RecursionError``, and a string holding a
lone UTF-16 surrogate (valid JSON: ``"\\udfff"``) cannot be encoded as UTF-8, so the
embedder, the store and HTTP clients fail on it on every retry. A count of values bounds
the work one message can cost before a service sees it: within the bus's 5 MiB, a list of
1.7 million empty objects took a minute to validate, on the loop every service shares.
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


def may_nest(data: bytes, *, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``data`` has brackets enough to nest ``max_depth`` deep (with
    :func:`may_hold_surrogates`: two byte scans, so most messages skip the walk)."""
    return data.count(b"[") + data.count(b"{") >= max_depth


def may_exceed(data: bytes, max_values: int) -> bool:
    """Whether ``data`` can hold more than ``max_values`` values (each list item and object
    field but the first of its container follows a comma)."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") > max_values


def may_hold_surrogates(data: bytes) -> bool:
    """Whether a decoded string of ``data`` can hold a lone surrogate (only a JSON escape
    can put one there)."""
    return _SURROGATE_ESCAPE.search(data) is not None


class PayloadError(ValueError):
    """The payload breaks a limit; ``path`` names the field (``history.0.thought``)."""

    def __init__(self, path: str, problem: str, *, type: ErrorType) -> None:
        super().__init__(f"{path or '<root>'}: {problem}")
        self.path = path
        self.type: ErrorType = type


def check_payload(
    payload: Any,
    *,
    max_depth: int = MAX_DEPTH,
    texts: bool = True,
    max_values: int | None = None,
) -> None:
    """Raise :class:`PayloadError` for the first field of ``payload`` (decoded JSON: dicts,
    lists and scalars) nested too deep or (``texts``: the strings are checked too) not
    encodable, or (``max_values``) at the container whose items take the payload past that
    many list items and object fields in all.

    Iterative, so the check itself cannot overflow the stack; it stops at the first
    container past ``max_values``, so its own cost is bounded too. A field's path is
    spelled out only for the error (a large message has thousands of keys).
    """
    if not texts and max_values is None and not _too_deep(payload, max_depth):
        return  # the common case (a big explain message): depths only, no paths kept
    pending: list[tuple[Any, tuple[object, ...]]] = [(payload, ())]
    values = 0
    while pending:
        value, keys = pending.pop()
        if isinstance(value, str):
            _check_text(value, keys)
            continue
        if not isinstance(value, dict | list):
            continue
        if len(keys) >= max_depth:
            raise PayloadError(
                _path(keys), f"nested deeper than {max_depth} levels", type="malformed"
            )
        values += len(value)
        if max_values is not None and values > max_values:
            raise PayloadError(
                _path(keys),
                f"the message holds more than {max_values} values (list items and object "
                f"fields); the limit is {max_values}",
                type="too-large",
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if texts and isinstance(key, str):
                _check_text(key, (*keys, key))
            if isinstance(item, dict | list) or (texts and isinstance(item, str)):
                pending.append((item, (*keys, key)))


def _too_deep(payload: Any, max_depth: int) -> bool:
    """Whether a container of ``payload`` sits ``max_depth`` levels down (the walk below
    without its paths: three times faster on a message of hundreds of RDF terms)."""
    if type(payload) is not dict and type(payload) is not list:
        return False
    pending: list[tuple[Any, int]] = [(payload, 0)]
    pop, push = pending.pop, pending.append
    while pending:
        value, depth = pop()
        if depth >= max_depth:
            return True
        depth += 1
        # Exact types: what ``json.loads`` makes (isinstance is most of this loop's time).
        for item in value.values() if type(value) is dict else value:
            kind = type(item)
            if kind is dict or kind is list:
                push((item, depth))
    return False


def _path(keys: tuple[object, ...]) -> str:
    return ".".join(_printable(key) for key in keys)


def _check_text(text: str, keys: tuple[object, ...]) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise PayloadError(
            _path(keys),
            f"text is not valid Unicode (lone surrogate U+{ord(found.group()):04X} "
            f"at character {found.start()})",
            type="invalid",
        )


def _printable(key: object, limit: int = 40) -> str:
    """A key as it may appear in an error message: escaped, and short."""
    text = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"
