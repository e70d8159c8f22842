"""One normalisation of user ids where they enter (issue 26, finding 11): an id with
zero-width or other format characters, in decomposed (NFD) or composed (NFC) form, or in
full-width letters, is the same owner as its plain form, so a user cannot be split into
owners that ``forget`` does not reach. Property tests over generated look-alikes at the
wire boundary; fact-memory over the real broker (both where installed) for ``forget``.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.errors import BadRequest
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.forget import ForgetRequest
from react_mem.schema.playbook import PlaybookRequest
from react_mem.schema.scope import Scope, owner_id
from tests.support.memory_services import MovableClock, serving, topics

#: Invisible format characters (Unicode category Cf) a look-alike may hide in an id.
FORMAT = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u202a\u202c\u2066\u2069\u180e"
BASES = ("alice", "zoë", "José Núñez", "Björn", "ana-maría_7")


@st.composite
def look_alike(draw: st.DrawFn, base: str) -> str:
    """``base`` in NFC or NFD, some ASCII letters full-width, format characters inserted."""
    form = draw(st.sampled_from(["NFC", "NFD"]))
    out = []
    for char in unicodedata.normalize(form, base):
        wide = char.isascii() and char.isalnum() and draw(st.booleans())
        out.append(chr(ord(char) + 0xFEE0) if wide else char)
        out.append(draw(st.text(alphabet=FORMAT, max_size=2)))
    return draw(st.text(alphabet=FORMAT, max_size=2)) + "".join(out)


look_alikes = st.sampled_from(BASES).flatmap(lambda b: st.tuples(st.just(b), look_alike(b)))


@given(look_alikes)
def test_every_look_alike_enters_as_its_plain_id(pair: tuple[str, str]) -> None:
    base, seen = pair
    plain = unicodedata.normalize("NFC", base)
    wire = json.dumps({"operation": "list", "user": seen}).encode()
    assert FactRequest.decode(wire).user == plain
    assert ForgetRequest.model_validate({"user": seen}).user == plain
    assert Scope("ws", "c", seen).user == plain
    shared = PlaybookRequest.model_validate(
        {"operation": "grant", "playbook_owner": seen, "grantees": [seen, "bob"]}
    )
    assert shared.playbook_owner == plain and shared.grantees == [plain, "bob"]


@given(st.text())
def test_the_normalisation_is_idempotent(text: str) -> None:
    assert owner_id(owner_id(text)) == owner_id(text)


def test_case_and_visible_spaces_still_tell_owners_apart() -> None:
    assert {owner_id(u) for u in ("Alice", "alice", " alice", "al ice")} == {
        "Alice",
        "alice",
        " alice",
        "al ice",
    }


def test_an_id_of_invisible_characters_only_is_refused() -> None:
    with pytest.raises(BadRequest, match="invisible characters only"):
        FactRequest.decode(json.dumps({"operation": "list", "user": "\u200b\u2060"}).encode())


#: Look-alikes of "alice" and "zoë" a client could send (one of each kind the generator makes).
SPELLINGS = {
    "alice": [
        "alice",
        "alice\u200b",
        "\ufeffal\u00adice",
        "\uff41\uff4c\uff49\uff43\uff45",
        "ali\u2060ce",
    ],
    "zoë": ["zo\u00eb", "zoe\u0308", "zo\u200de\u0308"],
}


async def test_forget_reaches_every_spelling_of_a_user(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with serving(
        FactMemoryProcessor,
        FactResponse,
        transport,
        pid=f"fact-memory-{unique}",
        queues={"ws": topics("fact-memory", unique, "ws")},
        data_dir=tmp_path / "facts",
        registry=registry,
        clock=MovableClock(),
        metrics=False,
    ) as svc:
        for user, spellings in [*SPELLINGS.items(), ("bob", ["bob"])]:
            for n, spelled in enumerate(spellings):
                fact = FactInput(content=f"{user} keeps note number {n} in the red folder.")
                reply = await svc.ask(
                    FactRequest(operation="store", user=spelled, facts=[fact]), "ws"
                )
                assert reply.error is None

        async def listed(user: str) -> int:
            reply = await svc.ask(FactRequest(operation="list", user=user, limit=100), "ws")
            return len(reply.facts)

        assert await listed("alice") == len(SPELLINGS["alice"])
        assert await listed("zoe\u0308") == len(SPELLINGS["zoë"])  # asked decomposed
        for user in SPELLINGS:
            forgot = await svc.ask(FactRequest(operation="forget", user=user), "ws")
            assert forgot.error is None and forgot.deleted == len(SPELLINGS[user])
        assert [await listed(s) for s in (*SPELLINGS["alice"], *SPELLINGS["zoë"])] == [0] * 8
        assert await listed("bob") == 1
