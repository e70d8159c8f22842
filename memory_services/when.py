"""Time expressions in a question, as a range of epoch seconds (UTC) that a search may boost.

Recognised, case-insensitively: a full date ("7 May 2023", "May 7, 2023", "2023-05-07"), a
month of a year ("June 2023", "in June of 2023"), a year ("in 2022"), and relative spans
against ``now`` ("yesterday", "last week", "last weekend", "last month", "last year",
"this year", "N days/weeks/months/years ago"). A bare month ("in June") names no year and
is not read. The first expression found wins.

Records are dated when the thing happened or was told (a conversation turn's time, a
fact's ``valid_at``); one is often told of a little after it happened, so :func:`span`
widens a range by ``after`` seconds past its end. A question that asks when (:func:`asks_when`:
"when did ...", "how long ...", "what year ...") names no range, but is answered by a record
that tells a time relative to its own (:func:`tells_time`: "yesterday", "last week", "on
Friday"), so a search may boost those.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache

DAY = 86_400.0
_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): n for n, name in enumerate(calendar.month_abbr) if name}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"((?:19|20)\d\d)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(rf"\b{_YEAR}-(\d\d)-(\d\d)\b")),
    ("day-month-year", re.compile(rf"\b{_DAY}\s+{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("month-day-year", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)),
    ("month-year", re.compile(rf"\b{_MONTH}\s+(?:of\s+)?{_YEAR}\b", re.I)),
    (
        "ago",
        re.compile(
            r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b", re.I
        ),
    ),
    ("last", re.compile(r"\b(yesterday|last\s+(?:week(?:end)?|month|year)|this\s+year)\b", re.I)),
    ("year", re.compile(rf"\b(?:in|during|of|since|before|after)\s+{_YEAR}\b", re.I)),
]
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _epoch(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _month_end(year: int, month: int) -> float:
    return _epoch(year, month, calendar.monthrange(year, month)[1]) + DAY


def parse(text: str, now: float) -> tuple[float, float] | None:
    """The range [start, end) the first time expression in ``text`` names, or None."""
    for kind, pattern in _PATTERNS:
        found = pattern.search(text)
        if found is None:
            continue
        try:
            return _range(kind, found.groups(), now)
        except ValueError:  # "31 February 2023": not a date
            continue
    return None


def _range(kind: str, groups: tuple[str, ...], now: float) -> tuple[float, float]:
    if kind == "iso":
        start = _epoch(int(groups[0]), int(groups[1]), int(groups[2]))
        return start, start + DAY
    if kind == "day-month-year":
        start = _epoch(int(groups[2]), _MONTHS[groups[1].lower()], int(groups[0]))
        return start, start + DAY
    if kind == "month-day-year":
        start = _epoch(int(groups[2]), _MONTHS[groups[0].lower()], int(groups[1]))
        return start, start + DAY
    if kind == "month-year":
        year, month = int(groups[1]), _MONTHS[groups[0].lower()]
        return _epoch(year, month, 1), _month_end(year, month)
    if kind == "year":
        return _epoch(int(groups[0]), 1, 1), _epoch(int(groups[0]) + 1, 1, 1)
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "ago":
        count = _COUNTS.get(groups[0].lower()) or int(groups[0])
        days = count * _UNITS[groups[1].lower()]
        centre = today - timedelta(days=days)
        slack = timedelta(days=max(1, days // 4))  # "3 weeks ago" is roughly that
        return (centre - slack).timestamp(), (centre + slack + timedelta(days=1)).timestamp()
    phrase = " ".join(groups[0].lower().split())
    if phrase == "yesterday":
        return (today - timedelta(days=1)).timestamp(), today.timestamp()
    if phrase in ("last week", "last weekend"):
        return (today - timedelta(days=14)).timestamp(), today.timestamp()
    if phrase == "last month":
        return (today - timedelta(days=62)).timestamp(), today.timestamp()
    if phrase == "this year":
        return _epoch(today.year, 1, 1), now
    return _epoch(today.year - 1, 1, 1), _epoch(today.year, 1, 1)  # last year


def span(text: str, now: float, *, after: float = 0.0) -> tuple[float, float] | None:
    """:func:`parse`, the end widened by ``after`` seconds."""
    found = parse(text, now)
    return None if found is None else (found[0], found[1] + after)


_TELLS = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately|weekend"
    r"|(?:last|next|this|past)\s+(?:week|month|year|summer|winter|spring|fall|autumn|night|time)"
    r"|" + "|".join(calendar.day_name) + r")s?\b"
    r"|\b(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|several)"
    r"\s+(?:day|week|month|year)s?\b",  # a duration answers "how long"
    re.I,
)
_ASKS = re.compile(
    r"^\W*when\b|\bhow long\b|\b(?:what|which)\s+(?:year|month|week|day|date|time)\b"
    r"|\bhow many\s+(?:days|weeks|months|years)\b",
    re.I,
)


@lru_cache(maxsize=2048)  # a fact batch reads its texts before its write lock (facts.ingest)
def tells_time(text: str) -> bool:
    """Whether ``text`` places what it says in time relative to when it was said
    ("yesterday", "last week", "3 days ago", "recently", "on Friday", "for two years"): with
    the record's date, that answers "when" or "how long". Absolute dates are left out: a
    question's words or its named time find those, and a record stamped with its date would
    always count."""
    return _TELLS.search(text) is not None


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a time ("When did ...", "How long ...", "What year ...",
    "How many weeks ..."): records that tell one are likelier answers."""
    return _ASKS.search(question) is not None
