"""config/trustgraph/: what a TrustGraph user loads to run react-mem in a TrustGraph flow.

The flow blueprint's entries are checked against the processors' own specifications (a
missing queue stops a flow; an unknown one is a typo), its queues against each other (every
client reaches a server, every event a consumer), and TrustGraph's start-flow expansion of
it against react-mem's flow parser. agent-mem defaults and tools parse with the agent's code.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from react_mem.agent.config import AgentMemConfig
from react_mem.agent.memory_tools import memory_tools
from react_mem.agent.tools import tool_from_config
from react_mem.bus.queues import Queue, QueueClass
from react_mem.errors import ConfigurationError
from react_mem.processor.flow import FlowDefinition
from react_mem.processor.runtime import registered_processors, resolve_processor
from react_mem.processor.specs import ConsumerSpec, RequestResponseSpec
from tests.support.kinds import SOURCES

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "trustgraph"

#: Services a TrustGraph flow provides that react-mem's processors call.
TRUSTGRAPH_SERVICES = {"text-completion", "prompt-rag", "graph-rag", "mcp-tool"} | {
    "structured-query",
    "embeddings",
    "row-embeddings",
    "librarian",
}
#: Queues fed from outside the flow's processors: `react-mem feedback` and `react-mem memory
#: forget` (or any client).
EXTERNAL_PRODUCERS = {"agent-feedback", "memory-forget"}
#: Queues read outside the flow's processors: the audit trail, by an archive or a SIEM;
#: the agent's provenance, by TrustGraph's graph store.
EXTERNAL_CONSUMERS = {"memory-audit", "triples-store"}
#: Spec names of the request/response path, not events.
#: Specs of request/response pairs (the learner's forget requests are persistent; their
#: replies are not).
RPC_SPECS = frozenset({"request", "response", "next", "memory-forget-response"})
TOPIC = re.compile(r"^(request|response|flow):tg:([a-z0-9-]+):\{workspace\}:\{id\}$")
#: TrustGraph's per-workspace services (one queue for all of a workspace's flows).
WORKSPACE_TOPIC = re.compile(r"^(request|response):tg:librarian:\{workspace\}$")

#: agent-manager's entry in TrustGraph's flow blueprint templates (trustgraph-templates,
#: ``templates/2.8/flows/agent.jsonnet`` with ``flows/helpers.jsonnet``: the newest template
#: set, the one TrustGraph 2.8 to 2.11 deployments are configured from), expanded. Every spec
#: agent-mem shares with it must name the same queue, or a TrustGraph service misses it.
AGENT_MANAGER_TOPICS = {
    "request": "request:tg:agent:{workspace}:{id}",
    "next": "request:tg:agent:{workspace}:{id}",
    "response": "response:tg:agent:{workspace}:{id}",
    "text-completion-request": "request:tg:text-completion:{workspace}:{id}",
    "text-completion-response": "response:tg:text-completion:{workspace}:{id}",
    "prompt-request": "request:tg:prompt-rag:{workspace}:{id}",
    "prompt-response": "response:tg:prompt-rag:{workspace}:{id}",
    "mcp-tool-request": "request:tg:mcp-tool:{workspace}:{id}",
    "mcp-tool-response": "response:tg:mcp-tool:{workspace}:{id}",
    "graph-rag-request": "request:tg:graph-rag:{workspace}:{id}",
    "graph-rag-response": "response:tg:graph-rag:{workspace}:{id}",
    "structured-query-request": "request:tg:structured-query:{workspace}:{id}",
    "structured-query-response": "response:tg:structured-query:{workspace}:{id}",
    "embeddings-request": "request:tg:embeddings:{workspace}:{id}",
    "embeddings-response": "response:tg:embeddings:{workspace}:{id}",
    "row-embeddings-query-request": "request:tg:row-embeddings:{workspace}:{id}",
    "row-embeddings-query-response": "response:tg:row-embeddings:{workspace}:{id}",
    "explainability": "flow:tg:triples-store:{workspace}:{id}",
    "librarian-request": "request:tg:librarian:{workspace}",
    "librarian-response": "response:tg:librarian:{workspace}",
}


@dataclass(frozen=True)
class Specs:
    """A processor's spec names: those its flows must name, and all it understands."""

    required: frozenset[str]
    known: frozenset[str]
    producers: frozenset[str]
    consumers: frozenset[str]
    clients: tuple[tuple[str, str], ...]


@functools.cache
def processor_specs(name: str) -> Specs:
    """The specifications ``react-mem run NAME`` registers (built without a bus)."""
    cls = resolve_processor(name)
    settings = cls.Settings.load({"id": cls.default_id})
    processor = cls(settings, None, registry=CollectorRegistry())  # type: ignore[arg-type]
    required: set[str] = set()
    known: set[str] = set()
    producers: set[str] = set()
    consumers: set[str] = set()
    clients: list[tuple[str, str]] = []
    for spec in processor.specifications:
        if isinstance(spec, RequestResponseSpec):
            names = {spec.request, spec.response}
            clients.append((spec.request, spec.response))
        else:
            names = {spec.name}
            (consumers if isinstance(spec, ConsumerSpec) else producers).add(spec.name)
        known |= names
        if not spec.optional:
            required |= names
    return Specs(
        frozenset(required),
        frozenset(known),
        frozenset(producers),
        frozenset(consumers),
        tuple(clients),
    )


