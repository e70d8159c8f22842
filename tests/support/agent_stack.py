"""The agent with its neighbours over the real broker: a scripted LLM, the real memory
services (store, embedder), optionally the learner, a playbook-memory service (real or a
test double) and a graph-rag test double.

Every queue name carries the test's unique token, so stacks of different tests never meet.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from devtools.topology import node
from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from memory_services.processor import MemoryProcessor
from memory_services.working.service import WorkingMemoryProcessor
from react_mem.agent.service import AgentProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.clients.facts import FactClient
from react_mem.commands.common import ServiceQueues
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema import AgentRequest, AgentResponse
from react_mem.schema.facts import FactResponse
from react_mem.schema.scope import Scope
from react_mem.schema.services import GraphRagQuery, GraphRagResponse
from tests.support.kinds import INSTALLED
from tests.support.scripted_llm import Script, ScriptedLLM

PLAYBOOK = "playbook-memory"

SERVICES: dict[str, type[Processor]] = {
    "fact-memory": FactMemoryProcessor,
    "episode-memory": EpisodeMemoryProcessor,
    "conversation-memory": ConversationMemoryProcessor,
    "working-memory": WorkingMemoryProcessor,
}


class GraphRag(Processor):
    """A graph-rag test double answering every query with ``answer`` (query appended)."""

    default_id: ClassVar[str] = "graph-rag"

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, *, registry: CollectorRegistry
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.queries: list[GraphRagQuery] = []
        self.register_specification(
            ConsumerSpec(
                name="request", schema=GraphRagQuery, handler=self.on_query, response="response"
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=GraphRagResponse))

    async def on_query(self, query: GraphRagQuery, ctx: MessageContext) -> None:
        self.queries.append(query)
        await ctx.reply(GraphRagResponse(message_type="explain", explain_id="urn:x"))
        await ctx.reply(
            GraphRagResponse(
                message_type="chunk",
                response=f"KNOWLEDGE about {query.query}",
                end_of_stream=True,
                end_of_session=True,
            )
        )


def queues(unique: str) -> dict[str, dict[str, str]]:
    """Request/response queue pair per service, unique to a test."""
    names = ["agent", "text-completion", "graph-rag", *SERVICES, PLAYBOOK]
    return {
        n: {
            "request": f"request:tg:{n}-{unique}:default:f1",
            "response": f"response:tg:{n}-{unique}:default:f1",
        }
        for n in names
    }


@dataclass
class Stack:
    transport: PulsarTransport
    unique: str
    llm: ScriptedLLM  # None (only) in the throughput benchmark's split layout
    agent: AgentProcessor
    graph_rag: GraphRag
    services: dict[str, Processor]
    client: RequestResponseClient[AgentRequest, AgentResponse]
    topics: dict[str, dict[str, str]]
    others: list[Processor] = field(default_factory=list)
    playbook: Processor | None = None
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    async def ask(
        self, question: str, *, timeout: float = 60.0, **fields: Any
    ) -> list[AgentResponse]:
        request = AgentRequest(question=question, **fields)
        return [
            r
            async for r in self.client.stream(
                request, last=lambda r: r.end_of_dialog, timeout=timeout
            )
        ]

    def prompts(self) -> list[str]:
        """Every agent reasoning prompt the LLM was given (system prompts tell them apart)."""
        return [
            r.prompt for r in self.llm.requests if r.system.startswith("You are a helpful agent")
        ]


def agent_flow(
    unique: str,
    topics: dict[str, dict[str, str]],
    services: tuple[str, ...],
    *,
    learner: bool,
    playbook: bool = False,
) -> dict[str, Any]:
    """The agent's flow, from its node in the topology description: its own queues, and
    its clients of the services this stack runs; trajectories when ``learner`` is true."""
    present = {"agent", "text-completion", "graph-rag", *services}
    present |= {PLAYBOOK} if playbook else set()
    agent = node("agent-mem", INSTALLED)
    flow: dict[str, str] = {}
    for topic in (*agent.topics, *agent.trustgraph):
        if topic.cls != "flow" and topic.name in present:
            flow[topic.spec] = topics[topic.name][topic.cls]
    if learner:
        flow["trajectory"] = trajectory_queue(unique)
    return {"topics": flow, "parameters": {}}


def trajectory_queue(unique: str) -> str:
    return f"flow:tg:agent-trajectory-{unique}:default:f1"


def forget_queues(unique: str) -> ServiceQueues:
    """The learner's forget queue (persistent) and its replies."""
    tail = f"memory-forget-{unique}:default:f1"
    return ServiceQueues(f"flow:tg:{tail}", f"response:tg:{tail}")


