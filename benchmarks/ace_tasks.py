"""The learning-curve suite of ``ace_curve.py``: task families with deterministic tools and
verifiable answers, and the simulated policy that stands in for the LLM.

Each family has three tools that compute an answer three ways; exactly one way is right
(the strategy that decides success). Each tool has a strategy bullet naming it, so a
playbook can recommend any of them. Distractor tasks (a lookup) succeed whatever the
playbook says, and generic distractor bullets are there to crowd the prompt.

The simulated policy reads the prompt it is given, as rendered by the agent's own prompt
code: it follows the tool of the task's family that the memory section speaks best of
(a bullet naming it counts its helpful - harmful plus a half, its best such bullet only;
each recalled episode naming it counts one, for or against by its outcome; a tool memory
is silent on counts 0; ties are drawn at random), and cites that bullet's id. With
probability ``noise`` it slips: it runs a random tool of the family (still citing the
bullet it meant to follow), or, on a distractor task, cites a random bullet it was shown:
the credit signal is noisy.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

#: A bullet line of the rendered playbook: ``- [id] content (helpful=H, harmful=K)``.
BULLET_LINE = re.compile(
    r"^- \[(?P<id>[^\]]+)\] (?P<text>.*) \(helpful=(?P<h>\d+), harmful=(?P<k>\d+)\)$"
)
EPISODE_LINE = re.compile(
    r"^- Episode \d+: .* -> (?P<outcome>success|failure|partial)(?P<rest>.*)$"
)


@dataclass(frozen=True)
class Family:
    name: str
    #: The question for one instance's parameters.
    question: Callable[[tuple[float, ...]], str]
    params: Callable[[random.Random], tuple[float, ...]]
    #: tool name -> (how it computes, the strategy bullet that recommends it)
    tools: dict[str, tuple[Callable[..., float], str]]
    right: str

    def answer(self, tool: str, params: tuple[float, ...]) -> str:
        return f"{self.tools[tool][0](*params):.2f}"


# Tool names hold no digits: the learner refuses lessons that carry an identifier mixing
# letters and digits (it may be a user's), so "pay-overtime-past-40" could never be learned.
TEMPERATURE = "Convert Fahrenheit to Celsius with"
VAT = "Extract VAT with"
PAY = "Compute weekly pay with"
CHANGE = "Compute a percentage change with"
FAMILIES = (
    Family(
        "temperature",
        lambda p: f"What is {p[0]:.0f} degrees Fahrenheit in Celsius?",
        lambda r: (float(r.randint(40, 110)),),
        {
            "f-to-c-subtract-first": (
                lambda f: (f - 32) * 5 / 9,
                f"{TEMPERATURE} f-to-c-subtract-first: subtract 32, then multiply by 5/9.",
            ),
            "f-to-c-scale-first": (
                lambda f: f * 5 / 9 - 32,
                f"{TEMPERATURE} f-to-c-scale-first: multiply by 5/9, then subtract 32.",
            ),
            "f-to-c-halve": (
                lambda f: (f - 30) / 2,
                f"{TEMPERATURE} f-to-c-halve: subtract 30, then halve it.",
            ),
        },
        "f-to-c-subtract-first",
    ),
    Family(
        "vat",
        lambda p: f"A price of {p[0]:.2f} includes {p[1]:.0f}% VAT; how much of it is VAT?",
        lambda r: (float(r.randint(50, 500)), float(r.choice((5, 10, 20)))),
        {
            "vat-from-gross": (
                lambda g, v: g - g / (1 + v / 100),
                f"{VAT} vat-from-gross: the gross less the gross divided by one plus the rate.",
            ),
            "vat-times-rate": (
                lambda g, v: g * v / 100,
                f"{VAT} vat-times-rate: multiply the price by the rate.",
            ),
            "vat-divide-rate": (
                lambda g, v: g / v,
                f"{VAT} vat-divide-rate: divide the price by the rate.",
            ),
        },
        "vat-from-gross",
    ),
    Family(
        "overtime",
        lambda p: (
            f"Someone worked {p[0]:.0f} hours in a week at {p[1]:.0f} an hour; "
            "what is the weekly pay?"
        ),
        lambda r: (float(r.randint(42, 60)), float(r.randint(10, 40))),
        {
            "pay-overtime-past-forty": (
                lambda h, w: 40 * w + 1.5 * w * (h - 40),
                f"{PAY} pay-overtime-past-forty: hours past forty at one and a half times"
                " the rate.",
            ),
            "pay-flat-rate": (
                lambda h, w: h * w,
                f"{PAY} pay-flat-rate: every hour at the same rate.",
            ),
            "pay-all-overtime": (
                lambda h, w: 1.5 * h * w,
                f"{PAY} pay-all-overtime: every hour at one and a half times the rate.",
            ),
        },
        "pay-overtime-past-forty",
    ),
    Family(
        "growth",
        lambda p: f"Sales went from {p[0]:.0f} to {p[1]:.0f}; what is the percentage change?",
        lambda r: (float(r.randint(100, 400)), float(r.randint(120, 600))),
        {
            "change-over-old": (
                lambda a, b: (b - a) / a * 100,
                f"{CHANGE} change-over-old: the difference divided by the old value.",
            ),
            "change-over-new": (
                lambda a, b: (b - a) / b * 100,
                f"{CHANGE} change-over-new: the difference divided by the new value.",
            ),
            "change-over-sum": (
                lambda a, b: (b - a) / (a + b) * 100,
                f"{CHANGE} change-over-sum: the difference divided by the sum.",
            ),
        },
        "change-over-old",
    ),
)
CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Kenya": "Nairobi",
    "Peru": "Lima",
    "Norway": "Oslo",
    "Egypt": "Cairo",
    "Canada": "Ottawa",
    "Chile": "Santiago",
}
LOOKUP = "lookup-capital"
DISTRACTOR_BULLETS = (
    "Greet the user by name when it is known.",
    "Keep answers under three sentences.",
    "Mention the time zone when giving a meeting time.",
    "Offer a follow-up question at the end.",
    "Use bullet lists for answers with more than three parts.",
    "Spell out acronyms the first time.",
)


@dataclass(frozen=True)
class Task:
    family: Family | None  # None: a distractor
    params: tuple[float, ...] = ()
    country: str = ""

    @property
    def task_type(self) -> str:
        return self.family.name if self.family else "lookup"

    @property
    def question(self) -> str:
        if self.family is None:
            return f"What is the capital of {self.country}?"
        return self.family.question(self.params)

    @property
    def truth(self) -> str:
        if self.family is None:
            return CAPITALS[self.country]
        return self.family.answer(self.family.right, self.params)

    @property
    def tools(self) -> list[str]:
        return [LOOKUP] if self.family is None else list(self.family.tools)

    def run(self, tool: str) -> str:
        """The deterministic tool's result (the answer the policy gives)."""
        if self.family is None or tool == LOOKUP:
            return CAPITALS.get(self.country, "unknown")
        return self.family.answer(tool, self.params)


