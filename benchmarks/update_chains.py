"""Memory that keeps up with change: generated update chains through the fact-memory service.

Each generated user tells, over the years, three to five values of each of six attributes
(city, employer, diet, an allergy, pet, partner), one statement per year, worded from a
template list (``update_wordings.py``: splits ``dev``, ``heldout``, ``heldout2``, ``fresh``,
``fresh2``, ``fresh3``), among distractors told in the same years (other people's cities and
employers in the same split's wordings, hobbies). Every statement is stored over the bus as a
fact with its ``valid_at``, in time order; then each attribute is asked about ("Where do I
live?") and about each past year ("Where did I live in 2021?"). Reported per attribute and mode:

- current@1: the current value's statement ranks first;
- only-current: the current value is among the top k (the agent's default 5) and no earlier
  value of the chain is: only the current value reaches the prompt;
- as-of@1: asked about a past year, the value that held then ranks first;
- and per mode, kept: the share of distractors still current at the end (a fact wrongly
  superseded by the user's own lowers it).

Modes: ``off`` (``supersede_by_rule`` false: nothing supersedes), ``rule`` (the default),
and with ``--llm`` also ``llm`` (rule off; before each statement is stored, the learner's
judgement, ``react_mem.learner.changes.judge``, asks the model which of the three most
similar current facts it updates, with its JSON schema) and ``rule+llm`` (both, as the
stack runs). ``--llm packaged`` is the local-llm extra's SmolLM2-135M; any GGUF path works.
LongMemEval's public data is not used: it cannot be downloaded here, and no package ships it.

    python benchmarks/update_chains.py --users 60 --templates heldout2 --seed 3
    python benchmarks/update_chains.py --users 10 --templates heldout --llm packaged
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.facts import FactClient
from react_mem.learner import changes
from react_mem.learner.llm import JsonLLM
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.scope import Scope

sys.path.insert(0, str(Path(__file__).parent))
from update_wordings import DISTRACTORS, QUESTIONS, TEMPLATES

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

FIRST_YEAR, LAST_YEAR, TOP_K = 2018, 2024, 5
MEASURES = ["current@1", "only-current", "as-of@1"]


@dataclass
class Chain:
    user: str
    attribute: str
    #: (statement, year), oldest first.
    told: list[tuple[str, int]]
    question: str
    #: (question about a year, the index in ``told`` of the value that held then).
    past: list[tuple[str, int]] = field(default_factory=list)


def generate(
    users: int, templates: str, seed: int
) -> tuple[list[Chain], dict[str, list[tuple[str, int]]]]:
    """The chains and each user's distractor statements with their years."""
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
                    (
                        rng.choice(forms["first" if i == 0 else "update"]).format(
                            v=v, o=values[i - 1]
                        ),
                        start + i,
                    )
                    for i, v in enumerate(values)
                ]
            now_q, past_q = QUESTIONS[attribute]
            past = [(past_q.format(y=year, a=allergen), i) for i, (_, year) in enumerate(told[:-1])]
            chains.append(Chain(user, attribute, told, now_q.format(a=allergen), past))
        distractors[user] = [
            (
                t.format(
                    c=rng.choice(CITIES), e=rng.choice(EMPLOYERS), d=rng.choice(DIETS),
                    p=rng.choice(PETS), a=rng.choice(ALLERGENS), n=rng.choice(PARTNERS),
                ),
                rng.randint(FIRST_YEAR, LAST_YEAR),
            )
            for t in DISTRACTORS[templates]
        ]  # fmt: skip
    return chains, distractors


def epoch(year: int) -> float:
    return datetime(year, 6, 1, tzinfo=UTC).timestamp()


@dataclass
class Mode:
    name: str
    by_rule: bool
    llm: JsonLLM | None = None


@dataclass
class Result:
    """Per attribute and measure, one 0/1 per question; distractors kept; LLM time."""

    scores: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    kept: list[int] = field(default_factory=list)
    judged: int = 0
    judge_seconds: float = 0.0


async def _judged(
    memory: FactClient, where: Scope, fact: FactInput, mode: Mode, result: Result
) -> FactInput:
    """The fact as the learner would send it: with what the LLM judged it updates."""
    if mode.llm is None:
        return fact
    stored = await memory.retrieve(where, fact.content, top_k=changes.SHOWN)
    started = time.perf_counter()
    [fact] = await changes.judge(mode.llm, [fact], [stored])
    result.judge_seconds += time.perf_counter() - started
    result.judged += bool(stored)
    return fact


