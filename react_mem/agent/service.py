"""The memory-augmented ReAct agent: TrustGraph's agent-manager, with memory.

One ReAct iteration per message. The first iteration recalls memory and renders the
memory section of the prompt; it and the invocation's counters travel on in
``AgentRequest.memory``, with ``conversation_id`` and ``session_id``, through the ``next``
queue (the request queue), so any replica continues any invocation. The agent seals that
state (``seal``) and refuses one it did not seal for this invocation. The turn is appended
to conversation memory and the trajectory published for the memory learner before the
answer is sent (``ending``): an answer is never given whose learning could still be lost.

Each iteration ends, within its LLM deadline (``llm_deadline``, or the workspace's
``llm-timeout``), in progress for the caller (a thought, an observation, the answer) or an
``llm-error``: the text-completion service owns the retries, and an LLM failure is
answered, never redelivered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from react_mem.agent import json_reply, prompt
from react_mem.agent.act import act
from react_mem.agent.config import AGENT_CONFIG_TYPE, AgentMemConfig, agent_values
from react_mem.agent.credit import cited_bullets, shown_bullets
from react_mem.agent.data_tools import TOOL_SERVICE_CONFIG_TYPE
from react_mem.agent.ending import InvocationEnd
from react_mem.agent.finish import short, tool_errors
from react_mem.agent.invocation import Invocation
from react_mem.agent.llm import Deadline, LLMError, ReplyFormat, Usage, decide
from react_mem.agent.memory_tools import memory_tools
from react_mem.agent.metrics import agent_metrics
from react_mem.agent.parse import Action, Final
from react_mem.agent.recall import MemoryRecall
from react_mem.agent.respond import (
    EXPLAINABILITY,
    Responder,
    error_response,
)
from react_mem.agent.seal import SeenSeals, StateSealer, invocation, load_key, with_history
from react_mem.agent.settings import AgentSettings, client_specs
from react_mem.agent.sources import Sources, recent_state
from react_mem.agent.tools import TOOL_CONFIG_TYPE, Tool, tools_from_config
from react_mem.agent.working import compact
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.errors import ConfigurationError
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.processor.started import Started
from react_mem.schema import (
    AgentRequest,
    AgentResponse,
    AgentStep,
)
from react_mem.schema.agent import MemoryState
from react_mem.schema.services import (
    Triples,
)
from react_mem.schema.trajectory import Outcome, Trajectory
from react_mem.tokens import HFTokenCounter, TokenCounter

logger = logging.getLogger(__name__)


@dataclass
class Workspace:
    """One workspace's agent configuration: raw config by type, and what it means."""

    raw: dict[str, dict[str, str]] = field(default_factory=dict)
    config: AgentMemConfig = field(default_factory=AgentMemConfig)
    tools: dict[str, Tool] = field(default_factory=dict)


@dataclass(frozen=True)
class Loaded:
    """What the agent's start() loads: the token counter (prompt budgets, working-memory
    threshold), the key that seals memory state, and the embedder of recall's queries."""

    counter: TokenCounter
    sealer: StateSealer
    embedder: Embedder


