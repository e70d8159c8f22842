"""Invocation start: recall what memory holds for a question, in parallel, never failing.

The question is embedded once, while the sources that need no vector (the conversation,
loaded by id) are already being asked; then every source that recalls by similarity is
asked by that vector, all at once, each with its own timeout. The sources are those the
agent read from its memory kinds (``react_mem.agent.sources.Sources``). A memory service
that is absent from the flow, slow or failing thins the context; it never fails the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
    ) -> None:
        self.flow, self.embedder, self.config = flow, embedder, config
        self.sources = tuple(sources)

    async def recall(
        self, question: str, scope: Scope, state: str = "", task_type: str = ""
    ) -> Recall:
        """``state``: the invocation's recent steps, which episode recall also reads;
        ``task_type``: the request's, which the playbook's topic boost reads."""
        cfg, recall = self.config, Recall()
        asks = {s: s.ask(self.flow, cfg, question, scope) for s in self.sources}
        asks = {
            s: None
            if ask is None
            else dataclasses.replace(ask, state=state, task_type=task_type, holds=recall.holds)
            for s, ask in asks.items()
        }
        jobs: dict[str, Awaitable[list[Item] | None]] = {}
        # Sources that need no vector are asked at once, while the question is embedded.
        for source, ask in asks.items():
            if ask is not None and not source.embeds(cfg):
                jobs[source.name] = asyncio.ensure_future(
                    self._timed(recall, source.name, source.fetch(ask))
                )
        vector = None
        if self.embedder is not None and any(
            ask is not None and s.embeds(cfg) for s, ask in asks.items()
        ):
            vector = await self._timed(recall, "embed", self._embed(question))
        for source, ask in asks.items():
            if ask is not None and source.embeds(cfg):
                ask = dataclasses.replace(ask, vector=vector)
                jobs[source.name] = self._timed(recall, source.name, source.fetch(ask))
        results = await asyncio.gather(*jobs.values())
        for name, result in zip(jobs, results, strict=True):
            if result is not None:
                recall.items[name] = result
        for source, ask in asks.items():
            if ask is None and source.top_k is not None:
                recall.missed.setdefault(source.name, "not in this flow")
        return recall

    async def _timed(self, recall: Recall, name: str, job: Awaitable[T]) -> T | None:
        started = time.perf_counter()
        try:
            return await asyncio.wait_for(job, self.config.memory_timeout)
        except TimeoutError:
            recall.missed[name] = f"no answer within {self.config.memory_timeout}s"
        except Exception as exc:  # noqa: BLE001 - a memory left out never costs the answer
            recall.missed[name] = f"{type(exc).__name__}: {exc}"
        finally:
            recall.timings[name] = time.perf_counter() - started
        logger.warning("memory %s left out of the context: %s", name, recall.missed[name])
        return None

    async def _embed(self, question: str) -> list[float]:
        assert self.embedder is not None
        return (await self.embedder.embed([question]))[0]
