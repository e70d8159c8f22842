"""The memory-learner processor: learning off the reply path (seed 004, "Invocation End"
and "Conversation End").

It consumes the agent's :class:`Trajectory` records and conversation-memory's
:class:`ConversationEnded` events, both from persistent flow queues, and writes the
rolling summary, extracted facts and episodes through the memory services. Each record is
learned exactly once under redelivery: see :mod:`.ledger` for how.

Where the flow has playbook-memory, it also learns a playbook (ACE, :mod:`.ace`): each
trajectory is reflected on and curated into a delta, and :class:`Feedback` on the flow's
``feedback`` queue re-runs the reflection of the trajectory it is about.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.clients.conversations import CONVERSATION_MEMORY
from react_mem.clients.episodes import EPISODE_MEMORY
from react_mem.clients.facts import FACT_MEMORY
from react_mem.clients.llm import TEXT_COMPLETION
from react_mem.clients.playbook import PLAYBOOK_MEMORY, PlaybookClient
from react_mem.disk import MIB, DiskFloor, DiskNeed
from react_mem.errors import (
    BadRequest,
    ServiceRefused,
    TransientError,
)
from react_mem.learner.ace import AceConfig, feedback_key, window_key
from react_mem.learner.checks import MAX_ID_CHARS, check_feedback, checked_trajectory
from react_mem.learner.cipher import LedgerCipher, load_key
from react_mem.learner.ledger import TrajectoryLedger
from react_mem.learner.locks import InFlight, KeyedLocks
from react_mem.learner.metrics import Lag, LearnerMetrics
from react_mem.learner.planner import Plan, Planner
from react_mem.learner.planning import MakePlan, planned, with_run
from react_mem.learner.settings import LearnerSettings, agent_mem_flag
from react_mem.learner.writer import Writer
from react_mem.processor.base import Processor
from react_mem.processor.config_source import WorkspaceConfig
from react_mem.processor.context import MessageContext
from react_mem.processor.flow import Flow
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.processor.started import Started
from react_mem.retention import CONFIG_TYPE as RETENTION_CONFIG_TYPE
from react_mem.retention import WorkspaceRetention
from react_mem.schema.conversations import ConversationEnded
from react_mem.schema.forget import MEMORY_FORGET, ForgetRequest, ForgetResponse, Forgotten
from react_mem.schema.playbook import Feedback
from react_mem.schema.scope import Scope
from react_mem.schema.trajectory import Trajectory

logger = logging.getLogger(__name__)

AGENT_MEM = "agent-mem"
#: Seconds a forget waits for the user's learning under way to land (then it goes on).
FORGET_WAIT = 60.0

Write = Callable[[Scope, Plan], Awaitable[bool]]
#: The metric kind of what each step writes.
STEP_KINDS = {"summary": "summary", "facts": "fact", "episode": "episode", "playbook": "delta"}


class TrajectoryNotYet(TransientError):
    """Feedback about a trajectory not learned (yet): retried a few times, then settled."""


class MemoryLearnerProcessor(Processor):
    Settings: ClassVar[type[ProcessorSettings]] = LearnerSettings
    #: Of the ``Settings`` class (:class:`Processor` revalidates what it is given as it).
    settings: LearnerSettings
    default_id: ClassVar[str] = "memory-learner"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.learner_settings = self.settings
        self.metrics = LearnerMetrics(registry, self.id)
        self.lag = Lag(registry, self.id, time.time)
        self._ace = self.learner_settings.ace()
        #: The ledger, opened by start(); handlers get it first.
        self.started: Started[TrajectoryLedger] = Started(self.id)
        bind = self.started.bind
        self._locks = KeyedLocks()
        #: Each owner's learning under way, which a forget waits out.
        self._learning = InFlight()
        #: Per workspace: agent-mem's (enable-auto-fact-extraction, enable-episode-recording).
        self._agent_mem: dict[str, tuple[bool, bool]] = {}
        self.ledger_retention = WorkspaceRetention(
            self.id, "ledger-retention-days", self.learner_settings.ledger_retention_days
        )
        self.register_config_handler([RETENTION_CONFIG_TYPE], self.ledger_retention.on_config)
        self.register_specification(
            ConsumerSpec(name="trajectory", schema=Trajectory, handler=bind(self.on_trajectory))
        )
        self.register_specification(
            ConsumerSpec(
                name="conversation-ended", schema=ConversationEnded, handler=bind(self.on_ended)
            )
        )
        self.register_specification(
            ConsumerSpec(
                name="feedback", schema=Feedback, handler=bind(self.on_feedback), optional=True
            )
        )
        # Forgetting a user: a persistent queue, so a forget sent while the learner is down
        # is done when it comes back; the reply reports what the ledger held.
        self.register_specification(
            ConsumerSpec(
                name=MEMORY_FORGET,
                schema=ForgetRequest,
                handler=self.audited_consumer(bind(self.on_forget), "forget"),
                response=f"{MEMORY_FORGET}-response",
                error_reply=lambda error: ForgetResponse(error=error),
                optional=True,
            )
        )
        self.register_specification(
            ProducerSpec(name=f"{MEMORY_FORGET}-response", schema=ForgetResponse, optional=True)
        )
        s = self.learner_settings
        self.register_specification(TEXT_COMPLETION.spec(timeout=s.llm_timeout))
        for memory in (FACT_MEMORY, EPISODE_MEMORY, CONVERSATION_MEMORY):
            self.register_specification(
                memory.spec(timeout=s.memory_timeout, resend=s.memory_resend)
            )
        self.register_specification(
            PLAYBOOK_MEMORY.spec(timeout=s.memory_timeout, optional=True, resend=s.memory_resend)
        )
        self.register_config_handler([AGENT_MEM], self.on_agent_mem)

    @classmethod
    def disk_needs(cls, settings: ProcessorSettings) -> list[DiskNeed]:
        s = LearnerSettings.load(settings.model_dump())
        return [
            DiskNeed(f"{s.id}'s ledger", s.ledger_file().parent, MIB, s.min_free_disk_mib * MIB)
        ]

    async def start(self) -> None:
        s = self.learner_settings
        path = s.ledger_file()
        key = s.ledger_key.get_secret_value() if s.ledger_key is not None else None
        key_file = s.ledger_key_file or path.with_name(f"{path.name}.key")
        ledger = TrajectoryLedger(
            path,
            retention=s.ledger_retention_days * 86400,
            overrides=self.ledger_retention.overrides,
            cipher=LedgerCipher(await asyncio.to_thread(load_key, key, key_file)),
            floor=DiskFloor(f"{self.id}'s ledger", path.parent, s.min_free_disk_mib),
        )
        await ledger.open()
        self.started.open(ledger)
        try:
            await super().start()
        except BaseException:
            self.started.close()
            await ledger.close()
            raise

    async def stop(self) -> None:
        await super().stop()
        if (ledger := self.started.close()) is not None:
            await ledger.close()

    async def on_agent_mem(self, workspace: str, config: WorkspaceConfig, version: int) -> None:
        values = config.get(AGENT_MEM, {})
        self._agent_mem[workspace] = (
            agent_mem_flag(values.get("enable-auto-fact-extraction")),
            agent_mem_flag(values.get("enable-episode-recording")),
        )

    # -- handlers ----------------------------------------------------------------
    async def on_trajectory(
        self, ledger: TrajectoryLedger, t: Trajectory, ctx: MessageContext
    ) -> None:
        record_id = checked_trajectory(t)
        token = self.lag.begin(t.finished_at)
        try:
            await self._trajectory(ledger, t, record_id, ctx)
        finally:
            self.lag.end(token)

    async def _trajectory(
        self, ledger: TrajectoryLedger, t: Trajectory, record_id: str, ctx: MessageContext
    ) -> None:
        to = Scope(ctx.flow.workspace, t.collection, t.user, t.conversation_id)
        writer = Writer(ctx.flow, self.metrics)
        key = f"trajectory:{record_id}"
        ace = self._ace_in(ctx.flow)
        workspace = ctx.flow.workspace
        #: The summary a plan made in this delivery was made from (see ``Writer.summary``).
        read: list[str] = []

        async def plan(planner: Planner) -> Plan:
            summary = await writer.current_summary(to)
            if summary is not None:
                read.append(summary)
            if ace is None:
                return with_run(await planner.for_trajectory(t, summary), f"{self.id}:{key}")
            # Kept for feedback on this invocation, for the ledger's retention.
            await ledger.save_trajectory(
                workspace,
                t.session_id or record_id,
                t.model_dump_json(),
                collection=t.collection,
                user=t.user,
            )
            window = await self._window(ledger, workspace, t, key)
            made = await planner.for_trajectory(t, summary, ace=ace, key=key, window=window)
            await self._reflected(ledger, workspace, t, key, made)
            return with_run(made, f"{self.id}:{key}")

        async def summary(to: Scope, plan: Plan) -> bool:
            return await writer.summary(to, plan, fresh=read[-1] if read else None)

        steps: list[tuple[str, Write]] = [
            ("summary", summary),
            ("facts", writer.facts),
            ("episode", writer.episode),
            ("playbook", writer.playbook),
        ]
        await self._learn(ledger, ctx, key, to, steps, plan, "trajectory", t.finished_at)

    async def on_ended(
        self, ledger: TrajectoryLedger, event: ConversationEnded, ctx: MessageContext
    ) -> None:
        if not event.event_id or not event.conversation_id:
            raise BadRequest("conversation-ended: event_id and conversation_id are required")
        if len(event.event_id) > MAX_ID_CHARS:
            raise BadRequest("conversation-ended: event_id is too long", type="too-large")
        facts, episodes = self._agent_mem.get(ctx.flow.workspace, (True, True))
        s = self.learner_settings
        to = Scope(
            ctx.flow.workspace, event.collection or "default", event.user, event.conversation_id
        )

        async def plan(planner: Planner) -> Plan:
            made = await planner.for_conversation(
                event,
                facts=facts and s.promote_facts,
                episode=episodes and s.conversation_episodes,
            )
            return with_run(made, f"{self.id}:ended:{event.event_id}")

        writer = Writer(ctx.flow, self.metrics)
        steps: list[tuple[str, Write]] = [("facts", writer.facts), ("episode", writer.episode)]
        key = f"ended:{event.event_id}"
        await self._learn(ledger, ctx, key, to, steps, plan, "conversation-ended", event.ended_at)

    async def on_feedback(
        self, ledger: TrajectoryLedger, feedback: Feedback, ctx: MessageContext
    ) -> None:
        """Re-run the reflection of the trajectory the feedback is about, and apply its
        delta once (its id derives from the feedback's)."""
        check_feedback(feedback)
        s, workspace = self.learner_settings, ctx.flow.workspace
        ace = self._ace_in(ctx.flow)
        if ace is None:
            self.metrics.feedback("ignored")
            logger.error(
                "%s: feedback on session %r ignored: no playbook learning in this flow",
                self.id,
                feedback.session_id,
            )
            raise BadRequest("feedback: this flow does not learn a playbook", type="not-configured")
        key = feedback_key(feedback)
        body = await ledger.trajectory(workspace, feedback.session_id)
        t = None if body is None else Trajectory.model_validate_json(body)
        if t is None or _owner(workspace, t) != Scope(
            workspace, feedback.collection or "default", feedback.user
        ):  # another owner's session is an unknown one
            entry = await ledger.get(workspace, key)
            if entry is not None and entry.done:  # learned, and its trajectory since pruned
                self.metrics.duplicate("feedback")
                self.metrics.feedback("duplicate")
                return
            if ctx.redelivery_count < min(s.feedback_wait_redeliveries, s.max_redeliveries):
                raise TrajectoryNotYet(f"no trajectory for session {feedback.session_id!r} yet")
            self.metrics.feedback("unknown-session")
            logger.error(
                "%s: feedback %s: no trajectory of session %r in collection %r (unknown, or "
                "older than %s days); not learned",
                self.id,
                key,
                feedback.session_id,
                feedback.collection,
                s.ledger_retention_days,
            )
            raise BadRequest(f"feedback: unknown session {feedback.session_id!r}", type="not-found")
        known = t
        to = Scope(workspace, known.collection, known.user, known.conversation_id)

        async def plan(planner: Planner) -> Plan:
            window = await self._window(ledger, workspace, known, key)
            made = await planner.for_feedback(known, feedback, ace, key=key, window=window)
            await self._reflected(ledger, workspace, known, key, made)
            return made

        writer = Writer(ctx.flow, self.metrics)
        steps: list[tuple[str, Write]] = [("playbook", writer.playbook)]
        learned = await self._learn(ledger, ctx, key, to, steps, plan, "feedback")
        self.metrics.feedback("learned" if learned else "duplicate")

    async def on_forget(
        self, ledger: TrajectoryLedger, request: ForgetRequest, ctx: MessageContext
    ) -> None:
        """Delete the user's ledger records, trajectories and reflections (see
        :meth:`TrajectoryLedger.forget`); a record being learned now holds its owner's lock."""
        if not request.user:
            raise BadRequest("forget needs 'user'")
        # What is being learned from the user now lands first, so the memory services'
        # forget (sent after the learner's: react_mem.commands.forget) removes it too.
        owner = (ctx.flow.workspace, request.user)
        if not await self._learning.idle(owner, FORGET_WAIT):
            logger.warning("forget: learning for a user still under way after %ss", FORGET_WAIT)
        removed = await ledger.forget(ctx.flow.workspace, request.collection, request.user)
        forgotten = Forgotten(
            collections=[request.collection] if request.collection else [],
            records={f"ledger-{table}": n for table, n in removed.items()},
        )
        await ctx.reply(ForgetResponse(forgotten=forgotten))

    # -- ACE -----------------------------------------------------------------------------
    def _ace_in(self, flow: Flow) -> AceConfig | None:
        """The ACE settings where this flow learns a playbook; None where it does not."""
        if self.learner_settings.playbook and PlaybookClient.available(flow):
            return self._ace
        return None

    async def _window(
        self, ledger: TrajectoryLedger, workspace: str, t: Trajectory, key: str
    ) -> Sequence[str]:
        return await ledger.reflections(workspace, window_key(t), self._ace.window, before=key)

    async def _reflected(
        self, ledger: TrajectoryLedger, workspace: str, t: Trajectory, key: str, plan: Plan
    ) -> None:
        """Count the reflection and keep it for the window of later ones."""
        if plan.ace is None:
            return
        self.metrics.ace("reflector", plan.ace.reflection.by)
        self.metrics.ace("curator", plan.ace.curated_by)
        entry = plan.ace.reflection.window_entry(t)
        await ledger.add_reflection(workspace, window_key(t), key, entry)

    # -- exactly once ------------------------------------------------------------------
    async def _learn(
        self,
        ledger: TrajectoryLedger,
        ctx: MessageContext,
        key: str,
        to: Scope,
        steps: Sequence[tuple[str, Write]],
        make_plan: MakePlan,
        kind: str,
        when: float = 0.0,
    ) -> bool:
        """Plan once, write each step once; False when the record was learned before. Work
        from ``when`` (its time; 0, unknown, counts as before) about an owner forgotten since
        is dropped, counted.

        A write a service refuses for good (:class:`ServiceRefused`, e.g. ``quota-exceeded``)
        is recorded (metric, log, the ledger's outcome) and not retried; the other steps
        still run. A plan with nothing to write leaves no ledger entry. DiskFull (no room
        for the ledger, a service's ``disk-full``) keeps the message for redelivery."""
        workspace = ctx.flow.workspace
        if ledger.floor is not None:  # kept and redelivered, before any LLM call is spent
            ledger.floor.check_write()
        # One conversation at a time: its rolling summary is read, merged and written.
        lock = (workspace, to.collection, to.user, to.conversation or key)
        async with self._learning.running((workspace, to.user)), self._locks.hold(lock):
            if to.user and await ledger.forgotten_since(workspace, to.collection, to.user, when):
                self.metrics.record(kind, "forgotten")
                return True
            entry = await ledger.get(workspace, key)
            if entry is not None and entry.done:
                self.metrics.duplicate(kind)
                return False
            if entry is not None:
                plan, done = Plan.model_validate(entry.plan), entry.steps
            else:
                plan = await planned(
                    ctx,
                    to,
                    make_plan,
                    settings=self.learner_settings,
                    metrics=self.metrics,
                    learner=self.id,
                )
                done = []
                for what, count in plan.ungrounded.items():
                    self.metrics.ungrounded(what, count)
                if plan.empty():
                    self.metrics.record(kind, "empty")
                    return True
                await ledger.save_plan(
                    workspace,
                    key,
                    plan.model_dump(mode="json"),
                    collection=to.collection,
                    user=to.user,
                )
            refused: list[str] = []
            marking = asyncio.Lock()

            async def run(step: str, write: Write) -> None:
                nonlocal done
                try:
                    wrote = await write(to, plan)
                except ServiceRefused as exc:
                    wrote = True
                    refused.append(f"{step}: {exc.type}")
                    self.metrics.rejected(STEP_KINDS[step], exc.type)
                    # Ids and error types only: never the user's words.
                    logger.error(
                        "%s: %s of %s refused by %s (%s); recorded, not retried",
                        self.id,
                        step,
                        key,
                        exc.service,
                        exc.type,
                    )
                async with marking:  # each mark holds every step done before it
                    done = [*done, step]
                    if wrote:
                        await ledger.mark_steps(workspace, key, done)

            # The steps write to different services: all at once, each marked as it lands;
            # a failure is raised once the others have had their chance.
            results = await asyncio.gather(
                *(run(step, write) for step, write in steps if step not in done),
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            outcome = "partial" if refused else "learned"
            await ledger.mark_done(workspace, key, "; ".join(refused) or outcome)
            self.metrics.record(kind, outcome)
            return True


def _owner(workspace: str, t: Trajectory) -> Scope:
    return Scope(workspace, t.collection or "default", t.user)
