"""Plain-text tables for memory listings: fixed columns, the last one cut to fit."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from react_mem.commands.common import one_line


def table(out: TextIO, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns; the last (free text) is cut to the terminal's width on a
    terminal, and whole (on one line) off one, for scripts and pipes."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers[:-1])]
    fixed = sum(widths) + 2 * len(widths)
    free = max(shutil.get_terminal_size((100, 24)).columns - fixed, 20)
    if not _is_terminal(out):
        free = sys.maxsize
    for row in [headers, *rows]:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        print("  ".join([*cells, one_line(row[-1], free)]).rstrip(), file=out)


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except ValueError:  # closed
        return False


def when(epoch: float | None) -> str:
    """Local time to the minute, or ``-``."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch else "-"


def score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