def feedback_queue(unique: str) -> str:
    """The learner's feedback queue in a stack with a playbook."""
    return f"flow:tg:agent-feedback-{unique}:default:f1"


def write_flows(path: Path, config: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"default": config}))  # JSON is YAML
    return path


def processor_settings(
    tmp_path: Path, cls: type[Processor], pid: str, flow: dict[str, Any], **extra: Any
) -> Any:
    """``cls``'s settings for a stack's processor ``pid`` with one flow ``f1``."""
    flows = write_flows(tmp_path / f"flows-{pid}.yaml", {f"processor:{pid}": {"f1": flow}})
    return cls.Settings.load({"id": pid, "flows": flows, "concurrency": 4, **extra})


@dataclass
class Neighbours:
    """What an agent's stack runs besides the agent and the learner."""

    llm: ScriptedLLM | None = None
    graph_rag: GraphRag | None = None
    services: dict[str, Processor] = field(default_factory=dict)
    playbook: Processor | None = None


@contextlib.asynccontextmanager
async def neighbours(
    transport: Transport,
    tmp_path: Path,
    unique: str,
    *,
    script: Script | None,
    running: tuple[str, ...] = (),
    playbook: type[Processor] | None = None,
    registry: CollectorRegistry | None = None,
    service_settings: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Neighbours]:
    """The scripted LLM and graph-rag (when ``script`` is given), the memory services in
    ``running`` and ``playbook`` (a class), on a stack's queues: in the agent's process
    (``agent_stack``) or in another one (the throughput benchmark's split layout)."""
    registry = registry or CollectorRegistry()
    topics = queues(unique)
    started: list[Processor] = []
    got = Neighbours()

    async def start(processor: Processor) -> Any:
        await processor.start()
        started.append(processor)
        return processor

    def settings_for(cls: type[Processor], pid: str, flow: dict[str, Any], **extra: Any) -> Any:
        return processor_settings(tmp_path, cls, pid, flow, **extra)

    try:
        if script is not None:
            llm_topics = {"topics": topics["text-completion"]}
            got.llm = await start(
                ScriptedLLM(
                    settings_for(ScriptedLLM, f"llm-{unique}", llm_topics),
                    transport,
                    registry=registry,
                    script=script,
                )
            )
            got.graph_rag = await start(
                GraphRag(
                    settings_for(GraphRag, f"rag-{unique}", {"topics": topics["graph-rag"]}),
                    transport,
                    registry=registry,
                )
            )
        for name in running:
            if name == PLAYBOOK:
                continue
            flow: dict[str, Any] = {"topics": dict(topics[name])}
            if name == "working-memory":
                flow["topics"]["text-completion-request"] = topics["text-completion"]["request"]
                flow["topics"]["text-completion-response"] = topics["text-completion"]["response"]
            if name == "conversation-memory":
                flow["topics"]["ended"] = f"flow:tg:conversation-ended-{unique}:default:f1"
            cls = SERVICES[name]
            pid = f"{name}-{unique}"
            extra = {} if name == "working-memory" else {"data_dir": tmp_path / pid}
            extra |= (service_settings or {}).get(name, {})
            got.services[name] = await start(
                cls(settings_for(cls, pid, flow, **extra), transport, registry=registry)
            )
        if playbook is not None and PLAYBOOK in running:
            pid = f"{PLAYBOOK}-{unique}"
            extra = {"data_dir": tmp_path / pid} if issubclass(playbook, MemoryProcessor) else {}
            if issubclass(playbook, MemoryProcessor):
                # The stacks count the bullets they write and ask questions their bullets are
                # not worded like: no seed bullets, no relevance floor (both are tested in
                # test_playbook, test_ace_defaults and test_ace_playbook_units).
                extra |= {"seed_bullets": None, "min_relevance": 0.0}
            flow = {"topics": dict(topics[PLAYBOOK])}
            got.playbook = await start(
                playbook(settings_for(playbook, pid, flow, **extra), transport, registry=registry)
            )
        yield got
    finally:
        for processor in reversed(started):
            await processor.stop()


