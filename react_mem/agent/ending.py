"""An invocation's end, for one agent processor: its conversation turn beside its trajectory.

The turn's append runs as a task registered in :class:`~.turns.PendingTurns` (a follow-up's
recall on this replica waits for it); what the answer waits for of it is the agent's
``turn_wait`` setting (see :mod:`.turns`). A turn no answer waits for is tried again
(``BACKGROUND_ATTEMPTS``) and counted when it is lost; the functions that build and send the
records are in :mod:`.finish`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from react_mem.agent.finish import BACKGROUND_ATTEMPTS, append_turn, publish_trajectory, trajectory
from react_mem.agent.invocation import Invocation
from react_mem.agent.metrics import AgentMetrics
from react_mem.agent.settings import AgentSettings
from react_mem.agent.turns import Pending, PendingTurns
from react_mem.clients.conversations import CONVERSATION_MEMORY
from react_mem.schema.trajectory import Outcome


class InvocationEnd:
    def __init__(self, processor: str, settings: AgentSettings, metrics: AgentMetrics) -> None:
        self.processor = processor
        self.settings = settings
        self.metrics = metrics
        #: Conversation turns being appended (a follow-up's recall waits for its own).
        self.turns = PendingTurns()

    def answer_waits_for_stored(self, inv: Invocation) -> bool:
        """Whether the answer waits for its turn stored, not only sent: ``turn_wait: reply``,
        or what the append's reply says goes into the answer (``MemoryState.hold_turn``)."""
        return self.settings.turn_wait == "reply" or inv.state.hold_turn

    async def previous_turn(self, inv: Invocation) -> None:
        """Before a recall: a follow-up sees the last turn, its append sent ahead of this
        recall (or stored, ``turn_wait: reply``), waiting at most ``memory_timeout``."""
        stored = self.settings.turn_wait == "reply"
        await self.turns.settled(inv.scope, inv.cfg.memory_timeout, stored=stored)

    def start_turn(
        self, inv: Invocation, answer: str, outcome: Outcome, *, before_answer: bool = False
    ) -> Pending | None:
        """Start appending the conversation turn (see :mod:`.turns`); None if there is none.
        ``before_answer``: the answer waits for it stored, so the turn takes the quota
        notices (the answer tells them) and is tried once; else its attempts go on after
        the answer, and a turn not stored for good is counted."""
        appended = inv.flow.has_client(CONVERSATION_MEMORY.request)
        if not (inv.memory_on and inv.scope.conversation and appended):
            return None

        def append(sent: asyncio.Event) -> Coroutine[Any, Any, str | None]:
            return self.append_turn(inv, answer, outcome, sent, before_answer=before_answer)

        return self.turns.start(inv.scope, append)

    async def append_turn(
        self,
        inv: Invocation,
        answer: str,
        outcome: Outcome,
        sent: asyncio.Event,
        *,
        before_answer: bool,
    ) -> str | None:
        return await append_turn(
            inv.flow,
            inv.request,
            inv.scope,
            inv.state,
            answer,
            outcome,
            self.settings.memory_write_timeout,
            take_notices=before_answer,
            sent=sent,
            attempts=1 if before_answer else BACKGROUND_ATTEMPTS,
            lost=None if before_answer else self._turn_lost,
        )

    def _turn_lost(self) -> None:
        self.metrics.turns_lost.labels(processor=self.processor).inc()

    async def finish(
        self,
        inv: Invocation,
        answer: str,
        outcome: Outcome,
        error: str | None,
        turn: Pending | None = None,
        *,
        answered: bool = True,
        stored: bool = True,
    ) -> str | None:
        """The conversation turn (``turn``, if started; else started here) beside the
        trajectory. Before an answer (``answered`` false) a trajectory that cannot be
        published fails the iteration, which is retried and then answered with an error:
        never an answer whose learning was lost. After an error reply it is only logged.
        ``stored``: wait for the turn stored, else only for its request on the bus.
        Returns a note for the answer when memory dropped something (a turn past the
        conversation's cap; counted by conversation-memory) or has news for the user (the
        quota notices the turn took)."""
        if not inv.memory_on:
            return None
        turn = turn or self.start_turn(inv, answer, outcome)
        if inv.flow.has_producer("trajectory"):
            record = trajectory(inv.request, inv.state, inv.scope, inv.cfg, answer, outcome, error)
            await publish_trajectory(inv.flow, record, answered=answered)
        if turn is None:
            return None
        if not stored:
            await turn.ordered()
            if not turn.task.done():
                return None  # on its way: conversation memory stores it before a follow-up
        return await turn.task

    async def drain(self) -> int:
        """Give the turns still on their way their time to be stored
        (``memory_write_timeout``); how many were not."""
        return await self.turns.drain(self.settings.memory_write_timeout)
