"""Does a model use what memory recalled? The demo's second question, asked of a local
model with the agent's own prompt (system prompt, fenced memory, JSON reply format and
schema, the stack's memory tools), as the agent would ask it in session 2.

Used by the demo (what counts as using the fact), by the slow test against the real
local model and by ``benchmarks/local_model.py`` to compare models. Nothing here is a test
double: the prompt comes from the agent's prompt code, the reply goes through its parser.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from react_mem.agent import json_reply, prompt
from react_mem.agent.items import episode_items, fact_items
from react_mem.agent.parse import Final, ParseError
from react_mem.agent.sources import Sources
from react_mem.agent.tools import Argument, Tool
from react_mem.llm.base import Prompt
from react_mem.llm.llama_cpp import LlamaCppBackend, LlamaCppSettings
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema.episodes import Episode
from react_mem.schema.facts import Fact
from react_mem.stack import CONFIG_DIR
from react_mem.tokens import HFTokenCounter

#: What session 1 of the demo left in memory, and session 2's question.
FACT = "The user is allergic to peanuts."
EPISODE = "Hi, I'm Ada. Please remember that I am allergic to peanuts."
QUESTION = "Can you suggest a snack for me for the train?"
#: Sampling temperature of the seeded tries (the stack decodes greedily, temperature 0).
SAMPLING = 0.7
#: Words in an answer that show the fact was used.
EVIDENCE = ("peanut", "allerg", "nut-free", "nut free")


async def _unused(_: object) -> str:
    raise RuntimeError("the probe runs no tool")


def stack_tools() -> list[Tool]:
    """The tools the embedded stack's agent offers, for the prompt only: the memory tools,
    unless its ``agent-mem`` turns them off (it does, for the tiny local model)."""
    flows = yaml.safe_load((CONFIG_DIR / "flows" / "stack.yaml").read_text())
    if not flows["default"]["agent-mem"].get("enable-memory-tools", True):
        return []
    query = (Argument("query", "string", "What to look for"),)
    fact = (Argument("fact_content", "string", "The fact, as one sentence"),)
    return [
        Tool("RecallEpisodes", "Search similar past problem-solving episodes", query, _unused),
        Tool("RetrieveFacts", "Retrieve more facts from long-term memory", query, _unused),
        Tool("StoreFact", "Store a fact for future conversations", fact, _unused),
    ]


def second_session_prompt(budget: int = 800) -> Prompt:
    """The agent's first-iteration prompt for session 2, memory as recalled in the demo."""
    counter = HFTokenCounter.from_file()
    facts = fact_items([Fact(id="f1", content=FACT, score=0.6)])
    episodes = episode_items([Episode(id="e1", goal=EPISODE, similarity=0.4)])
    layout = prompt.Layout.of(Sources.of(MemoryKinds.from_entry_points()))
    context = prompt.render_context(
        counter, budget, {"facts": facts, "conversation": [], "episodes": episodes}, layout
    )
    tools = stack_tools()
    system = prompt.system_prompt(tools, None, json_reply.FORMAT)
    user = prompt.user_prompt(context.memory, [], QUESTION)
    names = sorted(t.name for t in tools)
    return Prompt(system=system, prompt=user, json=True, schema=json_reply.schema(names))


@dataclass(frozen=True)
class Trial:
    seed: int
    reply: str
    answer: str | None
    action: str | None
    seconds: float
    out_tokens: int

    @property
    def recalled(self) -> bool:
        return self.answer is not None and mentions_fact(self.answer)


def mentions_fact(answer: str) -> bool:
    text = answer.lower()
    return any(word in text for word in EVIDENCE)


def settings(model_path: Path | None, seed: int, temperature: float) -> LlamaCppSettings:
    return LlamaCppSettings.load(
        {"id": "recall-probe", "model_path": model_path, "seed": seed, "temperature": temperature}
    )


async def ask(model_path: Path | None, seed: int, temperature: float = SAMPLING) -> Trial:
    """One try with a fresh model (llama.cpp seeds per model); ``None``: the packaged one."""
    backend = LlamaCppBackend(settings(model_path, seed, temperature))
    await backend.start()
    try:
        started = time.perf_counter()
        completion = await backend.complete(second_session_prompt())
        seconds = time.perf_counter() - started
    finally:
        await backend.close()
    answer = action = None
    try:
        decision = json_reply.parse_json_reply(completion.text)
    except ParseError:
        pass
    else:
        if isinstance(decision, Final):
            answer, action = decision.answer, json_reply.ANSWER
        else:
            action = decision.name
    return Trial(seed, completion.text, answer, action, seconds, completion.out_token or 0)


def pass_rate(trials: Sequence[Trial]) -> float:
    return sum(t.recalled for t in trials) / len(trials) if trials else 0.0
