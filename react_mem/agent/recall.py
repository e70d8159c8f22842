"""Invocation start: recall what memory holds for a question, in parallel, never failing.

The question is embedded once, started before anything else (the model runs on its thread
while the loop waits for the previous turn and asks the sources that need no vector, the
conversation loaded by id); then every source that recalls by similarity is asked by that
vector, all at once, each with its own timeout. The sources are those the
agent read from its memory kinds (``react_mem.agent.sources.Sources``). A memory service
that is absent from the flow, slow or failing thins the context; it never fails the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from react_mem.agent.config import AgentMemConfig
from react_mem.agent.items import Item
from react_mem.agent.sources import MemorySource
from react_mem.embedding.base import Embedder
from react_mem.processor.flow import Flow
from react_mem.schema.scope import Scope
from react_mem.tokens import TokenCounter

logger = logging.getLogger(__name__)

#: Working memory is no recall source: the agent asks it to compress its steps.
WORKING = "working-memory-request"

T = TypeVar("T")


@dataclass
class Recall:
    #: Prompt items per source name, best first (absent: not asked or not answered).
    items: dict[str, list[Item]] = field(default_factory=dict)
    #: Sources that could not be read this time (absent, late or failing), with why.
    missed: dict[str, str] = field(default_factory=dict)
    #: Seconds per source, the embedding included as ``embed``.
    timings: dict[str, float] = field(default_factory=dict)
    #: Why the answer must wait for its turn's append to be stored (see ``Ask.holds``).
    holds: set[str] = field(default_factory=set)


class MemoryRecall:
    def __init__(
        self,
        flow: Flow,
        embedder: Embedder | None,
        config: AgentMemConfig,
        sources: Iterable[MemorySource],
        counter: TokenCounter | None = None,
    ) -> None:
        """``counter``: the render's, to count the items' tokens while recall waits."""
        self.flow, self.embedder, self.config = flow, embedder, config
        self.sources = tuple(sources)
        self.counter = counter

    async def recall(
        self,
        question: str,
        scope: Scope,
        state: str = "",
        task_type: str = "",
        *,
        first: Awaitable[object] | None = None,
    ) -> Recall:
        """``state``: the invocation's recent steps, which episode recall also reads;
        ``task_type``: the request's, which the playbook's topic boost reads; ``first``:
        awaited before any source is asked (the previous turn's append, which a follow-up's
        conversation must see), the question's embedding already under way."""
        cfg, recall = self.config, Recall()
        embedding: asyncio.Future[list[float] | None] | None = None
        jobs: dict[str, Awaitable[list[Item] | None]] = {}
        try:
            holds = recall.holds  # one set for all the asks: see Ask.holds
            asks = [
                (source, ask)
                for source in self.sources
                if (ask := source.ask(self.flow, cfg, question, scope, state, task_type, holds))
            ]
            embedded = [(s, ask) for s, ask in asks if s.embeds(cfg)]
            if self.embedder is not None and embedded:
                embedding = asyncio.ensure_future(
                    self._timed(recall, "embed", self._embed(question))
                )
                # One turn of the loop: the embedder hands the question to its thread before
                # the conversation's request is encoded and sent (the model runs beside it).
                await asyncio.sleep(0)
            if first is not None:
                await first
            # Sources that need no vector are asked at once, while the question is embedded,
            # and their items counted as they come (before the vector: counted after it, the
            # loop's work held the bus client's threads back from sending the searches).
            for source, ask in asks:
                if not source.embeds(cfg):
                    jobs[source.name] = asyncio.ensure_future(
                        self._counted(self._timed(recall, source.name, source.fetch(ask)))
                    )
            vector = None if embedding is None else await embedding
        except BaseException:  # cancelled or failed: so is what it started
            if inspect.iscoroutine(first):
                first.close()
            for job in (embedding, *jobs.values()):
                if isinstance(job, asyncio.Future):
                    job.cancel()
            raise
        # Each source's items are counted once in (tokens, for the render), while the loop
        # waits for the others.
        first_asked = list(jobs)
        for source, ask in embedded:
            ask = dataclasses.replace(ask, vector=vector)
            jobs[source.name] = self._counted(self._timed(recall, source.name, source.fetch(ask)))
        order = [*(name for name in jobs if name not in first_asked), *first_asked]
        results = dict(zip(order, await asyncio.gather(*(jobs[n] for n in order)), strict=True))
        for name in jobs:
            got = results[name]
            if got is not None:
                recall.items[name] = got
        asked = {source.name for source, _ in asks}
        for source in self.sources:
            if source.name not in asked and source.top_k is not None:
                recall.missed.setdefault(source.name, "not in this flow")
        return recall

    async def _timed(self, recall: Recall, name: str, job: Awaitable[T]) -> T | None:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.config.memory_timeout):  # no task of its own
                return await job
        except TimeoutError:
            recall.missed[name] = f"no answer within {self.config.memory_timeout}s"
        except Exception as exc:  # noqa: BLE001 - a memory left out never costs the answer
            recall.missed[name] = f"{type(exc).__name__}: {exc}"
        finally:
            recall.timings[name] = time.perf_counter() - started
        logger.warning("memory %s left out of the context: %s", name, recall.missed[name])
        return None

    async def _counted(self, job: Awaitable[list[Item] | None]) -> list[Item] | None:
        """``job``'s items with their tokens counted, up to the whole memory budget (an item
        past it is never chosen: the render takes a section's items in order)."""
        items = await job
        if items is None or self.counter is None:
            return items
        counted, spent, budget = [], 0, self.config.memory_token_budget
        for item in items:
            if spent > budget:
                counted.append(item)
                continue
            tokens = self.counter.count(item.text)
            spent += tokens
            counted.append(Item(item.text, item.ref, item.group, tokens))
        return counted

    async def _embed(self, question: str) -> list[float]:
        assert self.embedder is not None
        return (await self.embedder.embed([question]))[0]
