"""Interop on RabbitMQ with TrustGraph's own code (trustgraph-base 2.11.1, the test extra)
as the peer: its RabbitMQ backend, its serialization and its clients, against react-mem's
processors on the same private node.

- TrustGraph's ``AgentClient`` (registered through its ``AgentClientSpec``, as a TrustGraph
  processor does) asks react-mem's agent and gets the answer with its thoughts streamed.
- react-mem's agent calls a text-completion service written with TrustGraph's backend and
  schema (TrustGraph's processors serve react-mem's).
- A config service written with TrustGraph's backend and schema answers react-mem's
  config fetches and pushes a change on ``notify:tg:config``; the react-mem processor
  takes up the flow it names and serves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from react_mem.agent.service import AgentProcessor
from react_mem.bus.queues import Queue
from react_mem.bus.rabbitmq import RabbitMQTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.ping.service import PingProcessor
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support.agent_stack import agent_flow, agent_stack, queues, write_flows
from tests.support.kinds import INSTALLED
from tests.support.ping import answered
from tests.support.rabbitmq import RabbitMQNode, rabbitmq_node  # noqa: F401 (fixture)
from tests.support.recording import eventually
from tests.test_agent import ANSWER, LOOKUP, tool_then_answer

tg_rabbitmq = pytest.importorskip(
    "trustgraph.base.async_rabbitmq_backend",
    reason="needs trustgraph-base==2.11.1 (the test extra: scripts/setup test)",
)
tg_agent = pytest.importorskip("trustgraph.base.agent_client")
tg_config = pytest.importorskip("trustgraph.schema.config")
tg_llm = pytest.importorskip("trustgraph.schema.llm")

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
async def transport(rabbitmq_node: RabbitMQNode) -> AsyncIterator[RabbitMQTransport]:  # noqa: F811
    bus = rabbitmq_node.transport()
    await bus.connect()
    yield bus
    await bus.close()


@pytest.fixture
async def trustgraph(rabbitmq_node: RabbitMQNode) -> AsyncIterator[Any]:  # noqa: F811
    """TrustGraph's own RabbitMQ backend on the node, as its processors configure it."""
    backend = tg_rabbitmq.AsyncRabbitMQBackend(host="127.0.0.1", port=rabbitmq_node.port)
    yield backend
    await backend.close()


class Flow:
    """What TrustGraph's specs register clients on."""

    def __init__(self) -> None:
        self.consumer: dict[str, Any] = {}


class Peer:
    """A TrustGraph processor as its specs see it; no ``id``, so no metrics of its own."""

    def __init__(self, backend: Any) -> None:
        self.async_backend = backend


async def test_trustgraphs_agent_client_gets_react_mems_answer(
    transport: RabbitMQTransport, trustgraph: Any, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,  # type: ignore[arg-type]
        tmp_path,
        unique,
        script=tool_then_answer(),  # type: ignore[no-untyped-call]
        services=(),
        tools={"lookup": LOOKUP},
    ) as stack:
        topics = stack.topics["agent"]
        client = await tg_agent.AgentClientSpec("agent", "agent-response").register(
            Flow(),
            Peer(trustgraph),
            {"topics": {"agent": topics["request"], "agent-response": topics["response"]}},
        )
        thoughts: list[str] = []

        async def think(content: str, end_of_message: bool) -> None:
            thoughts.append(content)

        try:
            answer = await client.invoke("What is the capital of France?", think=think, timeout=60)
        finally:
            await client.stop()
    assert answer == ANSWER
    assert thoughts == ["I should ask the graph", "I know it now"]


@contextlib.asynccontextmanager
async def trustgraph_config_service(
    backend: Any, store: dict[str, dict[str, dict[str, str]]], version: list[int]
) -> AsyncIterator[None]:
    """A config service on TrustGraph's backend and schema: getkeys-all-ws and getvalues
    from ``store`` ({workspace: {type: {key: value}}}) at ``version[0]``."""
    schema = tg_config
    requests = await backend.create_consumer(
        topic=schema.config_request_queue, subscription="config-svc", schema=schema.ConfigRequest
    )
    responses = await backend.create_producer(
        topic=schema.config_response_queue, schema=schema.ConfigResponse
    )

    def answer(request: Any) -> Any:
        if request.operation == "getkeys-all-ws":
            values = [
                schema.ConfigValue(type=request.type, key=key, workspace=ws)
                for ws, types in store.items()
                for key in types.get(request.type, {})
            ]
        elif request.operation == "getvalues":
            entries = store.get(request.workspace, {}).get(request.type, {})
            values = [
                schema.ConfigValue(type=request.type, key=k, value=v, workspace=request.workspace)
                for k, v in entries.items()
            ]
        else:
            raise AssertionError(f"unexpected config operation {request.operation}")
        return schema.ConfigResponse(version=version[0], values=values)

    async def serve() -> None:
        while True:
            message = await requests.receive()
            reply = answer(message.value())
            await responses.send(reply, {"id": message.properties()["id"]})
            await requests.acknowledge(message)

    task = asyncio.create_task(serve())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await requests.close()
        await responses.close()


