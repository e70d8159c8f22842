"""The whole stack in one process: what ``react-mem up`` and ``react-mem demo`` run.

The group is ``config/groups/stack.yaml``: a config service seeded with every flow, the
agent, the memory learner, the four memory services and an LLM backend (in-process
llama.cpp by default, or any OpenAI-compatible endpoint).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.errors import ConfigurationError, RequestTimeout
from react_mem.processor.group import load_group
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.runtime import ProcessorEntry, resolve_processor
from react_mem.schema import (
    AgentRequest,
    AgentResponse,
    TextCompletionRequest,
    TextCompletionResponse,
)
from react_mem.schema.agent import MemoryState
from react_mem.schema.base import WireModel

#: Flow, group and playbook files: the repository's ``config/``, or REACT_MEM_CONFIG_DIR
#: where react-mem is installed from a wheel (the container image sets it).
CONFIG_DIR = Path(
    os.environ.get("REACT_MEM_CONFIG_DIR") or Path(__file__).resolve().parent.parent / "config"
)
STACK_GROUP = CONFIG_DIR / "groups" / "stack.yaml"
LLM_ID = "text-completion"
LEARNER_ID = "memory-learner"


def agent_queues(workspace: str = "default", flow: str = "default") -> tuple[str, str]:
    return (f"request:tg:agent:{workspace}:{flow}", f"response:tg:agent:{workspace}:{flow}")


def stack_entries(
    *,
    settings_file: Path | None,
    shared: dict[str, Any],
    llm: str = "llama-cpp",
    llm_settings: dict[str, Any] | None = None,
) -> list[ProcessorEntry]:
    """The stack's processors; ``llm`` picks the text-completion backend
    (``llama-cpp`` or ``openai``), ``llm_settings`` are its extra settings. The memory kinds
    are read here, once, and passed to every processor."""
    kinds = MemoryKinds.from_entry_points()
    entries = load_group(STACK_GROUP, kinds=kinds, settings_file=settings_file, shared=shared)
    cls = resolve_processor(f"text-completion-{llm}", kinds)
    result = []
    for entry in entries:
        if entry.settings.id == LLM_ID:
            values = {**entry.settings.model_dump(exclude_unset=True), **(llm_settings or {})}
            entry = ProcessorEntry(cls, cls.Settings.load(values, file=settings_file), kinds)
            if llm == "openai":
                _check_endpoint(entry.settings)
        elif llm == "llama-cpp" and entry.settings.id == LEARNER_ID:
            entry = _no_small_model_judgement(entry)
        result.append(entry)
    return result


def _no_small_model_judgement(entry: ProcessorEntry) -> ProcessorEntry:
    """The in-process model is a small one, whose word on which fact updates which did harm
    beside the slot rules (docs/memory-updates.md): the learner leaves it to the rules,
    unless the settings ask for the judgement."""
    if "judge_fact_changes" in entry.settings.model_fields_set:
        return entry
    settings = entry.settings.model_copy(update={"judge_fact_changes": False})
    return ProcessorEntry(entry.cls, settings, entry.kinds)


def _check_endpoint(settings: Any) -> None:
    """An OpenAI-compatible backend needs its endpoint named (or OpenAI's own API, which
    needs a key): otherwise every ask would fail later on a connection error."""
    named = "base_url" in settings.model_fields_set or os.environ.get("OPENAI_BASE_URL")
    if not named and settings.api_key is None:
        raise ConfigurationError(
            "--llm openai needs the server's URL: give --llm-url URL (env OPENAI_BASE_URL), "
            "e.g. http://localhost:8080/v1; for OpenAI's own API set OPENAI_API_KEY"
        )


class StartupProgress:
    """Prints each processor as it starts, and when all have."""

    def __init__(self, ids: list[str], out: TextIO = sys.stdout) -> None:
        self.waiting, self.out, self.began = set(ids), out, time.monotonic()
        self.all_started = asyncio.Event()

    def __call__(self, pid: str, seconds: float) -> None:
        if pid in self.waiting:
            self.waiting.discard(pid)
            print(f"  started {pid:<20} {seconds:5.1f} s", file=self.out, flush=True)
            if not self.waiting:
                self.all_started.set()


async def probe(
    transport: Transport,
    request_queue: str,
    response_queue: str,
    schema: type[WireModel],
    message: WireModel,
    *,
    deadline: float,
    say: Callable[[str], None],
    what: str,
) -> None:
    """Wait until a service answers ``message`` (any answer, errors included): a request
    sent before it subscribes is dropped, so ask again until one is answered."""
    client: RequestResponseClient[Any, Any] = RequestResponseClient(
        transport, request_queue, response_queue, schema, subscriber="react-mem-probe"
    )
    await client.start()
    began = time.monotonic()
    try:
        while True:
            try:
                await client.request(message, timeout=1.0)
                return
            except RequestTimeout:
                if time.monotonic() - began > deadline:
                    raise RequestTimeout(f"{what} did not come up within {deadline:.0f}s") from None
                say(f"  waiting for {what} ({time.monotonic() - began:.0f} s)")
    finally:
        await client.close()


def agent_probe() -> AgentRequest:
    """What the agent refuses at once: memory state it did not seal."""
    return AgentRequest(memory=MemoryState())


async def wait_until_ready(
    transport: Transport, say: Callable[[str], None], deadline: float = 300.0
) -> None:
    """The agent and the LLM answer: both refuse a bad request at once (the agent one
    carrying memory state it did not seal, the LLM an empty one), which proves they have
    their flows without spending a model call or touching memory. An empty question would
    not do: the agent runs it, as agent-manager does."""
    req, resp = agent_queues()
    await probe(
        transport,
        req,
        resp,
        AgentResponse,
        agent_probe(),
        deadline=deadline,
        say=say,
        what="the agent",
    )
    await probe(
        transport,
        "request:tg:text-completion:default:default",
        "response:tg:text-completion:default:default",
        TextCompletionResponse,
        TextCompletionRequest(),
        deadline=deadline,
        say=say,
        what="the LLM",
    )
