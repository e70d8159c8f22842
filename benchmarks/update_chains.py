"""Memory that keeps up with change: generated update chains through the fact-memory service.

Each generated user tells, over the years, three to five values of each of six attributes
(city, employer, diet, an allergy, pet, partner), one statement per year, worded from a
template list, among distractors (other people's cities and employers, hobbies). Every
statement is stored over the bus as a fact with its ``valid_at``; then each attribute is
asked about ("Where do I live?") and about each past year ("Where did I live in 2021?").
Reported, per attribute, with superseding by rule on and off (``supersede_by_rule``):

- current@1: the current value's statement ranks first;
- only-current: the current value is among the top k (the agent's default 5) and no earlier
  value of the chain is: only the current value reaches the prompt;
- as-of@1: asked about a past year, the value that held then ranks first.

Two template sets: ``dev`` (the wordings the rules in ``memory_services/facts/slots.py``
were written against) and ``heldout`` (written apart, never tuned on; some wordings no rule
reads, e.g. "Home is Lisbon these days"). LongMemEval's public data is not used: it cannot be
downloaded here, and no package ships it.

    python benchmarks/update_chains.py --users 40 --templates heldout --seed 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.facts import FactClient
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.scope import Scope

CITIES = [
    "Berlin",
    "Paris",
    "Lisbon",
    "Oslo",
    "Madrid",
    "Vienna",
    "Prague",
    "Dublin",
    "Warsaw",
    "Athens",
    "Porto",
    "Turin",
]
EMPLOYERS = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Cyberdyne",
    "Soylent",
]
DIETS = ["vegetarian", "vegan", "pescatarian", "keto", "omnivore", "flexitarian"]
ALLERGENS = ["peanuts", "shellfish", "pollen", "penicillin", "cats", "gluten"]
PETS = [
    "dog named Rex",
    "cat named Tom",
    "parrot named Kiwi",
    "rabbit named Bun",
    "hamster named Gus",
]
PARTNERS = ["Anna", "Ben", "Chloe", "Daniel", "Elena", "Felix", "Grace", "Hugo", "Iris", "Jonas"]

#: Per attribute: the first statement's templates and an update's; ``{v}`` is the value.
#: An allergy's values alternate: allergic (``{v}`` the allergen) and no longer.
TEMPLATES: dict[str, dict[str, dict[str, list[str]]]] = {
    "dev": {
        "city": {
            "first": ["I live in {v}.", "The user lives in {v}."],
            "update": ["I moved to {v}.", "I live in {v} now.", "The user now lives in {v}."],
        },
        "employer": {
            "first": ["I work at {v}.", "The user works for {v}."],
            "update": ["I joined {v}.", "I work at {v} now.", "I started at {v}."],
        },
        "diet": {
            "first": ["I am {v}.", "The user is {v}."],
            "update": ["I am {v} now.", "I switched to a {v} diet."],
        },
        "allergy": {
            "first": ["I am allergic to {v}."],
            "yes": ["I am allergic to {v} again.", "I am now allergic to {v}."],
            "no": ["I am not allergic to {v} any more.", "I am no longer allergic to {v}."],
        },
        "pet": {
            "first": ["I have a {v}."],
            "update": ["I now have a {v}.", "I adopted a {v} recently."],
        },
        "partner": {
            "first": ["My partner is {v}.", "I am dating {v}."],
            "update": ["My partner is {v} now.", "I am now married to {v}."],
        },
    },
    "heldout": {
        "city": {
            "first": ["I'm based in {v}.", "My home is in {v}."],
            "update": [
                "I relocated to {v}.",
                "These days I live in {v}.",
                "Home is {v} these days.",  # no rule reads it
            ],
        },
        "employer": {
            "first": ["I'm employed by {v}.", "My employer is {v}."],
            "update": [
                "I work for {v} these days.",
                "My company is {v} now.",
                "I took a job with {v}.",  # no rule reads it
            ],
        },
        "diet": {
            "first": ["My diet is {v}.", "I follow a {v} diet."],
            "update": ["Currently I'm {v}.", "I went {v}."],  # the second: no rule
        },
        "allergy": {
            "first": ["The user is allergic to {v}."],
            "yes": ["The user is allergic to {v} again."],
            "no": ["The user isn't allergic to {v} anymore.", "My {v} allergy is gone."],
        },
        "pet": {
            "first": ["My pet is a {v}."],
            "update": ["Now I have a {v}.", "We got a {v}."],  # the second: no rule
        },
        "partner": {
            "first": ["I'm seeing {v}.", "My girlfriend is {v}."],
            "update": ["I'm engaged to {v} now.", "My boyfriend is {v} these days."],
        },
    },
}
QUESTIONS = {
    "city": ("Where do I live?", "Where did I live in {y}?"),
    "employer": ("Who do I work for?", "Where did I work in {y}?"),
    "diet": ("What is my diet?", "What was my diet in {y}?"),
    "allergy": ("Am I allergic to {a}?", "Was I allergic to {a} in {y}?"),
    "pet": ("What pet do I have?", "What pet did I have in {y}?"),
    "partner": ("Who is my partner?", "Who was my partner in {y}?"),
}
DISTRACTORS = [
    "My sister lives in {c}.",
    "My colleague Sam works at {e}.",
    "I enjoy hiking on weekends.",
    "My brother is {d}.",
    "I play the piano.",
    "My neighbour has a {p}.",
]
FIRST_YEAR, TOP_K = 2018, 5


@dataclass
class Chain:
    user: str
    attribute: str
    #: (statement, year), oldest first.
    told: list[tuple[str, int]]
    question: str
    #: (question about a year, the index in ``told`` of the value that held then).
    past: list[tuple[str, int]] = field(default_factory=list)


def generate(users: int, templates: str, seed: int) -> tuple[list[Chain], dict[str, list[str]]]:
    """The chains and each user's distractor statements."""
    rng, words = random.Random(seed), TEMPLATES[templates]
    pools = {"city": CITIES, "employer": EMPLOYERS, "diet": DIETS, "pet": PETS, "partner": PARTNERS}
    chains, distractors = [], {}
    for n in range(users):
        user = f"user-{seed}-{n}"
        for attribute, forms in words.items():
            length = rng.randint(3, 5)
            start = FIRST_YEAR + rng.randint(0, 2)
            allergen = rng.choice(ALLERGENS)
            if attribute == "allergy":
                keys = ["first", *["no" if i % 2 else "yes" for i in range(1, length)]]
                told = [
                    (rng.choice(forms[k]).format(v=allergen), start + i) for i, k in enumerate(keys)
                ]
            else:
                values = rng.sample(pools[attribute], length)
                told = [
                    (rng.choice(forms["first" if i == 0 else "update"]).format(v=v), start + i)
                    for i, v in enumerate(values)
                ]
            now_q, past_q = QUESTIONS[attribute]
            past = [(past_q.format(y=year, a=allergen), i) for i, (_, year) in enumerate(told[:-1])]
            chains.append(Chain(user, attribute, told, now_q.format(a=allergen), past))
        distractors[user] = [
            t.format(
                c=rng.choice(CITIES), e=rng.choice(EMPLOYERS), d=rng.choice(DIETS),
                p=rng.choice(PETS),
            )
            for t in DISTRACTORS
        ]  # fmt: skip
    return chains, distractors


