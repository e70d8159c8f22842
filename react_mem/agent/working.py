"""Working memory: an invocation's steps compressed when they outgrow their threshold."""

from __future__ import annotations

import logging

from prometheus_client import Counter

from react_mem.agent.invocation import Invocation
from react_mem.agent.llm import Deadline
from react_mem.clients.working import WorkingMemoryClient
from react_mem.errors import ReactMemError
from react_mem.schema import AgentStep
from react_mem.tokens import TokenCounter, count_steps

logger = logging.getLogger(__name__)


async def compact(
    counter: TokenCounter, inv: Invocation, deadline: Deadline, compressions: Counter, who: str
) -> list[AgentStep]:
    """Working memory over its threshold is compressed by the working-memory service;
    if that fails the steps go on uncompressed (the LLM sees more, nothing is lost).
    It may take half of what is left of ``deadline``; the rest is the reasoning call's.
    ``compressions`` counts the requests, labelled with the processor ``who``."""
    history, cfg, scope, flow = list(inv.request.history), inv.cfg, inv.scope, inv.flow
    if not history or not WorkingMemoryClient.available(flow):
        return history
    if sum(count_steps(counter, history)) <= cfg.working_memory_threshold:
        return history
    compressions.labels(processor=who).inc()
    try:
        response = await WorkingMemoryClient.of(flow).compress(
            scope,
            history,
            threshold=cfg.working_memory_threshold,
            keep_recent=cfg.working_memory_keep_recent,
            timeout=deadline.remaining() / 2,
        )
    except ReactMemError as exc:  # uncompressed history still answers
        logger.warning("working memory not compressed: %s", exc)
        return history
    return response.steps