def suite(per_family: int, distractors: int, seed: int) -> list[Task]:
    rng = random.Random(f"suite-{seed}")
    tasks = [Task(f, f.params(rng)) for f in FAMILIES for _ in range(per_family)]
    countries = sorted(CAPITALS)
    tasks += [Task(None, country=countries[n % len(countries)]) for n in range(distractors)]
    return tasks


def strategy_bullets(right_only: bool = False) -> list[str]:
    return [
        text
        for f in FAMILIES
        for name, (_, text) in f.tools.items()
        if not right_only or name == f.right
    ]


def recommends_wrong(text: str) -> bool:
    """Whether a bullet names a tool that gives a wrong answer."""
    return any(tool in text for f in FAMILIES for tool in f.tools if tool != f.right)


@dataclass
class Decision:
    tool: str
    cited: list[str] = field(default_factory=list)
    #: Shown bullets with more harmful than helpful marks (as the prompt showed them).
    harmful_shown: set[str] = field(default_factory=set)
    #: The final answer as the model wrote it; ``None``: the tool's result is the answer.
    answer: str | None = None
    #: Whether ``tool`` ran (a model may answer without calling any).
    called: bool = True


def simulated_policy(task: Task, memory: str, rng: random.Random, noise: float) -> Decision:
    """What the stand-in LLM does with the memory section of its prompt (see the module)."""
    votes: dict[str, float] = {}
    best: dict[str, tuple[float, str]] = {}
    shown: list[str] = []
    harmful: set[str] = set()
    for line in memory.splitlines():
        if m := BULLET_LINE.match(line.strip()):
            shown.append(m["id"])
            net = int(m["h"]) - int(m["k"])
            if net < 0:
                harmful.add(m["id"])
            for tool in _named(task, m["text"]):
                if tool not in best or net > best[tool][0]:
                    best[tool] = (net, m["id"])
        elif m := EPISODE_LINE.match(line.strip()):
            for tool in _named(task, m["rest"]):
                votes[tool] = votes.get(tool, 0.0) + (1.0 if m["outcome"] == "success" else -1.0)
    for tool, (net, _) in best.items():  # recommended at all: half a vote over silence
        votes[tool] = votes.get(tool, 0.0) + net + 0.5
    if task.family is None:
        cited = [rng.choice(shown)] if shown and rng.random() < noise else []
        return Decision(LOOKUP, cited, harmful)
    top = max(votes.get(t, 0.0) for t in task.tools)  # a tool memory is silent on: 0
    choice = rng.choice([t for t in task.tools if votes.get(t, 0.0) == top])
    cited = [best[choice][1]] if choice in best else []
    if rng.random() < noise:
        choice = rng.choice(task.tools)  # a slip: the bullet cited, another way run
    return Decision(choice, cited, harmful)


def _named(task: Task, text: str) -> list[str]:
    if task.family is None:
        return []
    return [tool for tool in task.family.tools if tool in text]
