"""TrustGraph 2.11's own client classes against react-mem over the embedded broker: its
config client on the per-workspace config queues the gateway uses, config written by it
changing the running agent (config types ``agent`` and ``agent-mem``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.config_service.service import ConfigServiceProcessor
from tests.support.agent_stack import agent_stack
from tests.support.recording import eventually
from tests.support.scripted_llm import replies
from tests.support.trustgraph import trustgraph_backend, trustgraph_config

pytestmark = pytest.mark.broker


@contextlib.asynccontextmanager
async def config_service(
    transport: PulsarTransport, data_dir: Path, unique: str
) -> AsyncIterator[None]:
    """Its own id, so its own subscription: on RabbitMQ a request queue outlives its consumers
    and collects every later request, which another test's service of the same id would get."""
    service = ConfigServiceProcessor(
        ConfigServiceProcessor.Settings.load({"id": f"cfg-{unique}", "data_dir": data_dir}),
        transport,
        registry=CollectorRegistry(),
    )
    await service.start()
    try:
        yield
    finally:
        await service.stop()


async def test_per_workspace_config_queues_serve_trustgraphs_config_client(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    ws = f"ws-{unique}"
    async with (
        config_service(transport, tmp_path / "cfg", unique),
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_config(backend, "default") as default,
        trustgraph_config(backend) as system,
    ):
        # The workspace is the queue's: a body naming another one does not redirect it.
        await default.put("elsewhere", "prompt", "greeting", "hello")
        assert await default.get("default", "prompt", "greeting") == "hello"
        assert await system.get("default", "prompt", "greeting") == "hello"
        assert not await system.get("elsewhere", "prompt", "greeting")
        # Cross-workspace operations belong to the system queue.
        with pytest.raises(RuntimeError, match="bad-operation"):
            await default.workspaces_for_type("prompt")
        assert await system.workspaces_for_type("prompt") == {"default"}
        # A workspace registered as TrustGraph's bootstrapper does gets its own queues.
        await system.put("__workspaces__", "workspace", ws, json.dumps({"id": ws}))
        async with trustgraph_config(backend, ws) as own:
            await own.put(ws, "tool", "t1", "{}")
            assert await own.keys(ws, "tool") == ["t1"]
            assert await own.get_all(ws) == {"tool": {"t1": "{}"}}
        assert await default.keys("default", "tool") == []
    # A workspace with config is served after a restart too.
    async with (
        config_service(transport, tmp_path / "cfg", unique),
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_config(backend, ws) as own,
    ):
        assert await own.keys(ws, "tool") == ["t1"]


async def test_agent_reads_additional_context_from_config_type_agent(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    """agent-manager's config type ``agent`` (key ``additional-context``) is read;
    ``agent-mem`` wins over it."""
    async with (
        config_service(transport, tmp_path / "cfg", unique),
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=replies("Thought: done\nFinal Answer: ok"),
            services=(),
            config_service=True,
            agent_settings={"config_timeout": 10},
        ) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_config(backend, "default") as config,
    ):
        await eventually(lambda: bool(stack.agent.flows), timeout=20)

        def context() -> str | None:
            return stack.agent.workspace("default").config.additional_context

        await config.put("default", "agent", "additional-context", "AGENT-CONTEXT")
        await eventually(lambda: context() == "AGENT-CONTEXT", timeout=20)
        await stack.ask("Hello")
        assert "AGENT-CONTEXT" in stack.llm.requests[-1].system

        await config.put("default", "agent-mem", "additional-context", "MEM-CONTEXT")
        await eventually(lambda: context() == "MEM-CONTEXT", timeout=20)
        await config.put("default", "agent", "additional-context", "AGENT-AGAIN")
        await stack.ask("Hello again")
        assert "MEM-CONTEXT" in stack.llm.requests[-1].system
        assert "AGENT" not in stack.llm.requests[-1].system