def epoch(year: int) -> float:
    return datetime(year, 6, 1, tzinfo=UTC).timestamp()


async def run(
    chains: list[Chain], distractors: dict[str, list[str]], url: str, tmp: Path, by_rule: bool
) -> dict[str, dict[str, list[int]]]:
    """Per attribute and measure, one 0/1 per question."""
    bus = PulsarTransport(PulsarOptions(url=url))
    await bus.connect()
    topics = {
        "request": "request:tg:fact-memory:chains:f",
        "response": "response:tg:fact-memory:chains:f",
    }
    flows = tmp / "flows.yaml"
    flows.write_text(json.dumps({"chains": {"processor:fact-chains": {"f": {"topics": topics}}}}))
    service = FactMemoryProcessor(
        FactMemoryProcessor.Settings.load(
            {
                "id": "fact-chains",
                "flows": flows,
                "data_dir": tmp / f"facts-{by_rule}",
                "state_dir": tmp,
                "supersede_by_rule": by_rule,
            }
        ),
        bus,
    )
    await service.start()
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        bus, topics["request"], topics["response"], FactResponse, timeout=120
    )
    await client.start()
    memory = FactClient(client)
    scores: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    try:
        by_user: dict[str, list[Chain]] = defaultdict(list)
        for chain in chains:
            by_user[chain.user].append(chain)
        for user, own in by_user.items():
            where = Scope("chains", "default", user)
            await memory.store(where, [FactInput(content=d) for d in distractors[user]])
            told = sorted(
                ((year, text) for chain in own for text, year in chain.told), key=lambda t: t[0]
            )
            for year, text in told:  # in time order, one statement a request
                await memory.store(where, [FactInput(content=text, valid_at=epoch(year))])
            for chain in own:
                texts = [text for text, _ in chain.told]
                found = [
                    f.content for f in await memory.retrieve(where, chain.question, top_k=TOP_K)
                ]
                current, earlier = texts[-1], set(texts[:-1]) - {texts[-1]}
                score = scores[chain.attribute]
                score["current@1"].append(int(bool(found) and found[0] == current))
                score["only-current"].append(int(current in found and not earlier & set(found)))
                for question, index in chain.past:
                    hits = await memory.retrieve(where, question, top_k=TOP_K)
                    score["as-of@1"].append(int(bool(hits) and hits[0].content == texts[index]))
    finally:
        await client.close()
        await service.stop()
        await bus.close()
    return scores


def table(results: dict[str, dict[str, dict[str, list[int]]]]) -> str:
    measures, modes = ["current@1", "only-current", "as-of@1"], list(results)
    attributes = list(results[modes[0]])
    head = "  ".join(f"{f'{m} ({mode})':>20}" for m in measures for mode in modes)
    rows = [f"{'attribute':<10} {'n':>4}  {head}"]
    for attribute in [*attributes, "all"]:
        picks = attributes if attribute == "all" else [attribute]
        n = sum(len(results[modes[0]][a]["current@1"]) for a in picks)
        cells = []
        for measure in measures:
            for mode in modes:
                values = [v for a in picks for v in results[mode][a][measure]]
                cells.append(f"{sum(values) / max(1, len(values)):>20.3f}")
        rows.append(f"{attribute:<10} {n:>4}  " + "  ".join(cells))
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--templates", choices=sorted(TEMPLATES), default="heldout")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--write", type=Path, help="also write the generated chains here (JSON)")
    args = parser.parse_args()
    chains, distractors = generate(args.users, args.templates, args.seed)
    if args.write:
        args.write.write_text(
            json.dumps({"chains": [asdict(c) for c in chains], "distractors": distractors})
        )
    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="chains-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker") as broker,
    ):
        for by_rule in (False, True):
            name = "rule" if by_rule else "off"
            results[name] = asyncio.run(run(chains, distractors, broker.url, Path(tmp), by_rule))
    print(
        f"{len(chains)} chains ({args.users} users, templates {args.templates}, seed {args.seed}); "
        f"top {TOP_K}; off: supersede_by_rule false, rule: true"
    )
    print(table(results))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