@contextlib.asynccontextmanager
async def agent_stack(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    *,
    script: Script | None,
    services: tuple[str, ...] = tuple(SERVICES),
    running: tuple[str, ...] | None = None,
    agent_mem: dict[str, Any] | None = None,
    tools: dict[str, dict[str, Any]] | None = None,
    learner: bool = False,
    agent_settings: dict[str, Any] | None = None,
    config_service: bool = False,
    playbook: type[Processor] | None = None,
    trajectories: bool = False,
    learner_settings: dict[str, Any] | None = None,
    registry: CollectorRegistry | None = None,
    next_queue: str | None = None,
    agent_topics: dict[str, str] | None = None,
    config: dict[str, dict[str, Any]] | None = None,
    service_settings: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Stack]:
    """The agent, its flow naming ``services``; of those, ``running`` (default all) run.
    With ``playbook`` (the real playbook-memory processor class or a test double) the
    agent's and learner's flows name playbook-memory too; it runs unless ``running`` is
    given without ``"playbook-memory"``. With ``trajectories`` the agent publishes them
    (on ``trajectory_queue``) without a learner. ``learner_settings`` override the
    learner's; ``registry`` collects every processor's metrics (default: a fresh one);
    ``next_queue`` sends the agent's ``next`` requests elsewhere (to another replica);
    ``agent_topics`` adds queues to the agent's flow, ``config`` more config types
    (``{type: {key: value}}``, values JSON-encoded unless strings); ``service_settings``
    more settings of a memory service, by name. ``script`` None: the scripted LLM and
    graph-rag run elsewhere (``neighbours`` in another process), ``Stack.llm`` and
    ``Stack.graph_rag`` are then None."""
    registry = registry or CollectorRegistry()
    topics = queues(unique)
    started: list[Processor] = []

    async def start(processor: Processor) -> Any:
        await processor.start()
        started.append(processor)
        return processor

    def settings_for(cls: type[Processor], pid: str, flow: dict[str, Any], **extra: Any) -> Any:
        return processor_settings(tmp_path, cls, pid, flow, **extra)

    client: RequestResponseClient[AgentRequest, AgentResponse] = RequestResponseClient(
        transport, topics["agent"]["request"], topics["agent"]["response"], AgentResponse
    )
    run = running if running is not None else (*services, PLAYBOOK)
    async with neighbours(
        transport,
        tmp_path,
        unique,
        script=script,
        running=run,
        playbook=playbook,
        registry=registry,
        service_settings=service_settings,
    ) as near:
        llm, rag, up, book = near.llm, near.graph_rag, near.services, near.playbook
        try:
            others: list[Processor] = []
            if learner:
                from react_mem.learner.service import MemoryLearnerProcessor

                flow = {
                    "topics": {
                        "trajectory": f"flow:tg:agent-trajectory-{unique}:default:f1",
                        "conversation-ended": f"flow:tg:conversation-ended-{unique}:default:f1",
                        "memory-forget": forget_queues(unique).request,
                        "memory-forget-response": forget_queues(unique).response,
                    }
                }
                for name in ("text-completion", *services, *([PLAYBOOK] if playbook else [])):
                    if name != "working-memory":
                        flow["topics"][f"{name}-request"] = topics[name]["request"]
                        flow["topics"][f"{name}-response"] = topics[name]["response"]
                if playbook is not None:
                    flow["topics"]["feedback"] = feedback_queue(unique)
                pid = f"learner-{unique}"
                others.append(
                    await start(
                        MemoryLearnerProcessor(
                            settings_for(
                                MemoryLearnerProcessor,
                                pid,
                                flow,
                                state_dir=tmp_path / pid,
                                **(learner_settings or {}),
                            ),
                            transport,
                            registry=registry,
                        )
                    )
                )
            pid = f"agent-{unique}"
            workspace: dict[str, Any] = {
                f"processor:{pid}": {
                    "f1": agent_flow(
                        unique,
                        topics,
                        services,
                        learner=learner or trajectories,
                        playbook=playbook is not None,
                    )
                },
                "agent-mem": {
                    k: json.dumps(v) if not isinstance(v, str) else v
                    for k, v in (agent_mem or {}).items()
                },
                "tool": {k: json.dumps(v) for k, v in (tools or {}).items()},
            }
            for kind, entries in (config or {}).items():
                workspace[kind] = {
                    k: v if isinstance(v, str) else json.dumps(v) for k, v in entries.items()
                }
            if next_queue is not None:
                workspace[f"processor:{pid}"]["f1"]["topics"]["next"] = next_queue
            workspace[f"processor:{pid}"]["f1"]["topics"].update(agent_topics or {})
            values: dict[str, Any] = {"id": pid, "concurrency": 4, **(agent_settings or {})}
            if config_service:  # flow, settings and tools come from the running config service
                await put_config("default", workspace, transport)
            else:
                values["flows"] = write_flows(tmp_path / f"flows-{pid}.yaml", workspace)
            settings = AgentProcessor.Settings.load(values)
            agent = AgentProcessor(settings, transport, registry=registry, kinds=INSTALLED)
            await start(agent)
            await client.start()
            yield Stack(
                transport, unique, llm, agent, rag, up, client, topics, others, book, registry
            )
        finally:
            await client.close()
            for processor in reversed(started):
                await processor.stop()


