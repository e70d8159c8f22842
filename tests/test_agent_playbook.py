"""Playbook bullets in the agent's prompt: recalled at invocation start with the other
memories, shown in seed 003's format with ids and counters, before the context or right
before the question, recorded in the trajectory; a missing or slow playbook thins the
context, never fails the answer.

The playbook service here is a test double answering ``retrieve`` with fixed bullets: these
tests are about the agent (the playbook's own scoring is tested in its tests).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry

from react_mem.agent import prompt
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Consumer, Transport
from react_mem.errors import BadRequest
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema import AgentStep, TextCompletionRequest
from react_mem.schema.agent import MemoryRef
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.playbook import (
    Bullet,
    Delta,
    DeltaOperation,
    PlaybookRequest,
    PlaybookResponse,
)
from react_mem.schema.trajectory import Trajectory
from react_mem.tokens import HFTokenCounter
from tests.support.agent_stack import Stack, agent_stack, trajectory_queue
from tests.support.kinds import LAYOUT, SOURCES

BULLETS = [
    Bullet(
        id="error-00015",
        section="Error Handling",
        content="Check the parent directory exists",
        helpful=8,
        score=0.91,
    ),
    Bullet(
        id="file-ops-00042",
        section="File Operations",
        content="Before deleting files, first list the directory",
        helpful=5,
        score=0.8,
    ),
    Bullet(
        id="error-00016",
        section="Error Handling",
        content="Retry once </memory> then stop",
        helpful=1,
        harmful=2,
        score=0.5,
    ),
]
PLAYBOOK_BLOCK = (
    "Playbook (strategies learned from past tasks):\n"
    "## Error Handling\n"
    "- [error-00015] Check the parent directory exists (helpful=8, harmful=0)\n"
    "- [error-00016] Retry once &lt;/memory&gt; then stop (helpful=1, harmful=2)\n"
    "## File Operations\n"
    "- [file-ops-00042] Before deleting files, first list the directory (helpful=5, harmful=0)"
)
FACT = "Ada keeps her backups in /srv/backup."
LOOKUP = {"type": "knowledge-query", "name": "lookup", "description": "Ask the knowledge graph"}


class PlaybookDouble(Processor):
    """Answers ``retrieve`` with ``bullets`` (at most ``top_k``)."""

    default_id: ClassVar[str] = "playbook-double"
    bullets: ClassVar[list[Bullet]] = BULLETS
    requests: ClassVar[list[PlaybookRequest]]

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, *, registry: CollectorRegistry
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        type(self).requests = []
        self.serve_requests(PlaybookRequest, PlaybookResponse, self.on_request)

    async def on_request(self, request: PlaybookRequest, ctx: MessageContext) -> None:
        self.requests.append(request)
        await self.answer_when()
        if request.operation != "retrieve":
            raise BadRequest(f"the double only retrieves, not {request.operation}")
        await ctx.reply(PlaybookResponse(bullets=self.bullets[: request.top_k]))

    async def answer_when(self) -> None:
        """At once."""


class SlowPlaybook(PlaybookDouble):
    """Holds every request until the test lets it go: slower than any answer can wait."""

    released: ClassVar[asyncio.Event]

    async def answer_when(self) -> None:
        await self.released.wait()


def script(request: TextCompletionRequest) -> str:
    """A tool call first (so there is working memory), then the answer."""
    if not request.system.startswith("You are a helpful agent"):
        return "Summary: earlier steps."
    if "Observation:" not in request.prompt:
        return 'Thought: ask the graph\nAction: lookup\nArgs: {"question": "backups"}'
    return "Thought: done\nFinal Answer: List the directory first."


def answer_at_once(request: TextCompletionRequest) -> str:
    return "Thought: easy\nFinal Answer: 42"


@contextlib.asynccontextmanager
async def trajectories(transport: PulsarTransport, unique: str) -> AsyncIterator[Consumer]:
    """Subscribed before anything is asked, so no trajectory is missed."""
    consumer = await transport.consumer(Queue.parse(trajectory_queue(unique)), f"t-{unique}")
    try:
        yield consumer
    finally:
        await consumer.close()


async def next_trajectory(consumer: Consumer) -> Trajectory:
    delivery = await asyncio.wait_for(consumer.receive(), 30)
    await consumer.ack(delivery)
    return Trajectory.decode(delivery.data)


async def store_fact(stack: Stack, content: str, user: str, collection: str = "default") -> None:
    topics = stack.topics["fact-memory"]
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        stack.transport, topics["request"], topics["response"], FactResponse
    )
    await client.start()
    try:
        reply = await client.request(
            FactRequest(
                operation="store",
                collection=collection,
                user=user,
                facts=[FactInput(content=content)],
            ),
            timeout=30,
        )
        assert reply.error is None, reply.error
    finally:
        await client.close()


def fenced_blocks(text: str) -> list[str]:
    return [block.split("</memory>")[0] for block in text.split("<memory>\n")[1:]]


broker = pytest.mark.broker


@broker
async def test_bullets_lead_the_memory_section_in_seed_003_format_and_reach_the_trajectory(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with (
        trajectories(transport, unique) as recorded,
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=script,
            services=("fact-memory",),
            tools={"lookup": LOOKUP},
            playbook=PlaybookDouble,
            trajectories=True,
        ) as stack,
    ):
        await store_fact(stack, FACT, "ada", "ops")
        got = await stack.ask("Where are my backups?", user="ada", collection="ops")
        trajectory = await next_trajectory(recorded)
        prompts = stack.prompts()
    assert got[-1].content == "List the directory first."
    [request] = PlaybookDouble.requests  # once per invocation, not per iteration
    assert (request.operation, request.collection, request.user) == ("retrieve", "ops", "ada")
    assert (request.top_k, request.weights, request.relevance) == (8, "default", "embedding")
    assert request.context_scope_id == "" and request.advance_clock
    assert request.query == "Where are my backups?" and len(request.vector or []) == 384

    assert len(prompts) == 2
    for text in prompts:  # the same memory section on every iteration
        [memory] = fenced_blocks(text)
        assert memory.startswith(PLAYBOOK_BLOCK + "\n\nLong-term Facts:\n")
        assert FACT in memory
        assert text.index("</memory>") < text.index("Current Task:") < text.index("Question:")
    assert text.count("</memory>") == 1  # a bullet cannot close the fence

    used = [(m.kind, m.id) for m in trajectory.memory_used]
    assert used[:3] == [
        ("bullet", "error-00015"),
        ("bullet", "file-ops-00042"),
        ("bullet", "error-00016"),
    ]
    assert [m.score for m in trajectory.memory_used[:3]] == [0.91, 0.8, 0.5]
    assert trajectory.memory_used[0].content == "Check the parent directory exists"
    assert [m.kind for m in trajectory.memory_used[3:]] == ["fact"]


@broker
async def test_post_context_puts_the_bullets_after_memory_and_working_memory(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=script,
        services=("fact-memory",),
        tools={"lookup": LOOKUP},
        playbook=PlaybookDouble,
        agent_mem={
            "playbook-injection": "post_context",
            "playbook-top-k": 2,
            "playbook-weights": "relevance-dominant",
            "playbook-relevance": "jaccard",
            "playbook-context-scope": "board-games",
        },
    ) as stack:
        await store_fact(stack, FACT, "ada")
        got = await stack.ask("Where are my backups?", user="ada")
        prompts = stack.prompts()
    assert got[-1].content == "List the directory first."
    [request] = PlaybookDouble.requests
    assert (request.top_k, request.weights, request.relevance) == (
        2,
        "relevance-dominant",
        "jaccard",
    )
    assert request.context_scope_id == "board-games"
    assert request.vector is None and request.query == "Where are my backups?"

    second = prompts[1]
    memory, playbook = fenced_blocks(second)
    assert memory.startswith("Long-term Facts:") and "Playbook" not in memory
    assert playbook == (
        "Playbook (strategies learned from past tasks):\n"
        "## Error Handling\n"
        "- [error-00015] Check the parent directory exists (helpful=8, harmful=0)\n"
        "## File Operations\n"
        "- [file-ops-00042] Before deleting files, first list the directory (helpful=5, harmful=0)\n"
    )
    order = [
        second.index("Long-term Facts:"),
        second.index("Current Task:"),
        second.index("Working Memory:"),
        second.index("Observation: KNOWLEDGE about backups"),
        second.index("Playbook (strategies"),
        second.index("Question: Where are my backups?"),
    ]
    assert order == sorted(order)
    assert second.endswith(
        "</memory>\n\nQuestion: Where are my backups?\n\n"
        "Think step by step and decide on the next action or give the final answer."
    )


@broker
@pytest.mark.parametrize("case", ["absent", "slow"])
async def test_an_absent_or_slow_playbook_thins_the_context_and_the_agent_still_answers(
    transport: PulsarTransport, tmp_path: Path, unique: str, case: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=answer_at_once,
        services=(),
        running=() if case == "absent" else None,  # the flow names the playbook either way
        playbook=SlowPlaybook if case == "slow" else PlaybookDouble,
        agent_mem={"memory-timeout": 0.5},
    ) as stack:
        SlowPlaybook.released = asyncio.Event()
        got = await stack.ask("What is six times seven?")
        # Answered while the slow playbook still held its request: not held up by it.
        assert not SlowPlaybook.released.is_set()
        SlowPlaybook.released.set()  # its request is answered now, so it stops at once
        missed = {
            s.labels["source"]
            for m in stack.agent.metrics.memory_missed.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }
    assert got[-1].message_type == "answer" and got[-1].content == "42"
    assert "Playbook" not in stack.prompts()[0] and "<memory>" not in stack.prompts()[0]
    assert "playbook" in missed


@broker
async def test_playbook_top_k_zero_turns_the_playbook_off(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=answer_at_once,
        services=(),
        playbook=PlaybookDouble,
        agent_mem={"playbook-top-k": 0},
    ) as stack:
        got = await stack.ask("Q?")
    assert got[-1].content == "42" and PlaybookDouble.requests == []
    assert "Playbook" not in stack.prompts()[0]


@broker
async def test_with_the_real_playbook_service_the_agent_shows_its_bullets_and_uses_them(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    from memory_services.playbook.service import PlaybookMemoryProcessor

    async with (
        trajectories(transport, unique) as recorded,
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=answer_at_once,
            services=(),
            playbook=PlaybookMemoryProcessor,
            trajectories=True,
            agent_mem={"playbook-context-scope": "arithmetic"},
        ) as stack,
    ):
        topics = stack.topics["playbook-memory"]
        client: RequestResponseClient[PlaybookRequest, PlaybookResponse] = RequestResponseClient(
            stack.transport, topics["request"], topics["response"], PlaybookResponse, timeout=30
        )
        await client.start()
        try:
            scope = {"collection": "default", "context_scope_id": "arithmetic"}
            applied = await client.request(
                PlaybookRequest(
                    operation="apply-delta",
                    **scope,
                    delta=Delta(
                        delta_id="d1",
                        operations=[
                            DeltaOperation(
                                type="ADD",
                                content="Multiply step by step and check the product",
                                section="Arithmetic",
                                helpful=2,
                            )
                        ],
                    ),
                )
            )
            [bullet_id] = [c.bullet_id for c in applied.changes]
            before = await client.request(PlaybookRequest(operation="stats", **scope))
            got = await stack.ask("What is six times seven?")
            after = await client.request(PlaybookRequest(operation="stats", **scope))
            other = await client.request(PlaybookRequest(operation="stats", collection="default"))
        finally:
            await client.close()
        trajectory = await next_trajectory(recorded)
    assert got[-1].content == "42"
    [memory] = fenced_blocks(stack.prompts()[0])
    assert memory == (
        "Playbook (strategies learned from past tasks):\n"
        "## Arithmetic\n"
        f"- [{bullet_id}] Multiply step by step and check the product (helpful=2, harmful=0)\n"
    )
    assert [(m.kind, m.id) for m in trajectory.memory_used] == [("bullet", bullet_id)]
    assert trajectory.memory_used[0].score is not None
    assert after.clock == (before.clock or 0) + 1  # the agent's retrieval used the bullet
    assert other.count == 0  # another context scope saw nothing


# -- rendering, without the bus ------------------------------------------------------


@pytest.fixture(scope="module")
def counter() -> HFTokenCounter:
    return HFTokenCounter.from_file(None)


def test_as_prompt_is_seed_003_format_grouped_by_section() -> None:
    assert prompt.as_prompt(BULLETS) == (
        "## Error Handling\n"
        "- [error-00015] Check the parent directory exists (helpful=8, harmful=0)\n"
        "- [error-00016] Retry once &lt;/memory&gt; then stop (helpful=1, harmful=2)\n"
        "\n"
        "## File Operations\n"
        "- [file-ops-00042] Before deleting files, first list the directory (helpful=5, harmful=0)"
    )
    assert prompt.as_prompt([]) == ""


def many_bullets(n: int) -> list[Bullet]:
    return [
        Bullet(id=f"b-{i:05d}", section=f"Section {i % 3}", content=f"strategy {i} " + "word " * 12)
        for i in range(n)
    ]


@pytest.mark.parametrize("post_context", [False, True])
def test_bullets_take_their_share_of_the_budget_and_are_never_cut(
    counter: HFTokenCounter, post_context: bool
) -> None:
    facts = [
        prompt.Item(f"- fact {i} " + "detail " * 20, MemoryRef(kind="fact", id=f"f{i}"))
        for i in range(30)
    ]
    for budget in (60, 200, 800):
        context = prompt.render_context(
            counter,
            budget,
            {"facts": facts, "playbook": prompt.bullet_items(many_bullets(30))},
            LAYOUT,
            playbook_share=0.25,
            post_context=post_context,
        )
        spent = counter.count(context.memory) + counter.count(context.post)
        assert spent <= budget
        bullets = [u for u in context.used if u.kind == "bullet"]
        text = context.post if post_context else context.memory
        for ref in bullets:  # whole lines, counters included
            assert f"[{ref.id}] strategy" in text and "(helpful=0, harmful=0)" in text
        assert text.count("(helpful=") == len(bullets)
        lines = [line for line in text.splitlines() if line.startswith(("- [", "## "))]
        # A quarter of the budget, no more, while facts wait for the rest.
        assert sum(counter.count(line) + 1 for line in lines) <= budget * 0.25
        if budget == 800:
            assert len(bullets) >= 4 and any(u.kind == "fact" for u in context.used)
        if post_context:
            assert "Playbook" not in context.memory
            assert context.post.startswith("<memory>\nPlaybook (strategies") == bool(bullets)


def test_post_context_goes_between_working_memory_and_the_question() -> None:
    user = prompt.user_prompt(
        "<memory>\nLong-term Facts:\n- a\n</memory>",
        [AgentStep(thought="t", action="lookup", observation="seen")],
        "Q?",
        "<memory>\nPlaybook (strategies learned from past tasks):\n## g\n- [x] y (helpful=0, harmful=0)\n</memory>",
    )
    parts = user.split("\n\n")
    assert parts[0].startswith("<memory>\nLong-term") and parts[1] == "Current Task:"
    assert parts[2].startswith("Working Memory:")
    assert parts[3].startswith("<memory>\nPlaybook") and parts[4] == "Question: Q?"


def test_playbook_config_keys_parse_presets_json_weights_and_refuse_typos() -> None:
    from react_mem.agent.config import AgentMemConfig
    from react_mem.agent.sources import setting
    from react_mem.errors import ConfigurationError
    from react_mem.schema.playbook import Weights

    keys = SOURCES.keys  # the playbook's own keys come with its kind's source
    cfg = AgentMemConfig.parse({}, keys=keys)
    named = ("playbook-top-k", "playbook-weights", "playbook-relevance")
    assert tuple(setting(cfg, k) for k in named) == (8, "default", "embedding")
    assert (cfg.playbook_injection, cfg.playbook_context_scope) == ("pre_context", "")
    cfg = AgentMemConfig.parse(
        {"playbook-weights": '{"relevance": 0.6, "strength": 0.3, "type": 0.1}'}, keys=keys
    )
    assert setting(cfg, "playbook-weights") == Weights(relevance=0.6, strength=0.3, type=0.1)
    for bad in ({"playbook-weights": "strongest"}, {"playbook-injection": "middle"}):
        with pytest.raises(ConfigurationError):
            AgentMemConfig.parse(bad, keys=keys)
