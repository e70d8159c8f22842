"""Making a record's plan: with the LLM (its facts judged against the stored ones), or
without it on the last delivery before dead-lettering when the LLM stays unavailable."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from react_mem.clients.facts import FactClient
from react_mem.clients.llm import TextCompletionClient
from react_mem.errors import LLMUnavailable, ReactMemError
from react_mem.learner import changes
from react_mem.learner.llm import JsonLLM
from react_mem.learner.metrics import LearnerMetrics
from react_mem.learner.planner import Plan, Planner
from react_mem.learner.settings import LearnerSettings
from react_mem.learner.writer import Writer
from react_mem.processor.context import MessageContext
from react_mem.schema.scope import Scope

logger = logging.getLogger(__name__)

MakePlan = Callable[[Planner], Awaitable[Plan]]


async def planned(
    ctx: MessageContext,
    to: Scope,
    make_plan: MakePlan,
    *,
    settings: LearnerSettings,
    metrics: LearnerMetrics,
    learner: str,
) -> Plan:
    """The plan ``make_plan`` makes; with the LLM, its facts judged (:mod:`.changes`)."""
    s, limits = settings, settings.limits()
    llm = JsonLLM(TextCompletionClient.of(ctx.flow), attempts=s.llm_attempts, timeout=s.llm_timeout)
    try:
        plan = await make_plan(Planner(llm, limits))
    except LLMUnavailable:
        # The last delivery before dead-lettering learns without the LLM in any case.
        if ctx.redelivery_count < min(s.llm_outage_redeliveries, s.max_redeliveries):
            raise
        logger.warning("%s: LLM still unavailable; learning without it", learner)
        metrics.degraded()
        return await make_plan(Planner(None, limits))
    if plan.facts and s.judge_fact_changes and FactClient.available(ctx.flow):
        try:
            stored = await Writer(ctx.flow, metrics).similar(to, plan.facts, changes.SHOWN)
        except ReactMemError as exc:  # only the judgement is lost: the rule still applies
            logger.warning("%s: facts not judged against stored ones: %s", learner, exc)
        else:
            plan.facts = await changes.judge(llm, plan.facts, stored)
    return plan


def with_run(plan: Plan, run: str) -> Plan:
    """Each planned fact names the learner run that stores it (the inspector shows it)."""
    for fact in plan.facts:
        fact.metadata["learner-run"] = run
    return plan
