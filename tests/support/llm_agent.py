"""The agent with the real OpenAI-compatible text-completion processor over the real broker,
against the OpenAI-compatible test server (``openai_server.py``): every LLM call the agent
makes is an HTTP request the server records. Memory is off and no tool is configured, so
an ask is the agent's reasoning calls and nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from react_mem.agent.service import AgentProcessor
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.llm.openai_compat import OpenAICompatibleProcessor, OpenAISettings
from react_mem.schema import AgentRequest, AgentResponse
from tests.support.agent_stack import agent_flow, queues, write_flows
from tests.support.kinds import INSTALLED
from tests.support.openai_server import OpenAIServer


@dataclass
class LLMAgent:
    llm: OpenAICompatibleProcessor | None
    agent: AgentProcessor
    client: RequestResponseClient[AgentRequest, AgentResponse]

    async def ask(self, question: str, *, timeout: float, **fields: Any) -> list[AgentResponse]:
        """The responses up to the end of the dialog; ``timeout`` bounds each wait."""
        request = AgentRequest(question=question, **fields)
        stream = self.client.stream(request, last=lambda r: r.end_of_dialog, timeout=timeout)
        return [r async for r in stream]


@contextlib.asynccontextmanager
async def llm_agent(
    transport: Transport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
    *,
    llm: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    agent_mem: dict[str, str] | None = None,
    text_completion: bool = True,
    registry: CollectorRegistry | None = None,
) -> AsyncIterator[LLMAgent]:
    """The pair with the processors' default settings, overridden by ``llm`` and ``agent``
    (and the workspace's ``agent-mem`` config by ``agent_mem``). Without
    ``text_completion`` nothing consumes the agent's text-completion requests."""
    registry = registry or CollectorRegistry()
    topics = queues(unique)
    llm_id, agent_id = f"tc-{unique}", f"agent-{unique}"
    llm_flows = {f"processor:{llm_id}": {"f1": {"topics": topics["text-completion"]}}}
    agent_flows = {
        f"processor:{agent_id}": {"f1": agent_flow(unique, topics, (), learner=False)},
        "agent-mem": {"enable-memory": "false", **(agent_mem or {})},
    }
    llm_settings = {
        "id": llm_id,
        "flows": write_flows(tmp_path / f"flows-{llm_id}.yaml", llm_flows),
        "base_url": server.url,
        "model": "served-model",
        **(llm or {}),
    }
    agent_settings = {
        "id": agent_id,
        "flows": write_flows(tmp_path / f"flows-{agent_id}.yaml", agent_flows),
        **(agent or {}),
    }
    service = (
        OpenAICompatibleProcessor(OpenAISettings.load(llm_settings), transport, registry=registry)
        if text_completion
        else None
    )
    processor = AgentProcessor(
        AgentProcessor.Settings.load(agent_settings), transport, registry=registry, kinds=INSTALLED
    )
    client: RequestResponseClient[AgentRequest, AgentResponse] = RequestResponseClient(
        transport, topics["agent"]["request"], topics["agent"]["response"], AgentResponse
    )
    started: list[Any] = []
    try:
        for part in (service, processor, client):
            if part is not None:
                await part.start()
                started.append(part)
        yield LLMAgent(service, processor, client)
    finally:
        for part in reversed(started):
            await (part.close() if part is client else part.stop())