async def test_trustgraphs_config_push_reaches_a_react_mem_processor(
    transport: RabbitMQTransport, trustgraph: Any, tmp_path: Path, unique: str
) -> None:
    pid = f"ping-{unique}"
    topics = {"request": f"request:tg:ping-{unique}", "response": f"response:tg:ping-{unique}"}
    store: dict[str, dict[str, dict[str, str]]] = {}
    version = [1]
    settings = PingProcessor.Settings.load({"id": pid, "config_timeout": 5})
    processor = PingProcessor(settings, transport, registry=CollectorRegistry())
    client: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport, topics["request"], topics["response"], PingResponse, timeout=5
    )
    push = await trustgraph.create_producer(
        topic=tg_config.config_push_queue, schema=tg_config.ConfigPush
    )
    async with trustgraph_config_service(trustgraph, store, version):
        await processor.start()
        await client.start()
        try:
            assert processor.flows == {}  # the config service has nothing for it yet
            store["default"] = {f"processor:{pid}": {"f1": json.dumps({"topics": topics})}}
            version[0] = 2
            await push.send(
                tg_config.ConfigPush(version=2, changes={f"processor:{pid}": ["default"]}), {}
            )
            reply = await answered(client, timeout=30)
            assert reply.error is None and reply.processor == pid
            assert reply.flow == "f1"
        finally:
            await client.close()
            await processor.stop()
            await push.close()


@contextlib.asynccontextmanager
async def trustgraph_text_completion(
    backend: Any, topics: dict[str, str], answer: str, prompts: list[str]
) -> AsyncIterator[None]:
    """A text-completion service on TrustGraph's backend and schema, answering ``answer``."""
    requests = await backend.create_consumer(
        topic=topics["request"], subscription="tg-llm", schema=tg_llm.TextCompletionRequest
    )
    responses = await backend.create_producer(
        topic=topics["response"], schema=tg_llm.TextCompletionResponse
    )

    async def serve() -> None:
        while True:
            message = await requests.receive()
            prompts.append(message.value().prompt)
            reply = tg_llm.TextCompletionResponse(
                response=answer, in_token=12, out_token=5, model="tg-llm", end_of_stream=True
            )
            await responses.send(reply, {"id": message.properties()["id"]})
            await requests.acknowledge(message)

    task = asyncio.create_task(serve())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await requests.close()
        await responses.close()


async def test_react_mems_agent_calls_a_trustgraph_text_completion_service(
    transport: RabbitMQTransport, trustgraph: Any, tmp_path: Path, unique: str
) -> None:
    """Everything around react-mem's agent is TrustGraph's code: the caller and the LLM."""
    topics = queues(unique)
    pid = f"agent-{unique}"
    flows = write_flows(
        tmp_path / "flows.yaml",
        {
            f"processor:{pid}": {"f1": agent_flow(unique, topics, (), learner=False)},
            "agent-mem": {},
            "tool": {},
        },
    )
    settings = AgentProcessor.Settings.load({"id": pid, "flows": flows, "concurrency": 2})
    agent = AgentProcessor(settings, transport, registry=CollectorRegistry(), kinds=INSTALLED)
    prompts: list[str] = []
    llm = trustgraph_text_completion(
        trustgraph, topics["text-completion"], f"Thought: easy\nFinal Answer: {ANSWER}", prompts
    )
    async with llm:
        await agent.start()
        client = await tg_agent.AgentClientSpec("agent", "agent-response").register(
            Flow(),
            Peer(trustgraph),
            {
                "topics": {
                    "agent": topics["agent"]["request"],
                    "agent-response": topics["agent"]["response"],
                }
            },
        )
        try:
            answer = await client.invoke("What is the capital of France?", timeout=60)
        finally:
            await client.stop()
            await agent.stop()
    assert answer == ANSWER
    assert len(prompts) == 1 and "What is the capital of France?" in prompts[0]


#: Versions from here on are probes sent after the messages under test.
PROBE = 1_000


@pytest.mark.parametrize("cls", ["flow", "request"])
async def test_trustgraph_and_react_mem_consumers_share_one_queue(
    transport: RabbitMQTransport, trustgraph: Any, unique: str, cls: str
) -> None:
    """Both declare the shared queue with the same arguments (RabbitMQ refuses a second
    declaration that differs) and compete on it: each message reaches one of them."""
    topic = f"{cls}:tg:shared-{unique}"
    theirs = await trustgraph.create_consumer(
        topic=topic, subscription="workers", schema=tg_config.ConfigPush
    )
    ours = await transport.consumer(Queue.parse(topic), "workers")
    producer = await transport.producer(Queue.parse(topic))
    got: list[str] = []

    async def take_theirs() -> None:
        while True:
            message = await theirs.receive()
            got.append(f"tg:{message.value().version}")
            await theirs.acknowledge(message)

    async def take_ours() -> None:
        while True:
            delivery = await ours.receive()
            got.append(f"rm:{json.loads(delivery.data)['version']}")
            await ours.ack(delivery)

    tasks = [asyncio.create_task(take_theirs()), asyncio.create_task(take_ours())]
    try:
        for n in range(20):
            await producer.send(json.dumps({"version": n}).encode(), {"id": str(n)})
        await eventually(lambda: len(got) >= 20)
        # Then probes until each consumer has had one: each takes what the queue hands it in
        # order, so by then all it was handed before the probes is counted; nothing of the
        # twenty is left to come again (shown by order, not by a pause).
        probes = 0
        while {g.split(":")[0] for g in got if int(g.split(":")[1]) >= PROBE} != {"tg", "rm"}:
            assert probes < 50, got
            await producer.send(json.dumps({"version": PROBE + probes}).encode(), {})
            probes += 1
            await eventually(lambda n=probes: sum(int(g.split(":")[1]) >= PROBE for g in got) == n)
        twenty = [g for g in got if int(g.split(":")[1]) < PROBE]
        assert sorted(int(g.split(":")[1]) for g in twenty) == list(range(20))  # each once
        assert {g.split(":")[0] for g in twenty} == {"tg", "rm"}  # both took a share
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await theirs.close()
        await ours.close()
        await producer.close()
