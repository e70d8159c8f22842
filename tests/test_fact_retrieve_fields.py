"""A retrieval returns each fact as a read by id does: its search leaves out of the engine's
payloads only keys no fact shows (``records.UNRANKED``), and reads each record's owner
without building a scope where the keys are plain. Fact memory in process on the real edge
store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_services.facts.access_overlay import owner_key, owner_of
from memory_services.store.base import Scope
from react_mem.errors import BadRequest
from react_mem.schema.facts import Fact, FactInput
from tests.test_fact_access_store import fact_memory

CHAT = [
    "Ann (1:56 pm on 8 May, 2023): I moved to Lisbon last week. The flat is small but bright.",
    "Ann (2:01 pm on 8 May, 2023): My sister Carol visited in June 2022.",
    "Ann (2:03 pm on 8 May, 2023): Do you like tortoises?",
]


def _shown(fact: Fact) -> dict[str, Any]:
    return fact.model_dump(exclude={"score"})


@pytest.mark.parametrize("user", ["ann", "zoe\u0308", None])
async def test_a_retrieved_fact_is_the_fact_a_read_by_id_returns(
    tmp_path: Path, user: str | None
) -> None:
    scope = Scope("ws-a", "default", user)
    async with fact_memory(tmp_path) as m:
        inputs = [
            FactInput(
                content=text,
                metadata={"turn": str(n)},
                context="what happened lately?",
                valid_at=1_683_000_000.0 + n,
            )
            for n, text in enumerate(CHAT)
        ]
        stored, _ = await m.memory.store(scope, inputs, sequence=True)
        home = await m.add(scope, "I live in Porto.")
        await m.memory.update(scope, home, FactInput(content="I live in Lisbon."))
        queries = ["Where did Ann move?", "What did I live in before?", "when did Carol visit?"]
        for query in queries:
            m.clock.advance(1)
            found = await m.memory.retrieve(scope, query=query, top_k=10)
            assert found and all(f.score is not None for f in found)
            ids = [f.id for f in found]
            read, missing = await m.memory.get(scope, ids)
            assert not missing
            assert [_shown(f) for f in found] == [_shown(f) for f in read]
        assert {s.id for s in stored} <= {f.id for f in found}


payload_values = st.none() | st.integers() | st.text(max_size=6) | st.sampled_from(["ann", ""])


@settings(max_examples=300, deadline=None)
@given(payload_values, payload_values, payload_values, payload_values)
def test_a_records_owner_is_the_owner_of_its_scope(
    workspace: object, collection: object, user: object, conversation: object
) -> None:
    keys = ("scope_workspace", "scope_collection", "scope_user", "scope_conversation")
    values = (workspace, collection, user, conversation)
    payload = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
    try:
        expected = owner_key(Scope.of_payload(payload))
    except BadRequest as exc:
        with pytest.raises(type(exc)):
            owner_of(payload)
        return
    assert owner_of(payload) == expected
