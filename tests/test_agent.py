"""The agent end to end over the real broker: a scripted LLM as the test double, the real
memory services, store and embedder around it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import AgentResponse, TextCompletionRequest
from tests.support.agent_stack import agent_stack, raw_exchange

pytestmark = pytest.mark.broker

LOOKUP = {
    "type": "knowledge-query",
    "name": "lookup",
    "description": "Ask the knowledge graph",
}
ANSWER = "Paris.\n\n- It is the capital\n- and the largest city"


def reasoning(*replies: str):  # type: ignore[no-untyped-def]
    """An LLM script: agent prompts get ``replies`` in order (the last repeats)."""
    remaining = list(replies)

    def script(request: TextCompletionRequest) -> str:
        if not request.system.startswith("You are a helpful agent"):
            return "Summary: earlier steps looked things up."
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    return script


def tool_then_answer():  # type: ignore[no-untyped-def]
    return reasoning(
        'Thought: I should ask the graph\nAction: lookup\nArgs: {"question": "capital of France"}',
        f"Thought: I know it now\nFinal Answer: {ANSWER}",
    )


# Exactly what TrustGraph's client sends: dataclass_to_dict(AgentRequest(...)) as JSON.
TRUSTGRAPH_REQUEST = {
    "question": "What is the capital of France?",
    "state": "",
    "group": None,
    "history": [],
    "collection": "default",
    "streaming": False,
    "session_id": "",
    "conversation_id": "",
    "pattern": "",
    "task_type": "",
    "framing": "",
    "correlation_id": "",
    "parent_session_id": "",
    "subagent_goal": "",
    "expected_siblings": 0,
}


async def test_a_raw_trustgraph_request_gets_trustgraphs_response_stream(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=tool_then_answer(),
        services=(),
        tools={"lookup": LOOKUP},
    ) as stack:
        payload = json.dumps(TRUSTGRAPH_REQUEST).encode()
        got = await raw_exchange(transport, stack.topics["agent"], payload)

    # agent-manager's order: each step's explain event (its provenance) around its message.
    kinds = [(m["message_type"], m["end_of_message"], m["end_of_dialog"]) for m in got]
    assert kinds == [
        ("explain", False, False),  # the question
        ("thought", True, False),
        ("explain", False, False),  # the action
        ("observation", True, False),
        ("explain", False, False),  # the observation
        ("thought", True, False),
        ("explain", False, False),  # the conclusion
        ("answer", True, True),
    ]
    got = [m for m in got if m["message_type"] != "explain"]
    assert got[0]["content"] == "I should ask the graph"
    assert got[1]["content"] == "KNOWLEDGE about capital of France"
    assert got[3]["content"] == ANSWER  # multi-line answer intact
    assert got[3]["error"] is None and got[3]["in_token"] > 0
    assert set(got[3]) >= {"explain_id", "explain_triples", "message_id", "out_token", "model"}
    assert stack.graph_rag.queries[0].collection == "default"


async def test_streaming_sends_chunks_then_a_terminal_answer(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=tool_then_answer(),
        services=(),
        tools={"lookup": LOOKUP},
    ) as stack:
        got = await stack.ask("What is the capital of France?", streaming=True)

    assert got[-1].message_type == "answer" and got[-1].content == ""
    assert got[-1].end_of_message and got[-1].end_of_dialog
    assert not any(r.end_of_dialog for r in got[:-1])
    answer_chunks = [r for r in got if r.message_type == "answer" and not r.end_of_message]
    assert len(answer_chunks) > 1
    assert "".join(r.content for r in answer_chunks) == ANSWER
    thoughts = [r for r in got if r.message_type == "thought"]
    first_thought = thoughts[0].message_id
    assert "".join(r.content for r in thoughts if r.message_id == first_thought) == (
        "I should ask the graph"
    )
    assert [r.end_of_message for r in thoughts if r.message_id == first_thought][-1]
    observations = [r for r in got if r.message_type == "observation"]
    assert [o.content for o in observations] == ["KNOWLEDGE about capital of France"]


async def test_ids_and_memory_fields_are_carried_through_every_iteration(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport, tmp_path, unique, script=tool_then_answer(), tools={"lookup": LOOKUP}
    ) as stack:
        got = await stack.ask(
            "What is the capital of France?",
            conversation_id="conv-1",
            session_id="sess-1",
            user="ada",
            collection="geo",
        )
        assert got[-1].content == ANSWER
        conversation = stack.services["conversation-memory"]
        # The turn was appended under the request's ids after the answer.
        from react_mem.schema.conversations import ConversationRequest

        request = ConversationRequest(
            operation="get", collection="geo", user="ada", conversation_id="conv-1"
        )
        # The append follows the answer (screened for PII first): wait for it, bounded.
        for _ in range(100):
            reply = await conversation_get(stack, request)
            if reply.conversation is not None:
                break
            await asyncio.sleep(0.05)
        assert conversation is not None
    assert reply.conversation is not None
    [turn] = reply.conversation.turns
    assert (turn.turn_id, turn.session_id, turn.query) == (
        "sess-1",
        "sess-1",
        "What is the capital of France?",
    )
    assert turn.answer == ANSWER and "lookup" in turn.summary
    assert stack.graph_rag.queries[0].collection == "geo"


async def conversation_get(stack, request):  # type: ignore[no-untyped-def]
    from react_mem.bus.rpc import RequestResponseClient
    from react_mem.schema.conversations import ConversationResponse

    topics = stack.topics["conversation-memory"]
    client = RequestResponseClient(
        stack.transport, topics["request"], topics["response"], ConversationResponse
    )
    await client.start()
    try:
        return await client.request(request, timeout=20)
    finally:
        await client.close()


async def test_with_the_memory_services_stopped_the_agent_still_answers(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    script = reasoning("Thought: easy\nFinal Answer: 42")
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=script,
        running=(),  # the flow names every memory service; none runs
        agent_mem={"memory-timeout": 0.5},
        agent_settings={"memory_write_timeout": 0.5},
    ) as stack:
        got = await stack.ask("What is six times seven?", conversation_id="c1")
        missed = stack.agent.metrics.memory_missed
    assert got[-1].message_type == "answer" and got[-1].content == "42"
    assert "<memory>" not in stack.prompts()[0]
    sources = {
        labels["source"]
        for m in missed.collect()
        for s in m.samples
        for labels in [s.labels]
        if s.name.endswith("_total")
    }
    assert {"facts", "episodes", "conversation"} <= sources


async def test_an_unknown_tool_and_a_malformed_reply_become_observations(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    script = reasoning(
        "I think the answer is blue",  # malformed: corrected once
        'Thought: try it\nAction: telescope\nArgs: {"target": "sky"}',  # unknown tool
        "no format again",  # malformed
        "still no format",  # malformed after the correction: costs an iteration
        "Thought: fine\nFinal Answer: blue",
    )
    async with agent_stack(
        transport, tmp_path, unique, script=script, services=(), tools={"lookup": LOOKUP}
    ) as stack:
        got = await stack.ask("What colour is the sky?")
        prompts = stack.prompts()
    observations = [r.content for r in got if r.message_type == "observation"]
    assert observations[0].startswith("Unknown tool 'telescope'") and "lookup" in observations[0]
    assert observations[1].startswith("Your reply could not be parsed")
    assert got[-1].content == "blue"
    assert len(prompts) == 5
    assert "could not be used" in prompts[1] and "could not be used" in prompts[3]


async def test_max_iterations_ends_with_a_clear_error(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    script = reasoning('Thought: again\nAction: lookup\nArgs: {"question": "more"}')
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=script,
        services=(),
        tools={"lookup": LOOKUP},
        agent_mem={"max-iterations": 2},
    ) as stack:
        got = await stack.ask("Loop forever")
    last = got[-1]
    assert last.message_type == "error" and last.end_of_dialog and last.error is not None
    assert "max-iterations (2)" in last.content
    assert len([r for r in got if r.message_type == "observation"]) == 2


async def test_a_long_tool_loop_gets_its_working_memory_compressed(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    long_query = "history " * 60
    calls = [
        f'Thought: step {i}\nAction: lookup\nArgs: {{"question": "{long_query}{i}"}}'
        for i in range(4)
    ]
    script = reasoning(*calls, "Thought: done\nFinal Answer: compressed fine")
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=script,
        services=("working-memory",),
        tools={"lookup": LOOKUP},
        agent_mem={"working-memory-threshold": 300, "working-memory-keep-recent": 1},
    ) as stack:
        got = await stack.ask("Research a lot")
        prompts = stack.prompts()
    assert got[-1].content == "compressed fine"
    assert "Summary of earlier steps: Summary: earlier steps looked things up." in prompts[-1]
    assert prompts[-1].count("Thought: step") < 4
    compressions = stack.agent.metrics.compressions.labels(processor=stack.agent.id)._value.get()
    assert compressions >= 1


def _text(responses: list[AgentResponse]) -> str:
    return "".join(r.content for r in responses if r.message_type == "answer")


async def test_json_reply_format_constrains_the_decision_to_known_tools(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    decisions = reasoning(
        json.dumps({"thought": "ask it", "action": "lookup", "args": {"question": "Rome"}}),
        "not json at all",  # a backend that failed to constrain: corrected once
        json.dumps({"thought": "got it", "action": "final-answer", "answer": "Rome.\nItaly."}),
    )
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=decisions,
        services=(),
        tools={"lookup": LOOKUP},
        agent_mem={"reply-format": "json"},
    ) as stack:
        got = await stack.ask("Capital of Italy?", streaming=True)
        requests = [r for r in stack.llm.requests if r.system.startswith("You are a helpful agent")]
    assert all(r.response_format == "json" for r in requests)
    assert requests[0].schema_ is not None
    assert requests[0].schema_["properties"]["action"]["enum"] == ["lookup", "final-answer"]
    assert [o.content for o in got if o.message_type == "observation"] == ["KNOWLEDGE about Rome"]
    answer = "".join(r.content for r in got if r.message_type == "answer")
    assert answer == "Rome.\nItaly." and got[-1].end_of_dialog and got[-1].content == ""
    assert "could not be used" in requests[2].prompt
