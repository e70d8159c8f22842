"""The memory-state seal: binding, wire round trip, and the key's one-time creation."""

from __future__ import annotations

from pathlib import Path

import pytest

from react_mem.agent.seal import StateSealer, invocation, load_key
from react_mem.errors import BadRequest, ConfigurationError
from react_mem.schema import AgentRequest, AgentStep
from react_mem.schema.agent import MemoryRef, MemoryState

REQUEST = AgentRequest(question="q", user="ada", session_id="s", conversation_id="c")
STATE = MemoryState(
    context="<memory>\n- fact\n</memory>",
    used=[MemoryRef(kind="fact", id="f1", content="fact", score=0.123456789)],
    started_at=1712345678.987654,
    steps=[AgentStep(action="lookup", arguments={"b": "2", "a": "1"}, observation="ok")],
)


def test_a_sealed_state_verifies_after_the_wire_and_only_for_its_invocation() -> None:
    sealer = StateSealer("k" * 32)
    bound = invocation(REQUEST, "default", "f1")
    wire = AgentRequest(question="q", memory=sealer.seal(STATE, bound)).encode()
    state = AgentRequest.decode(wire).memory
    assert state is not None and sealer.open(state, bound).context == STATE.context
    for change in (
        {"user": None},
        {"user": "bob"},
        {"collection": "other"},
        {"session_id": "t"},
        {"conversation_id": ""},
        {"question": "q2"},
    ):
        other = invocation(REQUEST.model_copy(update=change), "default", "f1")
        with pytest.raises(BadRequest, match="does not verify"):
            sealer.open(state, other)
    with pytest.raises(BadRequest, match="does not verify"):
        sealer.open(state, invocation(REQUEST, "acme", "f1"))
    with pytest.raises(BadRequest, match="does not verify"):
        sealer.open(state.model_copy(update={"iteration": 0, "in_tokens": 1}), bound)
    with pytest.raises(BadRequest, match="not sealed"):
        sealer.open(STATE, bound)


def test_the_key_is_created_once_and_shared_and_a_short_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "memory-state.key"
    first = load_key(None, path)
    assert load_key(None, path) == first and len(first) == 64
    assert path.stat().st_mode & 0o777 == 0o600
    assert list(path.parent.iterdir()) == [path]  # no draft left behind
    assert load_key("given" * 8, path) == "given" * 8
    with pytest.raises(ConfigurationError, match="memory_state_key"):
        StateSealer("short")