class AgentProcessor(Processor):
    Settings: ClassVar[type[ProcessorSettings]] = AgentSettings
    default_id: ClassVar[str] = "agent-mem"
    #: Of the ``Settings`` class (:class:`Processor` revalidates what it is given as it).
    settings: AgentSettings

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        embedder: Embedder | None = None,
        kinds: MemoryKinds | None = None,
    ) -> None:
        """``embedder``: default the process-wide one for the configured model. ``kinds``: the
        memory kinds it recalls from (the runtime passes the ones it read at start-up; by
        default the installed packages')."""
        super().__init__(settings, transport, registry=registry)
        self.metrics = agent_metrics(registry)
        self._given_embedder = embedder
        #: What start() loads; the request handler gets it first.
        self.started: Started[Loaded] = Started(self.id)
        #: What it recalls from, the memory section's layout and the keys its config takes.
        self.sources = Sources.of(MemoryKinds.from_entry_points() if kinds is None else kinds)
        self.layout = prompt.Layout.of(self.sources)
        #: The turn's append and the trajectory's publish, at each invocation's end.
        self.ending = InvocationEnd(self.id, self.settings, self.metrics)
        self.seen_seals = SeenSeals(self.settings.memory_state_max_age)
        self.workspaces: dict[str, Workspace] = {}
        self.register_specification(
            ConsumerSpec(
                name="request",
                schema=AgentRequest,
                handler=self.started.bind(self.on_request),
                response="response",
                error_reply=lambda e: error_response(e.message, kind=e.type or "agent-error"),
            )
        )
        self.register_specification(ProducerSpec(name="next", schema=AgentRequest))
        self.register_specification(ProducerSpec(name="response", schema=AgentResponse))
        self.register_specification(
            ProducerSpec(name="trajectory", schema=Trajectory, optional=True)
        )
        self.register_specification(
            ProducerSpec(name=EXPLAINABILITY, schema=Triples, optional=True)
        )
        for spec in client_specs(self.sources):
            self.register_specification(spec)
        self.register_config_handler(
            [
                TOOL_CONFIG_TYPE,
                TOOL_SERVICE_CONFIG_TYPE,
                AGENT_CONFIG_TYPE,
                self.settings.config_type,
            ],
            self.on_agent_config,
        )

    @classmethod
    def create(
        cls, settings: ProcessorSettings, transport: Transport, kinds: MemoryKinds
    ) -> AgentProcessor:
        return cls(settings, transport, kinds=kinds)

    async def start(self) -> None:
        s = self.settings
        counter = await asyncio.to_thread(HFTokenCounter.from_file, s.tokenizer)
        given = s.memory_state_key.get_secret_value() if s.memory_state_key else None
        key_file = s.memory_state_key_file or s.state_dir / "agent" / "memory-state.key"
        sealer = StateSealer(await asyncio.to_thread(load_key, given, key_file))
        embedder = self._given_embedder
        if embedder is None:
            from react_mem.embedding.shared import shared_embedder

            embedder = shared_embedder(s)
        await embedder.start()
        self.started.open(Loaded(counter, sealer, embedder))
        await super().start()

    # -- configuration ---------------------------------------------------------
    def defaults(self) -> dict[str, Any]:
        s = self.settings
        return {"max-iterations": s.max_iterations, "llm-timeout": s.llm_deadline}

    def workspace(self, name: str) -> Workspace:
        return self.workspaces.get(name) or Workspace(
            config=AgentMemConfig.parse({}, keys=self.sources.keys, defaults=self.defaults())
        )

    async def on_agent_config(
        self, workspace: str, config: dict[str, dict[str, str]], version: int
    ) -> None:
        current = self.workspaces.get(workspace) or Workspace()
        raw = {**current.raw, **config}
        try:
            parsed = AgentMemConfig.parse(
                agent_values(raw, self.settings.config_type),
                keys=self.sources.keys,
                defaults=self.defaults(),
            )
        except ConfigurationError as exc:
            logger.error(
                "%s: %s (workspace %s keeps its previous settings)", self.id, exc, workspace
            )
            parsed = current.config if workspace in self.workspaces else self.workspace("").config
        tools = tools_from_config(
            raw.get(TOOL_CONFIG_TYPE, {}), raw.get(TOOL_SERVICE_CONFIG_TYPE, {})
        )
        self.workspaces[workspace] = Workspace(raw=raw, config=parsed, tools=tools)
        logger.info(
            "%s: workspace %s config v%d: %d tools, max-iterations %d",
            self.id,
            workspace,
            version,
            len(tools),
            parsed.max_iterations,
        )

    # -- one iteration -----------------------------------------------------------
    async def on_request(self, loaded: Loaded, request: AgentRequest, ctx: MessageContext) -> None:
        ws = self.workspace(ctx.flow.workspace)
        cfg = ws.config
        deadline = Deadline.after(cfg.llm_timeout)
        inv = Invocation.of(request, ctx.flow, cfg)
        request, flow = inv.request, inv.flow
        bound_to = invocation(request, flow.workspace, flow.name)
        if request.memory is None:
            inv.state = await self.begin(loaded, inv)
        else:  # only the agent's own state, for this invocation, reaches the prompt, once
            inv.state = loaded.sealer.open(request.memory, with_history(bound_to, request.history))
            if ctx.redelivery_count == 0:  # a consumer's retry is not a replay
                self.seen_seals.claim(inv.state)
        inv.state = inv.state.model_copy(update={"iteration": inv.state.iteration + 1})
        respond = Responder(
            ctx,
            request.session_id,
            inv.state.iteration,
            request.streaming,
            collection=request.collection,
            question=request.question,
        )
        respond.used = inv.state.used
        if inv.state.iteration == 1:  # provenance: the question and the memory recalled
            respond.question(request.question, inv.state.used)  # sent beside the LLM call
        try:
            await self.iterate(loaded, inv, ws, deadline, respond, ctx)
        finally:
            await respond.settled()

    async def iterate(
        self,
        loaded: Loaded,
        inv: Invocation,
        ws: Workspace,
        deadline: Deadline,
        respond: Responder,
        ctx: MessageContext,
    ) -> None:
        """The iteration past its memory: the LLM's decision, then the answer or the
        action and the next iteration's request."""
        request, flow, cfg = inv.request, inv.flow, ws.config
        bound_to = invocation(request, flow.workspace, flow.name)
        if inv.state.iteration > cfg.max_iterations:
            message = (
                f"No final answer within max-iterations ({cfg.max_iterations}); "
                f"the last step was: {_last_observation(request.history)}"
            )
            await respond.error(message)
            self.metrics.sessions.labels(processor=self.id, outcome="max-iterations").inc()
            self.metrics.iterations.labels(processor=self.id).observe(cfg.max_iterations)
            await self.ending.finish(inv, "", "failure", message)
            return

        history = await compact(loaded.counter, inv, deadline, self.metrics.compressions, self.id)
        if len(history) < len(request.history):
            inv.state = inv.state.model_copy(update={"compressions": inv.state.compressions + 1})
        tools = self.tools_for(ws, inv)
        shown = shown_bullets(inv.state)
        form = ReplyFormat(
            json=cfg.reply_format == "json", tool_names=sorted(tools), bullet_ids=shown
        )
        system = prompt.system_prompt(
            list(tools.values()),
            cfg.additional_context,
            json_reply.FORMAT if form.json else prompt.FORMAT,
            cite=(json_reply.CITE if form.json else prompt.CITE) if shown else "",
        )
        user = prompt.user_prompt(
            inv.state.context, history, request.question, inv.state.post_context
        )

        usage = Usage()
        sink = respond.stream_chunk if request.streaming else None
        started = time.perf_counter()
        try:
            decision, retries = await decide(
                flow, system, user, usage, deadline=deadline, sink=sink, form=form
            )
        except LLMError as exc:
            # Already retried by the text-completion service: answered, not redelivered.
            logger.warning("%s: session %s: %s", self.id, request.session_id, exc)
            await respond.error(str(exc), kind="llm-error")
            self.metrics.sessions.labels(processor=self.id, outcome="llm-error").inc()
            self.metrics.iterations.labels(processor=self.id).observe(inv.state.iteration)
            return
        self.metrics.llm_duration.labels(processor=self.id).observe(time.perf_counter() - started)
        if retries:
            self.metrics.parse_retries.labels(processor=self.id).inc(retries)
        state = inv.state
        inv.state = state.model_copy(
            update={
                "in_tokens": state.in_tokens + usage.in_tokens,
                "out_tokens": state.out_tokens + usage.out_tokens,
                "parse_retries": state.parse_retries + retries,
                "cited": cited_bullets(state, decision, shown),
            }
        )

        if isinstance(decision, Final):
            respond.in_token, respond.out_token = inv.state.in_tokens, inv.state.out_tokens
            respond.model = usage.model
            outcome: Outcome = "partial" if tool_errors(inv.state.steps) else "success"
            # Learning first: the answer goes out only once its trajectory is on the
            # persistent flow (an answered "remember that ..." is never lost) and its turn
            # is on its way to conversation memory ahead of any follow-up (``turn_wait``:
            # sent, or stored); the two run side by side, and beside the send of the thought
            # and the conclusion's provenance event, which ends before anything else is sent
            # (an error from learning included), so the caller's stream keeps its order.
            stored = self.ending.answer_waits_for_stored(inv)
            turn = self.ending.start_turn(inv, decision.answer, outcome, before_answer=stored)
            concluded = asyncio.ensure_future(respond.conclude(decision.thought, decision.answer))
            try:
                note = await self.ending.finish(
                    inv, decision.answer, outcome, None, turn, answered=False, stored=stored
                )
            finally:
                await concluded
            await respond.answer(f"{decision.answer}\n\n({note})" if note else decision.answer)
            self.metrics.sessions.labels(processor=self.id, outcome="completed").inc()
            self.metrics.iterations.labels(processor=self.id).observe(inv.state.iteration)
            return

        step = await act(inv, decision, tools, respond, metrics=self.metrics, processor=self.id)
        next_state = request.state
        if isinstance(decision, Action) and decision.name in tools:
            next_state = tools[decision.name].next_state(request.state or "undefined")
        inv.state = inv.state.model_copy(update={"steps": [*inv.state.steps, step]})
        await flow.send(
            "next",
            request.model_copy(
                update={
                    "history": [*history, step],
                    "state": next_state,
                    "memory": loaded.sealer.seal(
                        inv.state, with_history(bound_to, [*history, step])
                    ),
                }
            ),
            id=ctx.id,
        )

    async def begin(self, loaded: Loaded, inv: Invocation) -> MemoryState:
        """Invocation start: recall memory and render it within the budget."""
        request, cfg = inv.request, inv.cfg
        state = MemoryState(started_at=time.time(), steps=list(request.history))
        if not inv.memory_on or cfg.memory_token_budget == 0:
            return state
        started = time.perf_counter()
        recaller = MemoryRecall(inv.flow, loaded.embedder, cfg, self.sources, loaded.counter)
        recall = await recaller.recall(
            request.question,
            inv.scope,
            recent_state(request.history),
            request.task_type,
            first=self.ending.previous_turn(inv),  # the question's embedding goes first
        )
        if recall.holds:
            state = state.model_copy(update={"hold_turn": True})
        self.metrics.memory_recall.labels(processor=self.id).observe(time.perf_counter() - started)
        for source in recall.missed:
            self.metrics.memory_missed.labels(processor=self.id, source=source).inc()
        context = prompt.render_context(
            loaded.counter,
            cfg.memory_token_budget,
            recall.items,
            self.layout,
            playbook_share=cfg.playbook_token_share,
            post_context=cfg.playbook_injection == "post_context",
        )
        return state.model_copy(
            update={"context": context.memory, "post_context": context.post, "used": context.used}
        )

    def tools_for(self, ws: Workspace, inv: Invocation) -> dict[str, Tool]:
        request = inv.request
        tools = {
            name: tool
            for name, tool in ws.tools.items()
            if tool.available(request.group, request.state)
        }
        cfg = ws.config
        if inv.memory_on and cfg.enable_memory_tools:
            for tool in memory_tools(
                inv.flow,
                cfg.fact_tool_top_k,
                cfg.episode_retrieval_top_k,
                fact_min_score=cfg.fact_min_score,
                episode_min_score=cfg.episode_min_score,
            ):
                tools.setdefault(tool.name, tool)
        return tools

    async def stop(self) -> None:
        """Give the turns still on their way to conversation memory their time to be
        stored (``memory_write_timeout``), then stop."""
        left = await self.ending.drain()
        if left:
            logger.error("%s: %d conversation turns not stored at stop", self.id, left)
        await super().stop()


def _last_observation(history: list[AgentStep]) -> str:
    return short(history[-1].observation) if history else "none"
