"""A message read by pydantic-core's JSON parser reads exactly as ``json`` read it.

``WireModel.decode`` parses with ``pydantic_core.from_json`` (six times faster on a recall
request's vector) and falls back to ``json.loads`` for whatever that parser refuses: so
every message is accepted with the same values (types, key order, ``-0.0``, big integers)
and every refused one is refused with ``json``'s own words, as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from react_mem.errors import BadRequest
from react_mem.schema import base
from react_mem.schema.base import WireModel
from react_mem.schema.facts import FactRequest
from tests.support.json_values import same


class Anything(WireModel):
    value: Any = None


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**60, max_value=10**400)  # big; the digits' limit: below
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(width=32, allow_nan=False, allow_infinity=False)
    | st.text()  # lone surrogates included: json escapes them, the fast parser refuses them
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def _outcome(data: bytes) -> tuple[str, Any]:
    try:
        return "read", Anything.decode(data).model_dump()
    except BadRequest as exc:
        return "refused", (exc.type, str(exc))


def _by_json_alone(data: bytes) -> tuple[str, Any]:
    """What decoding gave before: the fast parser refusing everything, ``json`` reads."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("refused")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "from_json", refuse)
        return _outcome(data)


def _check(data: bytes) -> None:
    now, before = _outcome(data), _by_json_alone(data)
    assert now[0] == before[0], (now, before)
    if now[0] == "read":
        assert same(now[1], before[1])
    else:
        assert now == before


@given(value=VALUES, ascii_only=st.booleans(), spaced=st.booleans())
def test_a_message_reads_as_json_read_it(value: Any, ascii_only: bool, spaced: bool) -> None:
    text = json.dumps(
        {"value": value},
        ensure_ascii=ascii_only,
        separators=(", ", ": ") if spaced else (",", ":"),
    )
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate written raw: not UTF-8, refused by both
        data = text.encode("utf-8", "surrogatepass")
    _check(data)


@given(value=VALUES, cut=st.integers(min_value=0), junk=st.binary(max_size=4))
def test_a_damaged_message_is_refused_in_json_s_words(value: Any, cut: int, junk: bytes) -> None:
    data = json.dumps({"value": value}).encode()
    cut %= len(data) + 1
    _check(data[:cut] + junk + data[cut:])


@pytest.mark.parametrize(
    "data",
    [
        b'{"value": NaN}',
        b'{"value": -Infinity}',
        b'{"value": 1e400}',  # inf, as float() reads it
        b'\xef\xbb\xbf{"value": 1}',  # a byte-order mark: json reads it
        '{"value": "\u00e9"}'.encode("utf-16"),  # and UTF-16
        b'{"value": 1' + b"0" * 4299 + b"}",  # at the integer digits' limit
        b'{"value": 1' + b"0" * 4300 + b"}",  # past it
        b'{"value": 1, "value": [2]}',
        b'{"value": 1} x',
        b'{"value": "a\tb"}',
        b'{"value": "\\ud83d\\ude00"}',  # an escaped surrogate pair
    ],
)
def test_edge_cases_read_as_json_read_them(data: bytes) -> None:
    _check(data)


def test_a_lone_surrogate_is_still_read_then_refused_as_not_encodable() -> None:
    with pytest.raises(BadRequest) as refused:
        Anything.decode(b'{"value": "\\udfff"}')
    assert "value" in str(refused.value) and "not valid JSON" not in str(refused.value)
    _check(b'{"value": "\\udfff"}')


def test_a_recall_request_reads_back_the_same() -> None:
    vector = [(-1) ** n * n / 383 for n in range(384)]
    request = FactRequest(operation="retrieve", user="ada", query="where?", vector=vector)
    assert FactRequest.decode(request.encode()) == request
