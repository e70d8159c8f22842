"""The episodes source asks its two questions (the episodes most like the question, and the
owner's recent ones for their lessons) in one request, the second as the retrieve's
``also`` search: an episode-memory double answers a retrieve only once it holds both
questions, so a recall that asked them one after the other (two requests, the second after
the first's answer) would get neither within ``memory-timeout``. A service that predates
``also`` (it ignores it) is asked the second question on its own after the first's answer,
and the prompt holds the same lessons."""

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
from react_mem.schema.episodes import (
    Episode,
    EpisodeHits,
    EpisodeRequest,
    EpisodeResponse,
    EpisodeSearch,
)
from tests.support.agent_stack import agent_stack, processor_settings, queues

pytestmark = pytest.mark.broker

#: Longest the double holds a retrieve for its partner: past the agent's memory-timeout.
HOLD = 10.0


def _answer(search: EpisodeRequest | EpisodeSearch) -> list[Episode]:
    recent = search.since is not None  # the recent-lessons question
    episode = Episode(
        id="e-recent" if recent else "e-like",
        goal="Convert 50 F to C" if recent else "Convert 98 F to C",
        lessons=["State the unit."] if recent else ["Subtract 32 first."],
        similarity=0.9,
    )
    return [episode]


class PairedEpisodes(Processor):
    """episode-memory double: a retrieve is answered once both questions have arrived (in
    one request, or in two); ``serves_also``: False as a service that predates ``also``."""

    default_id: ClassVar[str] = "paired-episodes"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry,
        serves_also: bool,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.serves_also = serves_also
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
        also = request.also if self.serves_also else []
        if len(self.retrieves) + len(also) >= 2 or not self.serves_also:
            self.both.set()  # an older service is asked one question at a time
        try:
            await asyncio.wait_for(self.both.wait(), HOLD)
        except TimeoutError:
            return  # never answered: the agent's recall leaves episodes out
        hits = [EpisodeHits(episodes=_answer(search)) for search in also]
        await ctx.reply(EpisodeResponse(episodes=_answer(request), also=hits))


@pytest.mark.parametrize("serves_also", [True, False], ids=["one-request", "older-service"])
async def test_episodes_and_recent_lessons_are_asked_in_one_request(
    transport: PulsarTransport, tmp_path: Path, unique: str, serves_also: bool
) -> None:
    topics = queues(unique)["episode-memory"]
    registry = CollectorRegistry()
    pid = f"paired-episodes-{unique}"
    double = PairedEpisodes(
        processor_settings(tmp_path, PairedEpisodes, pid, {"topics": dict(topics)}),
        transport,
        registry=registry,
        serves_also=serves_also,
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
    # The prompt shows no steps: the recall asks for none (episode memory then reads none).
    assert double.retrieves and not any(r.with_steps for r in double.retrieves)
    if serves_also:
        [request] = double.retrieves
        [recent] = request.also
        assert request.since is None and recent.since is not None and recent.top_k == 2
        assert request.vector is not None  # one query: the question's vector, for both
    else:
        first, second = double.retrieves
        assert first.since is None and second.since is not None and second.also == []
    memory = prompt.split("<memory>\n", 1)[1].split("</memory>", 1)[0]
    assert "Subtract 32 first." in memory  # the episode most like the question
    assert "- Recent lesson (success): State the unit." in memory
