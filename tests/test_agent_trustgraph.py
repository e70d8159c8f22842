"""agent-manager parity, driven by TrustGraph 2.11's own AgentClient over the embedded
broker and read by its deserialiser: message ids are agent-manager's provenance URIs,
errors are ``agent-error``, an empty question is run."""

from __future__ import annotations

from pathlib import Path

import pytest
from trustgraph.provenance import agent_final_uri, agent_observation_uri, agent_thought_uri
from trustgraph.schema import AgentRequest as TGAgentRequest

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack
from tests.support.scripted_llm import Script, error_reply, replies
from tests.support.trustgraph import converse, trustgraph_agent, trustgraph_backend

pytestmark = pytest.mark.broker

LOOKUP = {"type": "knowledge-query", "name": "lookup", "description": "Ask the knowledge graph"}


def tool_then_answer() -> Script:
    return replies(
        'Thought: ask the graph\nAction: lookup\nArgs: {"question": "capital of France"}',
        "Thought: I know now\nFinal Answer: Paris",
    )


def without_explain(responses: list[object]) -> list[object]:
    return [r for r in responses if getattr(r, "message_type", "") != "explain"]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streaming"])
async def test_message_ids_are_agent_managers(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str, streaming: bool
) -> None:
    async with (
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=tool_then_answer(),
            services=(),
            tools={"lookup": LOOKUP},
        ) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_agent(backend, stack.topics["agent"]) as agent,
    ):
        session = f"s-{unique}"
        request = TGAgentRequest(
            question="Capital of France?", session_id=session, streaming=streaming
        )
        got = without_explain(await converse(agent, request))
    ids = {(r.message_type, r.message_id) for r in got}  # type: ignore[attr-defined]
    assert ids == {
        ("thought", agent_thought_uri(session, 1)),
        ("observation", agent_observation_uri(session, 1)),
        ("thought", agent_thought_uri(session, 2)),
        ("answer", agent_final_uri(session)),
    }


async def test_errors_are_agent_error_with_the_detail_in_the_message(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with (
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=lambda _: error_reply("model overloaded"),
            services=(),
            agent_settings={"llm_deadline": 5},
        ) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_agent(backend, stack.topics["agent"]) as agent,
    ):
        [error] = without_explain(await converse(agent, TGAgentRequest(question="Hello?")))
        assert error.message_type == "error" and error.end_of_dialog  # type: ignore[attr-defined]
        assert error.error.type == "agent-error"  # type: ignore[attr-defined]
        assert "llm-error: " in error.error.message  # type: ignore[attr-defined]
        assert "model overloaded" in error.content  # type: ignore[attr-defined]
        # TrustGraph's client raises the message, as with agent-manager.
        with pytest.raises(RuntimeError, match="model overloaded"):
            await agent.invoke("Hello?", timeout=60)


async def test_an_empty_question_is_run_as_agent_manager_runs_it(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    seen: list[TextCompletionRequest] = []

    def llm(request: TextCompletionRequest) -> str:
        seen.append(request)
        return "Thought: nothing was asked\nFinal Answer: Ask me anything."

    async with (
        agent_stack(transport, tmp_path, unique, script=llm) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_agent(backend, stack.topics["agent"]) as agent,
    ):
        assert await agent.invoke("", timeout=60) == "Ask me anything."
    assert seen[0].prompt.endswith(
        "Question: \n\nThink step by step and decide on the next action or give the final answer."
    )
