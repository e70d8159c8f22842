"""One ReAct step's action: the chosen tool run, every outcome (failures included) made
the step's observation, streamed to the caller as it happens."""

from __future__ import annotations

import asyncio
import time

from react_mem.agent.invocation import Invocation
from react_mem.agent.metrics import AgentMetrics
from react_mem.agent.parse import Action, ParseError
from react_mem.agent.respond import Responder
from react_mem.agent.tools import Tool, ToolCall
from react_mem.schema import AgentStep
from react_mem.schema.trajectory import PARSE_ERROR_ACTION


async def act(
    inv: Invocation,
    decision: Action | ParseError,
    tools: dict[str, Tool],
    respond: Responder,
    *,
    metrics: AgentMetrics,
    processor: str,
) -> AgentStep:
    """Run the chosen tool; every outcome, failures included, becomes the observation."""
    if isinstance(decision, ParseError):
        observation = f"Your reply could not be parsed: {decision}"
        if inv.request.streaming:
            await respond.thought("")  # closes a streamed thought, if one is open
        await respond.observation(observation)
        return AgentStep(action=PARSE_ERROR_ACTION, observation=observation)
    await respond.action(decision.name, decision.arguments, decision.thought, say=True)
    tool = tools.get(decision.name)
    labels = {"processor": processor, "tool": decision.name if tool else "unknown"}
    if tool is None:
        names = ", ".join(sorted(tools)) or "none"
        observation = f"Unknown tool {decision.name!r}. Available tools: {names}."
        step_type = "tool-error"
    else:
        metrics.tool_calls.labels(**labels).inc()
        started = time.perf_counter()
        timeout = inv.cfg.tool_timeout
        call = ToolCall(
            flow=inv.flow, scope=inv.scope, arguments=decision.arguments, timeout=timeout
        )
        try:
            observation = await asyncio.wait_for(tool.invoke(call), timeout)
            step_type = ""
        except Exception as exc:  # noqa: BLE001 - any tool failure is an observation
            metrics.tool_errors.labels(**labels).inc()
            reason = str(exc) or type(exc).__name__
            observation = f"Tool {decision.name} failed: {reason}"
            step_type = "tool-error"
        metrics.tool_duration.labels(**labels).observe(time.perf_counter() - started)
    await respond.observation(observation, error=observation if step_type else None)
    return AgentStep(
        thought=decision.thought,
        action=decision.name,
        arguments=decision.arguments,
        observation=observation,
        step_type=step_type,
    )
