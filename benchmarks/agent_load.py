"""The load ``agent_throughput.py`` puts on the agent, in either layout: the scripted LLM's
answers, the callers' questions and the loop of asks each caller runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

from react_mem.schema import AgentResponse, TextCompletionRequest

SUBJECTS = ("sister", "dentist", "landlord", "manager", "neighbour", "coach", "cousin")
CITIES = ("Lisbon", "Osaka", "Bergen", "Krakow", "Montreal", "Tbilisi", "Valparaiso")
THINGS = ("the train times", "a birthday gift", "the weekend", "a recipe", "the budget")

Ask = Callable[..., Awaitable[list[AgentResponse]]]


def script(request: TextCompletionRequest) -> str:
    """The agent's prompts get a final answer; the learner's JSON questions an answer in
    the shape they ask for."""
    if request.system.startswith("You are a helpful agent"):
        return "Thought: I can answer this directly.\nFinal Answer: Here is a short answer."
    asked = (request.schema_ or {}).get("properties", {})
    if "facts" in asked:
        line = request.prompt.split("Question: ", 1)[-1].split("\n", 1)[0][:120]
        return json.dumps({"facts": [f"The user mentioned: {line}"]})
    if "summary" in asked:
        return json.dumps({"summary": "The user asked a few questions and got short answers."})
    if "lessons" in asked:
        return json.dumps({"lessons": ["Answer short questions directly."]})
    if request.response_format == "json":
        return "{}"
    return "Summary: earlier steps looked things up."


def question(caller: int, n: int) -> str:
    who, city = SUBJECTS[(caller + n) % len(SUBJECTS)], CITIES[(caller * 3 + n) % len(CITIES)]
    if n % 4 == 0:
        return f"Please remember that my {who} lives in {city} (note {caller}-{n})."
    return f"Can you help me plan {THINGS[n % len(THINGS)]} with my {who} in {city}?"


async def ask_loop(
    ask: Ask, callers: int, seconds: float, base: int, *, pause: float, timeout: float
) -> list[tuple[float, float]]:
    """``callers`` callers asking back to back for ``seconds`` (each waits ``pause`` after
    an answer); every ask's (start, end) on the ``perf_counter`` clock, which on Linux is
    the system's monotonic clock, so another process's stamps compare with these."""
    stop = time.perf_counter() + seconds
    spans: list[tuple[float, float]] = []

    async def caller(c: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            started = time.perf_counter()
            got = await ask(
                question(c, n),
                user=f"user-{c % 8}",
                conversation_id=f"bench-{base}-{c}-{n // 10}",
                timeout=timeout,
            )
            ended = time.perf_counter()
            if got[-1].error is not None:
                raise RuntimeError(f"ask failed: {got[-1].error}")
            spans.append((started, ended))
            n += 1
            if pause:
                await asyncio.sleep(pause)

    await asyncio.gather(*(caller(c) for c in range(callers)))
    return spans


def overheads(spans: list[tuple[float, float]], llm: list[tuple[float, float]]) -> list[float]:
    """Each ask's latency less the LLM waits the agent observed (stamped at their end)
    within it: one caller's asks do not overlap, so each wait belongs to one ask."""
    waits = sorted(llm)
    found, i = [], 0
    for start, end in sorted(spans):
        waited = 0.0
        while i < len(waits) and waits[i][0] <= end:
            if waits[i][0] >= start:
                waited += waits[i][1]
            i += 1
        found.append(end - start - waited)
    return found
