"""The memory tools through the agent over the real broker, asked with TrustGraph's own
AgentClient: StoreFact writes to fact memory, RetrieveFacts reads it back above the
workspace's score floor, RecallEpisodes finds a stored episode; ``enable-memory-tools``
and a request's ``enable_memory: false`` take them (and recalled memory) away."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.schema import TextCompletionRequest
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactRequest, FactResponse
from tests.support.agent_stack import Stack, agent_stack
from tests.support.trustgraph import converse, trustgraph_agent, trustgraph_backend

pytestmark = pytest.mark.broker

FACT = "The office wifi password rotates every Monday."
GOAL = "Restore the nightly database backup job"
LESSON = "Check the backup volume's free space first"
MEMORY_TOOLS = ("RetrieveFacts", "StoreFact", "RecallEpisodes")


def action(name: str, **arguments: str) -> str:
    return f"Thought: use {name}\nAction: {name}\nArgs: {json.dumps(arguments)}"


def tool_script(request: TextCompletionRequest) -> str:
    """Each question names the tool call to make; once observed, the answer is the last
    observation, so the test sees what the tool returned."""
    observed = re.findall(r"^Observation: (.*)$", request.prompt, flags=re.M)
    if observed:
        return f"Thought: done\nFinal Answer: {observed[-1]}"
    question = request.prompt.rsplit("Question: ", 1)[-1]
    call = json.loads(question.split("\n", 1)[0])
    return action(call.pop("tool"), **call)


def ask_for(tool: str, **arguments: str) -> str:
    return json.dumps({"tool": tool, **arguments})


async def service(stack: Stack, name: str, request: Any, response: type[Any]) -> Any:
    topics = stack.topics[name]
    client: RequestResponseClient[Any, Any] = RequestResponseClient(
        stack.transport, topics["request"], topics["response"], response
    )
    await client.start()
    try:
        reply = await client.request(request, timeout=20)
        assert reply.error is None, reply.error
        return reply
    finally:
        await client.close()


async def test_memory_tools_store_retrieve_and_recall_through_trustgraphs_agent_client(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    from trustgraph.schema import AgentRequest as TGAgentRequest

    async with (
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=tool_script,
            services=("fact-memory", "episode-memory"),
            agent_mem={"memory-token-budget": 0},  # nothing recalled into the prompt
        ) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_agent(backend, stack.topics["agent"]) as agent,
    ):
        # StoreFact: into the request's scope (TrustGraph sends no user: the collection's).
        stored = await agent.invoke(ask_for("StoreFact", fact_content=FACT), timeout=60)
        assert stored == "Stored."
        listed = await service(stack, "fact-memory", FactRequest(operation="list"), FactResponse)
        assert [f.content for f in listed.facts] == [FACT]
        assert all(t in stack.llm.requests[-1].system for t in MEMORY_TOOLS)

        # RetrieveFacts: the fact, with its score, for a related query ...
        found = await agent.invoke(ask_for("RetrieveFacts", query="wifi password"), timeout=60)
        assert found.startswith(f"- {FACT} (score 0.")
        # ... and nothing below fact-min-score (0.15) for an unrelated one.
        unrelated = ask_for("RetrieveFacts", query="volcanic rock formations in Iceland")
        assert await agent.invoke(unrelated, timeout=60) == "No stored facts match."

        # RecallEpisodes: a stored episode and its lessons.
        episode = EpisodeRequest(
            operation="store", goal=GOAL, outcome="success", score=0.9, lessons=[LESSON]
        )
        await service(stack, "episode-memory", episode, EpisodeResponse)
        recalled = await agent.invoke(
            ask_for("RecallEpisodes", query="the database backup failed overnight"), timeout=60
        )
        assert recalled == f"- {GOAL} -> success. Lessons: {LESSON}"

        # Every response was read by TrustGraph's deserialiser; the dialog ends in an answer.
        got = await converse(
            agent, TGAgentRequest(question=ask_for("StoreFact", fact_content=FACT))
        )
        assert [r.message_type for r in got if r.message_type != "explain"] == [
            "thought",
            "observation",
            "thought",
            "answer",
        ]
        assert got[-1].end_of_dialog and got[-1].content.startswith("Already known")


async def test_memory_tools_off_by_config_and_memory_off_by_request(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=tool_script,
        services=("fact-memory", "episode-memory"),
        agent_mem={"enable-memory-tools": False},
    ) as stack:
        await service(
            stack,
            "fact-memory",
            FactRequest(operation="store", facts=[{"content": FACT}]),  # type: ignore[list-item]
            FactResponse,
        )
        got = await stack.ask(ask_for("RetrieveFacts", query="wifi password"))
        assert got[-1].content.startswith("Unknown tool 'RetrieveFacts'")
        system, prompt = stack.llm.requests[0].system, stack.llm.requests[0].prompt
        assert not any(f"- {t}:" in system for t in MEMORY_TOOLS)
        assert FACT in prompt  # memory itself is on: recalled into the prompt

    async with agent_stack(
        transport,
        tmp_path,
        f"{unique}b",
        script=tool_script,
        services=("fact-memory", "episode-memory"),
    ) as stack:
        await service(
            stack,
            "fact-memory",
            FactRequest(operation="store", facts=[{"content": FACT}]),  # type: ignore[list-item]
            FactResponse,
        )
        got = await stack.ask(ask_for("RetrieveFacts", query="wifi password"), enable_memory=False)
        assert got[-1].content.startswith("Unknown tool 'RetrieveFacts'")
        system, prompt = stack.llm.requests[0].system, stack.llm.requests[0].prompt
        assert not any(f"- {t}:" in system for t in MEMORY_TOOLS)
        assert FACT not in prompt and "<memory>" not in prompt
        # The same request with memory on gets both.
        await stack.ask(ask_for("RetrieveFacts", query="wifi password"))
        assert all(f"- {t}:" in stack.llm.requests[-2].system for t in MEMORY_TOOLS)
        assert FACT in stack.llm.requests[-2].prompt


async def test_retrieve_facts_returns_fact_tool_top_k_not_the_prompts_top_k(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    facts = [f"The office wifi password for floor {n} rotates every Monday." for n in range(6)]
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=tool_script,
        services=("fact-memory",),
        agent_mem={"fact-tool-top-k": 2, "fact-retrieval-top-k": 5},
    ) as stack:
        await service(
            stack,
            "fact-memory",
            FactRequest(operation="store", facts=[{"content": f} for f in facts]),  # type: ignore[misc]
            FactResponse,
        )
        await stack.ask(ask_for("RetrieveFacts", query="wifi password"))
        # The prompt recalled fact-retrieval-top-k of them; the tool's observation holds two.
        first, last = stack.llm.requests[0].prompt, stack.llm.requests[-1].prompt
        assert sum(f in first for f in facts) == 5
        observation = last.rsplit("Observation: ", 1)[1]
        assert sum(f"- {f} (score" in observation for f in facts) == 2
