"""The agent's two small ACE hooks: a request names its playbook context (seed 001), and
episodes are recalled by the question and the invocation's state (seed 004)."""

from __future__ import annotations

from typing import Any, cast

from react_mem.agent.config import AgentMemConfig
from react_mem.agent.invocation import Invocation
from react_mem.agent.items import Item
from react_mem.agent.recall import MemoryRecall
from react_mem.agent.sources import STATE_CHARS, Ask, recent_state
from react_mem.processor.flow import Flow
from react_mem.schema import AgentStep
from react_mem.schema.agent import AgentRequest
from tests.test_agent_sources import SCOPE, FlowWith, source


class _Flow:
    workspace = "ws"


def test_a_request_names_its_context_scope_and_absent_keeps_the_workspaces() -> None:
    flow = cast(Flow, _Flow())
    cfg = AgentMemConfig(**{"playbook-context-scope": "board-games"})
    named = Invocation.of(AgentRequest(question="q", context_scope_id="chess"), flow, cfg)
    assert named.cfg.playbook_context_scope == "chess"
    assert cfg.playbook_context_scope == "board-games"  # the workspace's config is unchanged
    plain = Invocation.of(AgentRequest(question="q"), flow, cfg)
    assert plain.cfg.playbook_context_scope == "board-games"
    # On the wire it is optional: a TrustGraph request without it decodes to None.
    assert AgentRequest.decode(b'{"question": "q"}').context_scope_id is None
    assert AgentRequest.decode(b'{"context_scope_id": ""}').context_scope_id == ""


def test_the_state_is_the_last_steps_as_text() -> None:
    steps = [
        AgentStep(thought=f"thought {n}", action="search", observation=f"seen {n}")
        for n in range(5)
    ]
    state = recent_state(steps)
    assert state.splitlines() == [f"thought {n} search seen {n}" for n in (2, 3, 4)]
    assert recent_state([]) == ""
    long = [AgentStep(observation="x" * 5000)]
    assert len(recent_state(long)) == STATE_CHARS


async def test_recall_hands_every_source_the_state() -> None:
    asked: dict[str, Ask] = {}

    async def fetch(ask: Ask) -> list[Item]:
        asked["a"] = ask
        return []

    flow = cast(Flow, FlowWith("a-memory-request"))
    recall = MemoryRecall(flow, cast(Any, None), AgentMemConfig(), [source("a", fetch)])
    await recall.recall("what next?", SCOPE, "thought 1 search seen 1")
    assert (asked["a"].question, asked["a"].state) == ("what next?", "thought 1 search seen 1")
    await recall.recall("what next?", SCOPE)
    assert asked["a"].state == ""