def check_flow(flow: dict[str, dict[str, str]]) -> None:
    """``flow`` maps `react-mem run` names to one flow's topics. Each processor's topics
    cover its required specs and name no spec it lacks; every client's request queue is
    served (by a processor here, or a TrustGraph service); every persistent queue written
    has a consumer and every one consumed a producer."""
    served: dict[str, str] = {}
    written: set[str] = set()
    read: set[str] = set()
    for name, topics in flow.items():
        specs = processor_specs(name)
        assert specs.required <= topics.keys(), f"{name} lacks {specs.required - topics.keys()}"
        assert topics.keys() <= specs.known, f"{name}: unknown specs {topics.keys() - specs.known}"
        if "request" in specs.consumers:
            served[topics["request"]] = topics["response"]
        events = (specs.producers | specs.consumers) - RPC_SPECS
        for spec in events & topics.keys():
            assert Queue.parse(topics[spec]).cls is QueueClass.FLOW, f"{name}.{spec} not persistent"
        written |= {topics[p] for p in specs.producers - RPC_SPECS if p in topics}
        read |= {topics[c] for c in specs.consumers - RPC_SPECS if c in topics}
    for name, topics in flow.items():
        for request, response in processor_specs(name).clients:
            if request not in topics:
                continue
            queue = Queue.parse(topics[request])
            if service_of(queue) in TRUSTGRAPH_SERVICES:
                assert Queue.parse(topics[response]).topic == queue.topic, (name, response)
                continue
            assert topics[request] in served, f"{name}: nothing serves {topics[request]}"
            assert served[topics[request]] == topics[response], (name, response)
    unread = {service_of(Queue.parse(t)) for t in written - read}
    assert unread <= EXTERNAL_CONSUMERS, f"written but never consumed: {written - read}"
    unfed = {service_of(Queue.parse(q)) for q in read - written}
    assert unfed <= EXTERNAL_PRODUCERS, f"consumed but never written: {unfed}"


def service_of(queue: Queue) -> str:
    """``agent`` of ``request:tg:agent:{workspace}:{id}``."""
    return queue.topic.split(":")[0]


def load(name: str) -> Any:
    return json.loads((CONFIG / name).read_text())


@pytest.fixture(scope="module")
def blueprint() -> dict[str, Any]:
    return load("flow-blueprint.json")  # type: ignore[no-any-return]


