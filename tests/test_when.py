"""Time expressions in questions (memory_services.when)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_services import when

NOW = datetime(2024, 3, 15, 12, tzinfo=UTC).timestamp()


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did Maria donate in December 2023?", "2023-12-01", "2024-01-01"),
        ("What did she show on October 13, 2023?", "2023-10-13", "2023-10-14"),
        ("Who came to dinner on 3 May, 2023?", "2023-05-03", "2023-05-04"),
        ("Anything on 2023-05-07?", "2023-05-07", "2023-05-08"),
        ("What happened in June of 2022", "2022-06-01", "2022-07-01"),
        ("Where did John go in 2022?", "2022-01-01", "2023-01-01"),
        ("Where did John travel last year?", "2023-01-01", "2024-01-01"),
        ("What broke yesterday?", "2024-03-14", "2024-03-15"),
        ("What did we plan last week?", "2024-03-01", "2024-03-15"),
    ],
)
def test_a_named_time_becomes_a_range(question: str, start: str, end: str) -> None:
    assert when.parse(question, NOW) == (day(start), day(end))


def test_no_time_or_no_year_names_no_range() -> None:
    for question in ["When did Melanie go camping in June?", "What is Carol's pet?", "May I?"]:
        assert when.parse(question, NOW) is None
    assert when.parse("about 2 weeks ago", NOW) is not None
    start, end = when.span("in 2022", NOW, after=when.DAY)  # type: ignore[misc]
    assert end - start == 366 * when.DAY


def test_a_record_tells_a_time_relative_to_its_own() -> None:
    for text in [
        "I went to a support group yesterday",
        "We had a blast last year at the Pride fest",
        "Started running three weeks ago",
        "See you on Friday!",
        "I've been painting a lot recently",
        "We've been friends for four years",
    ]:
        assert when.tells_time(text), text
    for text in ["I may go", "Caroline (1:56 pm on 8 May, 2023): It was great", "Nice time!"]:
        assert not when.tells_time(text), text


def test_a_question_asks_when() -> None:
    for question in [
        "When did Caroline go to the support group?",
        "How long has Melanie been practising art?",
        "What year did John start surfing?",
        "Which month was John in Italy?",
        "How many weeks passed between the two adoptions?",
    ]:
        assert when.asks_when(question), question
    for question in ["What is Carol's pet?", "Where did she go when it rained?"]:
        assert not when.asks_when(question), question