async def put_config(
    workspace: str, config: dict[str, dict[str, Any]], transport: Transport
) -> None:
    """Write ``{type: {key: value}}`` through the config service (which then pushes it)."""
    from react_mem.clients.config import ConfigClient
    from react_mem.schema import CONFIG_REQUEST_QUEUE, CONFIG_RESPONSE_QUEUE, ConfigResponse

    values = {
        (kind, key): v if isinstance(v, str) else json.dumps(v)
        for kind, entries in config.items()
        for key, v in entries.items()
    }
    rpc: RequestResponseClient[Any, ConfigResponse] = RequestResponseClient(
        transport, CONFIG_REQUEST_QUEUE, CONFIG_RESPONSE_QUEUE, ConfigResponse, timeout=10
    )
    await rpc.start()
    try:
        await ConfigClient(rpc).put(workspace, values)
    finally:
        await rpc.close()


async def raw_exchange(
    transport: PulsarTransport, topics: dict[str, str], payload: bytes, *, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Send raw request bytes as a TrustGraph client would; collect raw response JSON."""
    import asyncio
    import uuid

    responses = await transport.consumer(
        Queue.parse(topics["response"]), f"raw-{uuid.uuid4().hex[:8]}"
    )
    producer = await transport.producer(Queue.parse(topics["request"]))
    request_id = str(uuid.uuid4())
    got: list[dict[str, Any]] = []
    try:
        await producer.send(payload, {"id": request_id})
        while True:
            delivery = await asyncio.wait_for(responses.receive(), timeout)
            await responses.ack(delivery)
            if delivery.properties.get("id") != request_id:
                continue
            got.append(json.loads(delivery.data))
            if got[-1].get("end_of_dialog"):
                return got
    finally:
        await producer.close()
        await responses.close()


async def facts_of(stack: Stack, user: str) -> list[str]:
    """The contents of ``user``'s facts in the stack's fact-memory (collection default)."""
    topics = stack.topics["fact-memory"]
    rpc: RequestResponseClient[Any, FactResponse] = RequestResponseClient(
        stack.transport, topics["request"], topics["response"], FactResponse
    )
    await rpc.start()
    try:
        page = await FactClient(rpc, timeout=20).page(Scope("default", "default", user))
        return [f.content for f in page.items]
    finally:
        await rpc.close()
