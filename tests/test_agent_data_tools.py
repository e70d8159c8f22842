"""agent-manager 2.11's tool types structured-query, row-embeddings-query and tool-service
(with config type tool-service) through the agent over the real broker, asked with
TrustGraph's own AgentClient, against test doubles of TrustGraph's services on the spec
names and queues agent-manager uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import TextCompletionRequest
from react_mem.schema.services import (
    EmbeddingsRequest,
    EmbeddingsResponse,
    RowEmbeddingsRequest,
    RowEmbeddingsResponse,
    RowIndexMatch,
    StructuredQueryRequest,
    StructuredQueryResponse,
    ToolServiceRequest,
    ToolServiceResponse,
)
from tests.support.agent_stack import agent_stack
from tests.support.services import service_double
from tests.support.trustgraph import trustgraph_agent, trustgraph_backend

pytestmark = pytest.mark.broker

TOOLS = {
    "sql": {
        "type": "structured-query",
        "name": "ask-data",
        "description": "Ask the CRM tables",
        "collection": "crm",
    },
    "rows": {
        "type": "row-embeddings-query",
        "name": "find-customer",
        "description": "Find customers by name",
        "schema-name": "customers",
        "index-name": "name",
        "limit": 3,
        "collection": "crm",
    },
    "weather": {
        "type": "tool-service",
        "name": "weather",
        "description": "The weather for a day",
        "service": "weather-svc",
        "city": "Paris",
        "arguments": [{"name": "day", "type": "string", "description": "The day"}],
    },
    "broken": {  # its service's required config parameter is missing: skipped
        "type": "tool-service",
        "name": "no-city",
        "description": "Misconfigured",
        "service": "weather-svc",
    },
}


def tool_script(request: TextCompletionRequest) -> str:
    """The question is ``{"tool": ..., args}``; the answer is the tool's observation."""
    observed = re.findall(r"^Observation: (.*(?:\n(?!Thought: ).*)*)", request.prompt, re.M)
    if observed:
        return "Thought: done\nFinal Answer: " + observed[-1].split("\n\nQuestion: ")[0]
    call = json.loads(request.prompt.rsplit("Question: ", 1)[-1].split("\n", 1)[0])
    tool = call.pop("tool")
    return f"Thought: use {tool}\nAction: {tool}\nArgs: {json.dumps(call)}"


def ask_for(tool: str, **arguments: str) -> str:
    return json.dumps({"tool": tool, **arguments})


def pair(name: str, unique: str) -> dict[str, str]:
    tail = f"{name}-{unique}:default:f1"
    return {"request": f"request:tg:{tail}", "response": f"response:tg:{tail}"}


async def test_structured_row_embeddings_and_tool_service_tools(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    data = {"customers": [{"name": "Ada Lovelace", "city": "London"}]}
    match = RowIndexMatch(index_name="name", index_value=["Ada Lovelace"], score=0.91234)
    queues = {s: pair(s, unique) for s in ("structured-query", "embeddings", "row-embeddings")}
    weather = pair("weather", unique)
    topics = {
        "structured-query-request": queues["structured-query"]["request"],
        "structured-query-response": queues["structured-query"]["response"],
        "embeddings-request": queues["embeddings"]["request"],
        "embeddings-response": queues["embeddings"]["response"],
        "row-embeddings-query-request": queues["row-embeddings"]["request"],
        "row-embeddings-query-response": queues["row-embeddings"]["response"],
    }
    service = {
        "request-queue": weather["request"],
        "response-queue": weather["response"],
        "config-params": [{"name": "city", "required": True}],
    }
    async with (
        service_double(
            transport,
            tmp_path,
            f"sq-{unique}",
            queues["structured-query"],
            StructuredQueryRequest,
            StructuredQueryResponse,
            lambda _: StructuredQueryResponse(data=json.dumps(data)),
        ) as sq,
        service_double(
            transport,
            tmp_path,
            f"emb-{unique}",
            queues["embeddings"],
            EmbeddingsRequest,
            EmbeddingsResponse,
            lambda r: EmbeddingsResponse(vectors=[[0.25, 0.5] for _ in r.texts]),
        ) as emb,
        service_double(
            transport,
            tmp_path,
            f"rows-{unique}",
            queues["row-embeddings"],
            RowEmbeddingsRequest,
            RowEmbeddingsResponse,
            lambda _: RowEmbeddingsResponse(matches=[match]),
        ) as rows,
        service_double(
            transport,
            tmp_path,
            f"weather-{unique}",
            weather,
            ToolServiceRequest,
            ToolServiceResponse,
            lambda _: ToolServiceResponse(response="Sunny, 24C", end_of_stream=True),
        ) as svc,
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=tool_script,
            services=(),
            tools=TOOLS,
            agent_topics=topics,
            config={"tool-service": {"weather-svc": service}},
        ) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_agent(backend, stack.topics["agent"]) as agent,
    ):
        assert set(stack.agent.workspace("default").tools) == {
            "ask-data",
            "find-customer",
            "weather",
        }

        got = await agent.invoke(ask_for("ask-data", question="Where does Ada live?"))
        assert got == json.dumps(data, indent=2)
        assert sq.requests == [
            StructuredQueryRequest(question="Where does Ada live?", collection="crm")
        ]
        system = stack.llm.requests[0].system
        assert "- ask-data: Ask the CRM tables" in system and "question" in system

        got = await agent.invoke(ask_for("find-customer", query="Ada"))
        assert got == "Matching records:\n- name: Ada Lovelace (score: 0.912)"
        assert emb.requests == [EmbeddingsRequest(texts=["Ada"])]
        assert rows.requests == [
            RowEmbeddingsRequest(
                vector=[0.25, 0.5],
                limit=3,
                collection="crm",
                schema_name="customers",
                index_name="name",
            )
        ]

        got = await agent.invoke(ask_for("weather", day="Monday"))
        assert got == "Sunny, 24C"
        (call,) = svc.requests
        assert json.loads(call.config) == {"city": "Paris"}
        assert json.loads(call.arguments) == {"day": "Monday"}
