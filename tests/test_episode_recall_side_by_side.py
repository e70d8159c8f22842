"""The episodes source asks its two questions (the episodes most like the question, and the
owner's recent ones for their lessons) side by side, not one after the other: an
episode-memory double answers neither until both are in, so a recall that waited for the
first answer before asking the second would get neither within ``memory-timeout``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.transport import Transport
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema.episodes import Episode, EpisodeRequest, EpisodeResponse
from tests.support.agent_stack import agent_stack, processor_settings, queues

pytestmark = pytest.mark.broker

#: Longest the double holds a retrieve for its partner: past the agent's memory-timeout.
HOLD = 10.0


class PairedEpisodes(Processor):
    """episode-memory double: each retrieve is answered once two have arrived."""

    default_id: ClassVar[str] = "paired-episodes"

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, *, registry: CollectorRegistry
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.retrieves: list[EpisodeRequest] = []
        self.both = asyncio.Event()
        self.register_specification(
            ConsumerSpec(
                name="request", schema=EpisodeRequest, handler=self.on_request, response="response"
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=EpisodeResponse))

    async def on_request(self, request: EpisodeRequest, ctx: MessageContext) -> None:
        self.retrieves.append(request)
        if len(self.retrieves) >= 2:
            self.both.set()
        try:
            await asyncio.wait_for(self.both.wait(), HOLD)
        except TimeoutError:
            return  # never answered: the agent's recall leaves episodes out
        recent = request.since is not None  # the recent-lessons question
        episode = Episode(
            id="e-recent" if recent else "e-like",
            goal="Convert 50 F to C" if recent else "Convert 98 F to C",
            lessons=["State the unit."] if recent else ["Subtract 32 first."],
            similarity=0.9,
        )
        await ctx.reply(EpisodeResponse(episodes=[episode]))


async def test_episodes_and_recent_lessons_are_asked_side_by_side(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    topics = queues(unique)["episode-memory"]
    registry = CollectorRegistry()
    pid = f"paired-episodes-{unique}"
    double = PairedEpisodes(
        processor_settings(tmp_path, PairedEpisodes, pid, {"topics": dict(topics)}),
        transport,
        registry=registry,
    )
    await double.start()
    try:
        async with agent_stack(
            transport,
            tmp_path,
            unique,
            script=lambda r: "Thought: easy\nFinal Answer: 25 C",
            services=("episode-memory",),
            running=(),
            agent_mem={"episode-min-score": -1, "reflection-top-k": 2, "memory-timeout": 5},
        ) as stack:
            await stack.ask("What is 77 F in Celsius?", user="ada")
            [prompt] = stack.prompts()
    finally:
        await double.stop()
    assert len(double.retrieves) == 2
    memory = prompt.split("<memory>\n", 1)[1].split("</memory>", 1)[0]
    assert "Subtract 32 first." in memory  # the episode most like the question
    assert "- Recent lesson (success): State the unit." in memory