async def run(
    chains: Sequence[Chain],
    distractors: dict[str, list[tuple[str, int]]],
    url: str,
    tmp: Path,
    mode: Mode,
) -> Result:
    bus = PulsarTransport(PulsarOptions(url=url))
    await bus.connect()
    topics = {
        "request": f"request:tg:fact-memory:chains:{mode.name}",
        "response": f"response:tg:fact-memory:chains:{mode.name}",
    }
    flows = tmp / f"flows-{mode.name}.yaml"
    flows.write_text(
        json.dumps({"chains": {"processor:fact-chains": {mode.name: {"topics": topics}}}})
    )
    service = FactMemoryProcessor(
        FactMemoryProcessor.Settings.load(
            {
                "id": "fact-chains",
                "flows": flows,
                "data_dir": tmp / f"facts-{mode.name}",
                "state_dir": tmp / f"state-{mode.name}",
                "supersede_by_rule": mode.by_rule,
            }
        ),
        bus,
    )
    await service.start()
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        bus, topics["request"], topics["response"], FactResponse, timeout=300
    )
    await client.start()
    memory = FactClient(client)
    result = Result()
    try:
        by_user: dict[str, list[Chain]] = defaultdict(list)
        for chain in chains:
            by_user[chain.user].append(chain)
        for user, own in by_user.items():
            where = Scope("chains", "default", user)
            others = {text for text, _ in distractors[user]}
            told = sorted(
                [*((year, text) for chain in own for text, year in chain.told),
                 *((year, text) for text, year in distractors[user])],
                key=lambda t: t[0],
            )  # fmt: skip
            kept_ids = []
            for year, text in told:  # in time order, one statement a request
                fact = await _judged(
                    memory, where, FactInput(content=text, valid_at=epoch(year)), mode, result
                )
                [stored] = (await memory.store(where, [fact])).stored
                if text in others:
                    kept_ids.append(stored.id)
            found, _ = await memory.get(where, kept_ids)
            result.kept += [int(f.superseded_by is None) for f in found]
            for chain in own:
                texts = [text for text, _ in chain.told]
                hits = await memory.retrieve(where, chain.question, top_k=TOP_K)
                top = [f.content for f in hits]
                current, earlier = texts[-1], set(texts[:-1]) - {texts[-1]}
                score = result.scores[chain.attribute]
                score["current@1"].append(int(bool(top) and top[0] == current))
                score["only-current"].append(int(current in top and not earlier & set(top)))
                for question, index in chain.past:
                    past = await memory.retrieve(where, question, top_k=TOP_K)
                    score["as-of@1"].append(int(bool(past) and past[0].content == texts[index]))
    finally:
        await client.close()
        await service.stop()
        await bus.close()
    return result


def table(results: dict[str, Result]) -> str:
    modes = list(results)
    attributes = list(results[modes[0]].scores)
    head = "  ".join(f"{f'{m} ({mode})':>22}" for m in MEASURES for mode in modes)
    rows = [f"{'attribute':<10} {'n':>4}  {head}"]
    for attribute in [*attributes, "all"]:
        picks = attributes if attribute == "all" else [attribute]
        n = sum(len(results[modes[0]].scores[a]["current@1"]) for a in picks)
        cells = []
        for measure in MEASURES:
            for mode in modes:
                values = [v for a in picks for v in results[mode].scores[a][measure]]
                cells.append(f"{sum(values) / max(1, len(values)):>22.3f}")
        rows.append(f"{attribute:<10} {n:>4}  " + "  ".join(cells))
    for mode, r in results.items():
        line = (
            f"kept ({mode}): {sum(r.kept) / max(1, len(r.kept)):.3f} of {len(r.kept)} distractors"
        )
        if r.judged:
            line += f"; LLM judged {r.judged} facts, {r.judge_seconds / r.judged:.2f} s each"
        rows.append(line)
    return "\n".join(rows)


def _llm(path: str) -> tuple[Any, JsonLLM]:
    """A llama.cpp model answering the judgement's requests in the process."""
    from react_mem.llm.base import Prompt
    from react_mem.llm.llama_cpp import LlamaCppBackend, LlamaCppSettings, packaged_model
    from react_mem.schema.llm import TextCompletionRequest, TextCompletionResponse

    model = packaged_model() if path == "packaged" else Path(path)
    backend = LlamaCppBackend(LlamaCppSettings.load({"id": "chains-judge", "model_path": model}))

    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        prompt = Prompt(
            system=request.system,
            prompt=request.prompt,
            json=request.response_format == "json",
            schema=request.schema_,
        )
        done = await backend.complete(prompt)
        return TextCompletionResponse(response=done.text, model=done.model, end_of_stream=True)

    return backend, JsonLLM(complete, timeout=600)


async def measure(
    chains: list[Chain],
    distractors: dict[str, list[tuple[str, int]]],
    url: str,
    tmp: Path,
    llm: str | None,
    names: Sequence[str],
) -> dict[str, Result]:
    backend, judge = _llm(llm) if llm is not None else (None, None)
    if backend is not None:
        await backend.start()
    known = {
        "off": Mode("off", False),
        "rule": Mode("rule", True),
        "llm": Mode("llm", False, judge),
        "rule+llm": Mode("rule+llm", True, judge),
    }
    modes = [known[name] for name in names]
    try:
        return {m.name: await run(chains, distractors, url, tmp, m) for m in modes}
    finally:
        if backend is not None:
            await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--templates", choices=sorted(TEMPLATES), default="heldout2")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--llm", help="also judge with this GGUF model ('packaged': SmolLM2)")
    parser.add_argument(
        "--modes",
        default=None,
        help="comma-separated, of off, rule, llm, rule+llm (default: "
        "off,rule; with --llm all four)",
    )
    parser.add_argument("--write", type=Path, help="also write the generated chains here (JSON)")
    args = parser.parse_args()
    chains, distractors = generate(args.users, args.templates, args.seed)
    if args.write:
        args.write.write_text(
            json.dumps({"chains": [asdict(c) for c in chains], "distractors": distractors})
        )
    with (
        tempfile.TemporaryDirectory(prefix="chains-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker") as broker,
    ):
        names = (args.modes or ("off,rule,llm,rule+llm" if args.llm else "off,rule")).split(",")
        if args.llm is None and {"llm", "rule+llm"} & set(names):
            parser.error("the llm modes need --llm")
        results = asyncio.run(measure(chains, distractors, broker.url, Path(tmp), args.llm, names))
    print(
        f"{len(chains)} chains ({args.users} users, templates {args.templates}, seed {args.seed}); "
        f"top {TOP_K}; off: supersede_by_rule false, rule: true; llm: the learner's judgement"
    )
    print(table(results))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