def entries(blueprint: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The blueprint's flow entries by processor name, with their topics."""
    out = {}
    for key, entry in blueprint["flow"].items():
        name, _, variant = key.partition(":")
        assert variant == "{id}", f"{key}: react-mem processors run per flow"
        out[name] = entry["topics"]
    return out


def test_blueprint_has_trustgraph_shape(blueprint: dict[str, Any]) -> None:
    assert set(blueprint) == {
        "description",
        "tags",
        "parameters",
        "interfaces",
        "blueprint",
        "flow",
    }
    for key, entry in blueprint["flow"].items():
        assert set(entry) <= {"topics", "parameters"}, key
        for spec, topic in entry["topics"].items():
            assert TOPIC.match(topic) or WORKSPACE_TOPIC.match(topic), f"{key}.{spec}: {topic}"
    for name, interface in blueprint["interfaces"].items():
        assert set(interface) in ({"request", "response"}, {"flow"}), name
        assert all(TOPIC.match(t) for t in interface.values()), name


def test_blueprint_puts_agent_mem_in_place_of_agent_manager(blueprint: dict[str, Any]) -> None:
    flow = entries(blueprint)
    assert "agent-manager" not in flow
    agent = flow["agent-mem"]
    # TrustGraph's agent queues, so its gateway and clients reach agent-mem unchanged.
    assert agent["request"] == agent["next"] == "request:tg:agent:{workspace}:{id}"
    assert agent["response"] == "response:tg:agent:{workspace}:{id}"
    assert blueprint["interfaces"]["agent"] == {
        "request": agent["request"],
        "response": agent["response"],
    }
    # Every queue TrustGraph's agent-manager entry uses that react-mem speaks, as TrustGraph names it.
    assert agent["prompt-request"] == "request:tg:prompt-rag:{workspace}:{id}"
    assert agent["graph-rag-request"] == "request:tg:graph-rag:{workspace}:{id}"
    assert agent["mcp-tool-request"] == "request:tg:mcp-tool:{workspace}:{id}"
    assert agent["text-completion-request"] == "request:tg:text-completion:{workspace}:{id}"


def test_every_spec_shared_with_agent_manager_names_its_queue(blueprint: dict[str, Any]) -> None:
    agent = entries(blueprint)["agent-mem"]
    shared = AGENT_MANAGER_TOPICS.keys() & agent.keys()
    # agent-mem speaks every one of agent-manager's specs, and names each queue as it does.
    assert shared == AGENT_MANAGER_TOPICS.keys()
    assert {s: agent[s] for s in shared} == AGENT_MANAGER_TOPICS


def test_agent_mem_entry_names_every_spec_of_the_agent(blueprint: dict[str, Any]) -> None:
    specs = processor_specs("agent-mem")
    assert entries(blueprint)["agent-mem"].keys() == specs.known


def test_blueprint_entries_are_runnable_react_mem_processors(blueprint: dict[str, Any]) -> None:
    flow = entries(blueprint)
    assert set(flow) <= set(registered_processors())
    assert {"agent-mem", "memory-learner", "fact-memory", "episode-memory"} <= set(flow)
    assert {"conversation-memory", "working-memory", "playbook-memory"} <= set(flow)
    for name in flow:  # a plain `react-mem run NAME` reads config type processor:NAME
        assert resolve_processor(name).default_id == name
    check_flow(flow)


def test_wiring_check_finds_a_broken_queue(blueprint: dict[str, Any]) -> None:
    flow = entries(blueprint)
    flow["memory-learner"] = {
        **flow["memory-learner"],
        "trajectory": "flow:tg:agent-trajectories:{workspace}:{id}",
    }
    with pytest.raises(AssertionError, match="never consumed"):
        check_flow(flow)
    flow = entries(blueprint)
    flow["agent-mem"] = {k: v for k, v in flow["agent-mem"].items() if k != "response"}
    with pytest.raises(AssertionError, match="lacks"):
        check_flow(flow)


def test_started_flow_parses_as_react_mem_flows(blueprint: dict[str, Any]) -> None:
    """TrustGraph's start-flow writes `processor:<name>` entries, {variant: JSON}, with
    {workspace}, {id} and {blueprint} substituted; react-mem's flow parser takes them."""

    def expand(text: str) -> str:
        return (
            text.replace("{workspace}", "acme").replace("{blueprint}", "rm").replace("{id}", "f1")
        )

    for key, entry in blueprint["flow"].items():
        processor, variant = key.split(":", 1)
        value = json.dumps(
            {
                "topics": {expand(k): expand(v) for k, v in entry.get("topics", {}).items()},
                "parameters": {
                    expand(k): expand(v) for k, v in entry.get("parameters", {}).items()
                },
            }
        )
        definition = FlowDefinition.parse(f"processor:{processor}/{expand(variant)}", value)
        for topic in definition.topics.values():
            queue = Queue.parse(topic)
            own = queue.topic.endswith(":acme:f1") or WORKSPACE_TOPIC.match(
                topic.replace(":acme", ":{workspace}")
            )
            assert queue.topicspace == "tg" and own, topic


def test_agent_mem_defaults_are_the_agents_defaults() -> None:
    values = load("agent-mem.json")["agent-mem"]
    assert all(isinstance(v, str) for v in values.values()), "config values are strings"
    aliases = {f.alias for f in AgentMemConfig.model_fields.values()}
    declared = {k.name for k in SOURCES.keys}  # the memory kinds' sources' own keys
    assert set(values) == (aliases | declared) - {"additional-context"}
    keys = SOURCES.keys
    assert AgentMemConfig.parse(values, keys=keys) == AgentMemConfig.parse({}, keys=keys)


def test_agent_mem_defaults_catch_a_bad_value() -> None:
    values = {**load("agent-mem.json")["agent-mem"], "reply-format": "xml"}
    with pytest.raises(ConfigurationError, match="reply-format"):
        AgentMemConfig.parse(values, keys=SOURCES.keys)


class _MemoryFlow:
    """A flow with every memory service, as far as memory_tools asks."""

    def has_client(self, name: str) -> bool:
        return True


def test_tools_parse_and_leave_the_memory_tools_alone() -> None:
    values = load("tools.json")["tool"]
    assert all(isinstance(v, str) for v in values.values()), "config values are strings"
    tools = [tool_from_config(v) for v in values.values()]
    names = [t.name for t in tools]
    assert len(set(names)) == len(names)
    built_in = {t.name for t in memory_tools(_MemoryFlow(), 5, 3)}  # type: ignore[arg-type]
    assert built_in == {"RetrieveFacts", "RecallEpisodes", "StoreFact"}
    # A configured tool of the same name would replace the built-in one.
    assert not built_in & set(names)


def test_docs_describe_the_memory_tools() -> None:
    doc = (ROOT / "docs" / "trustgraph.md").read_text()
    for tool in memory_tools(_MemoryFlow(), 5, 3):  # type: ignore[arg-type]
        assert tool.name in doc
        for argument in tool.arguments:
            assert f"`{argument.name}`" in doc, (tool.name, argument.name)
