"""The memory searches' replies written compactly hold the same JSON as ``json.dumps`` wrote.

``FactResponse``, ``EpisodeResponse`` and ``PlaybookResponse`` are written by pydantic-core
(``WireModel.compact``): no spaces after separators, UTF-8 rather than ``\\u`` escapes; the
same values (floats to the bit, ``NaN``/``Infinity`` as ``json`` writes them), the same keys
in the same order, and what a reader decodes from them is what it decoded before.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from react_mem.schema.base import WireModel
from react_mem.schema.episodes import Episode, EpisodeResponse
from react_mem.schema.facts import Fact, FactResponse
from react_mem.schema.playbook import Bullet, PlaybookResponse
from tests.support.json_values import same

FLOATS = st.floats(allow_nan=True, allow_infinity=True)
TEXTS = st.text(max_size=30)  # any code point: accents, CJK, emoji, lone surrogates


def _by_json(message: WireModel) -> bytes:
    return json.dumps(message.to_wire()).encode("utf-8")


def _read(data: bytes) -> Any:
    return json.loads(data, parse_constant=float)


FACTS = st.builds(
    Fact,
    id=TEXTS,
    content=TEXTS,
    user=st.none() | TEXTS,
    created_at=FLOATS,
    access_count=st.integers(min_value=-(2**70), max_value=2**70),
    score=st.none() | FLOATS,
    metadata=st.dictionaries(TEXTS, TEXTS, max_size=3),
    aliases=st.lists(TEXTS, max_size=3),
)
EPISODES = st.builds(Episode, goal=TEXTS, score=FLOATS, lessons=st.lists(TEXTS, max_size=3))
BULLETS = st.builds(Bullet, content=TEXTS, helpful=st.integers(0, 10**6))
REPLIES = (
    st.builds(FactResponse, facts=st.lists(FACTS, max_size=4))
    | st.builds(EpisodeResponse, episodes=st.lists(EPISODES, max_size=3))
    | st.builds(PlaybookResponse, bullets=st.lists(BULLETS, max_size=3))
)


@given(reply=REPLIES)
def test_a_reply_holds_what_json_dumps_wrote(reply: WireModel) -> None:
    data = reply.encode()
    assert same(_read(data), _read(_by_json(reply)))
    assert list(_read(data)) == list(type(reply).model_fields)  # declaration order


@given(reply=REPLIES)
def test_a_reply_decodes_as_before(reply: WireModel) -> None:
    kind = type(reply)
    try:
        before: Any = kind.decode(_by_json(reply))
    except Exception as exc:  # noqa: BLE001 - NaN, a lone surrogate: refused before too
        before = type(exc), getattr(exc, "type", None)
    try:
        now: Any = kind.decode(reply.encode())
    except Exception as exc:  # noqa: BLE001
        now = type(exc), getattr(exc, "type", None)
    if isinstance(before, tuple):
        assert now == before
    else:
        assert same(now.to_wire(), before.to_wire())


def test_the_searches_replies_are_compact_and_others_are_not() -> None:
    fact = Fact(id="f", content="café, 東京 and 1e-05", score=1e-05)
    data = FactResponse(facts=[fact]).encode()
    assert b'"facts":[{' in data and "東京".encode() in data  # no spaces, no escapes
    assert EpisodeResponse().encode().startswith(b'{"error":null,')
    assert PlaybookResponse().encode().startswith(b'{"error":null,')
    assert not any(kind.compact for kind in (Fact, Episode, Bullet))


def test_a_lone_surrogate_is_written_as_json_escapes_it() -> None:
    reply = FactResponse(facts=[Fact(id="f", content="a\udfffb")])
    assert reply.encode() == _by_json(reply)
