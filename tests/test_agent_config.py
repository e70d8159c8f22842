"""agent-mem settings pushed through the config service change the running agent."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.config_service.service import ConfigServiceProcessor
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack, put_config
from tests.support.recording import eventually

pytestmark = pytest.mark.broker

LOOKUP = {"type": "knowledge-query", "name": "lookup", "description": "Ask the knowledge graph"}


@contextlib.asynccontextmanager
async def config_service(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> AsyncIterator[None]:
    """Its own id: on RabbitMQ a request queue outlives its consumers and collects requests."""
    service = ConfigServiceProcessor(
        ConfigServiceProcessor.Settings.load({"id": f"cfg-{unique}", "data_dir": tmp_path / "cfg"}),
        transport,
        registry=CollectorRegistry(),
    )
    await service.start()
    try:
        yield
    finally:
        await service.stop()


def always_a_tool(request: TextCompletionRequest) -> str:
    return 'Thought: once more\nAction: lookup\nArgs: {"question": "more"}'


async def test_pushed_agent_mem_settings_change_behaviour(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with (
        config_service(transport, tmp_path, unique),
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=always_a_tool,
            services=(),
            tools={"lookup": LOOKUP},
            agent_mem={"max-iterations": 3},
            config_service=True,
            agent_settings={"config_timeout": 10},
        ) as stack,
    ):
        await eventually(lambda: bool(stack.agent.flows), timeout=20)
        got = await stack.ask("Loop")
        assert "max-iterations (3)" in got[-1].content
        assert len([r for r in got if r.message_type == "observation"]) == 3

        await put_config(
            "default",
            {"agent-mem": {"max-iterations": "1", "additional-context": "SENTINEL-CONTEXT"}},
            transport,
        )
        await eventually(
            lambda: stack.agent.workspace("default").config.max_iterations == 1, timeout=20
        )
        got = await stack.ask("Loop again")
        assert "max-iterations (1)" in got[-1].content
        assert "SENTINEL-CONTEXT" in stack.llm.requests[-1].system
        # Tools pushed later are offered at once; a tool removed is gone.
        await put_config("default", {"tool": {"lookup": {**LOOKUP, "name": "search"}}}, transport)
        await eventually(lambda: "search" in stack.agent.workspace("default").tools, timeout=20)
        await stack.ask("Loop once more")
        assert "- search:" in stack.llm.requests[-1].system
        assert "- lookup:" not in stack.llm.requests[-1].system


def test_an_unknown_agent_mem_key_is_refused_naming_the_closest_key() -> None:
    """A misspelt key used to be dropped silently (``memory-token-budjet``)."""
    from react_mem.agent.config import AgentMemConfig
    from react_mem.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        AgentMemConfig.parse({"memory-token-budjet": "100"})
    assert "'memory-token-budjet'" in str(caught.value)
    assert "did you mean 'memory-token-budget'" in str(caught.value)
    # Keys other processors read from the same config type are known, and left to them.
    shared = AgentMemConfig.parse({"pii-policy": "drop", "episode-retention-days": "30"})
    assert shared == AgentMemConfig.parse({})
    assert AgentMemConfig.parse({"memory_token_budget": "100"}).memory_token_budget == 100


def test_retrieval_keys_choose_how_facts_and_episodes_are_ranked() -> None:
    from react_mem.agent.config import AgentMemConfig
    from react_mem.errors import ConfigurationError

    default = AgentMemConfig.parse({}).retrieval()
    assert (default.mode, default.fusion) == ("hybrid", "rrf")
    cfg = AgentMemConfig.parse(
        {"retrieval-mode": "lexical", "retrieval-fusion": "dbsf", "retrieval-weights": "[1, 3]"}
    )
    chosen = cfg.retrieval()
    assert (chosen.mode, chosen.fusion) == ("lexical", "dbsf")
    assert (chosen.dense_weight, chosen.lexical_weight) == (1.0, 3.0)
    for bad in [{"retrieval-mode": "fuzzy"}, {"retrieval-weights": "[1, -2]"}]:
        with pytest.raises(ConfigurationError, match="retrieval"):
            AgentMemConfig.parse(bad)
