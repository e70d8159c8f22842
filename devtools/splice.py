"""Splicing generated parts into files that are otherwise written by hand: between marker
lines, below a marker line, after a leading comment, or into one known JSON object."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

#: The Qdrant-latency alert's selector of the memory services that keep vectors there.
ALERT_SELECTOR = re.compile(r'(tg_consumer_request_duration_seconds_bucket\{processor=~")[^"]*(")')
SCHEMA_PROCESSORS = """    "processors": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
"""


def alerts(path: Path, watched: Sequence[str]) -> str:
    """The alerts with the Qdrant-latency alert watching the services ``watched``."""
    text = path.read_text(encoding="utf-8")
    new, found = ALERT_SELECTOR.subn(lambda m: m[1] + "|".join(watched) + m[2], text)
    if found != 1:
        raise SystemExit(f"{path}: expected one {ALERT_SELECTOR.pattern!r}, found {found}")
    return new


def between(path: Path, begin: str, end: str, content: str) -> str:
    """``path`` with what lies between its ``begin`` and ``end`` lines replaced."""
    text = path.read_text(encoding="utf-8")
    head, found, rest = text.partition(begin + "\n")
    _, found_end, tail = rest.partition(end + "\n")
    if not (found and found_end):
        raise SystemExit(f"{path}: no marker lines {begin!r} ... {end!r}")
    return head + found + content + found_end + tail


def schema(path: Path, names: Sequence[str]) -> str:
    """The chart's values schema accepting the processor ``names``."""
    text = path.read_text(encoding="utf-8")
    head, found, rest = text.partition(SCHEMA_PROCESSORS)
    _, found_end, tail = rest.partition("\n      }\n")
    if not (found and found_end):
        raise SystemExit(f"{path}: no processors.properties object in its expected shape")
    ref = '{"$ref": "#/definitions/processor"}'
    body = ",\n".join(f'        "{name}": {ref}' for name in names)
    return head + found + body + found_end + tail


def header(path: Path, marker: str | None) -> str:
    """The hand-written part of a generated file: up to ``marker``, or its leading comments."""
    text = path.read_text(encoding="utf-8")
    if marker is not None:
        head, found, _ = text.partition(marker + "\n")
        if not found:
            raise SystemExit(f"{path}: no marker line {marker!r}")
        return head + found
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines[: _comments(lines)])


def _comments(lines: list[str]) -> int:
    return next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
