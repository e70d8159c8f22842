"""The soak's two workloads: who asks, in which conversation, and how their data ends.

``growth`` (the first soak's mix): 12 users, each conversation about five asks, nothing ever
deleted. In 30 minutes each user does about 1,200 operations, so every scope grows about
16x: a month of one person's use compressed into half an hour. Its verdict says how the
service slows as scopes grow, not whether it wears.

``steady`` (the default): a deployment's life cycle, compressed to the run's scale. Many
users (48) picked at random, so each scope grows modestly; a conversation ends (``end``:
the conversation service summarises it for the learner) and the user's next ask starts a
new one; what a deployment keeps for a while is kept for ``retention`` (ended conversations,
episodes, facts: the services' retention settings and the learner's ledger, swept every
few seconds); and users leave: each lives ``lifetime`` and is then forgotten everywhere
(``react-mem memory forget``: the learner, then every memory service, which compacts its
files), a new user taking their place. After a warm-up of about one retention, what is
stored stops growing, and the verdict says whether the service wears: the same data, the
same work, for half an hour.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field

from react_mem.commands.common import ServiceQueues
from react_mem.commands.forget import LEARNER, Report, forget_user
from tests.support.agent_stack import Stack, forget_queues
from tests.support.kinds import INSTALLED

#: The services that hold a user's memory (working memory holds nothing between asks).
HOLDERS = ("fact-memory", "episode-memory", "conversation-memory", "playbook-memory")


@dataclass
class Workload:
    steady: bool
    users: int
    #: Seconds what a deployment keeps for a while is kept (None: forever).
    retention: float | None
    #: Seconds a user lives before being forgotten (None: never).
    lifetime: float | None
    #: Seconds run before the first measured minute.
    warmup: float
    seed: int = 28
    rng: random.Random = field(init=False)
    #: Per user slot: its generation (a new user id after each forget) and conversation.
    generation: list[int] = field(init=False)
    talk: list[int] = field(init=False)
    asks_in_talk: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.generation = [0] * self.users
        self.talk = [0] * self.users
        self.asks_in_talk = [0] * self.users

    @classmethod
    def of(cls, args: argparse.Namespace) -> Workload:
        m = args.minute
        if args.mode == "growth":
            return cls(False, args.users or 12, None, None, 0.0)
        retention = args.retention * m
        warmup = args.warmup * m if args.warmup is not None else retention + m
        return cls(True, args.users or 48, retention, args.lifetime * m, warmup)

    def sweep(self, minute: float) -> float:
        """Seconds between the services' background sweeps: a few per retention."""
        return max(1.0, min(10.0, minute / 6))

    def service_settings(self, minute: float) -> dict[str, dict[str, object]]:
        if self.retention is None:
            return {}
        days, sweep = self.retention / 86400, self.sweep(minute)
        return {
            "conversation-memory": {
                "retention_days": days,
                "idle_timeout": self.retention,  # one left open ends as the others do
                "sweep_interval": sweep,
            },
            "episode-memory": {"max_age_days": days, "sweep_interval": sweep},
            "fact-memory": {"default_ttl_seconds": self.retention, "sweep_interval": sweep},
        }

    def learner_settings(self) -> dict[str, object]:
        return {} if self.retention is None else {"ledger_retention_days": self.retention / 86400}

    def user(self, slot: int) -> str:
        return (
            f"soak-user-{slot}" if not self.steady else f"soak-user-{slot}-{self.generation[slot]}"
        )

    def pick(self, n: int, kind: str) -> tuple[int, str, str]:
        """Operation ``n``'s user slot, user and conversation id."""
        if not self.steady:  # the first soak's mix, unchanged
            slot = n % self.users
            talk = n // (self.users * 5)
            return slot, self.user(slot), f"soak-{talk - 1 if kind == 'end' else talk}"
        slot = self.rng.randrange(self.users)
        talk = f"soak-{self.talk[slot]}"
        if kind == "ask":
            self.asks_in_talk[slot] += 1
        elif kind == "end":  # the user's next ask opens a new conversation
            self.talk[slot] += 1
            self.asks_in_talk[slot] = 0
        return slot, self.user(slot), talk

    def leaving(self, elapsed: float, done: int) -> list[int]:
        """Slots whose user's life ended by ``elapsed`` seconds (``done``: forgets already
        started). Slot i's first user leaves at (i + 1) / users of a lifetime, so the
        forgets are spread evenly from the start."""
        if self.lifetime is None:
            return []
        step = self.lifetime / self.users
        due = int(elapsed // step)
        return [k % self.users for k in range(done, due)]


async def forget(stack: Stack, user: str, timeout: float) -> list[Report]:
    """``react-mem memory forget`` for ``user`` on the stack's queues."""
    to = {
        name: ServiceQueues(stack.topics[name]["request"], stack.topics[name]["response"])
        for name in HOLDERS
    }
    to[LEARNER] = forget_queues(stack.unique)
    reports = await forget_user(stack.transport, to, kinds=INSTALLED, user=user, timeout=timeout)
    return [r for r in reports if r.service in to]
