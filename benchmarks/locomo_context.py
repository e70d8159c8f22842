"""LoCoMo evidence in the agent's memory context: per top k and per token, for assemblies that
spread hits across sessions, retrieve a second time, or bring each hit's neighbours.

Turns are stored as in ``locomo_recall.py`` (one fact each, one store request per session,
over the bus; hybrid + time ranking with neighbours lifted, the default). For each question
with evidence, one retrieval of the top 50, and:

- ``ranked``: the hits in rank order (what the agent's fact section holds today);
- ``spread``: the same hits, at most two from one session among the first picks (the
  others keep their order after them): multi-hop evidence lies in several sessions;
- ``2hop``: the first five hits, then the hits of a second retrieval (the question with the
  top hit's text added: its names and places) alternating with the rest of the first;
- ``ranked+ctx``: each hit followed by the turns either side of it in its session (what
  conversation memory's ``window`` gives), counted in tokens like the rest.

recall@10 counts a question when every evidence turn is among the first ten turns of an
assembly; recall@N tokens, when every evidence turn's line lies within the first N tokens of
the section as the agent writes it (``react_mem.agent.items.fact_items``, MiniLM's tokenizer,
the bundled one the agent counts with). Conversations are split: ``tune`` (the first two,
where the assemblies were chosen) and ``report`` (the other three, not looked at while
choosing). The data is read at run time from ``../shared/eval/locomo-dev.json``.

``--top-k 5,8,10,15,20`` measures instead what the agent itself puts in its prompt: for each
``fact-retrieval-top-k`` in the list, the facts source's retrieval (top k, the default
``fact-min-score`` and ranking), rendered by the agent's ``render_context`` with the layout
of its installed sources (shares and leftover order) at the default
``memory-token-budget`` and at 1k, 2k and 4k tokens. A question counts when every evidence
turn's line is in the rendered memory whole (a line cut short does not count). ``alone``:
the facts are the only section (a new conversation); ``busy``: the conversation section
also holds its five most recent invocations (built from the conversation's last turns), so
the facts keep their share and what the others leave.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from locomo_recall import CATEGORIES, DEFAULT_DATA, sessions, turns

from memory_services.facts.service import FactMemoryProcessor
from react_mem.agent.config import AgentMemConfig
from react_mem.agent.items import Item, conversation_items, fact_items
from react_mem.agent.prompt import Layout, render_context
from react_mem.agent.sources import Sources, setting
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.facts import FactClient
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema.conversations import Conversation, ConversationTurn
from react_mem.schema.facts import Fact, FactRequest, FactResponse
from react_mem.schema.scope import Scope
from react_mem.tokens import HFTokenCounter

BUDGETS = (1000, 2000, 4000)
ASSEMBLIES = ("ranked", "spread", "2hop", "ranked+ctx")
TUNE = 2  # conversations in the tuning split
PER_SESSION = 2
#: The agent's defaults, its installed sources' layout and its token counter.
AGENT_CFG = AgentMemConfig.parse({}, keys=Sources.of(MemoryKinds.from_entry_points()).keys)
LAYOUT = Layout.of(Sources.of(MemoryKinds.from_entry_points()))
AGENT_BUDGETS = (AGENT_CFG.memory_token_budget, *BUDGETS)
SCENES = ("alone", "busy")
#: Renders longer than their budget, by budget (the renderer must never overflow).
OVERFLOWS: dict[int, int] = defaultdict(int)


def session(dia: str) -> str:
    return dia.rpartition(":")[0]


def spread(hits: list[Fact]) -> list[Fact]:
    first, later, count = [], [], defaultdict(int)
    for fact in hits:
        where = session(fact.metadata.get("dia_id", ""))
        (first if count[where] < PER_SESSION else later).append(fact)
        count[where] += 1
    return [*first, *later]


def alternate(first: list[Fact], second: list[Fact], head: int = 5) -> list[Fact]:
    out, seen = list(first[:head]), {f.id for f in first[:head]}
    rest = [first[head:], second]
    for n in range(max(len(x) for x in rest)):
        for pool in (rest[1], rest[0]):
            if n < len(pool) and pool[n].id not in seen:
                seen.add(pool[n].id)
                out.append(pool[n])
    return out


def with_neighbours(hits: list[Fact], by_dia: dict[str, Fact]) -> list[Fact]:
    out, seen = [], set()
    for fact in hits:
        dia = fact.metadata.get("dia_id", "")
        where, _, number = dia.rpartition(":")
        near = [dia]
        if number.isdigit():
            near = [f"{where}:{int(number) + d}" for d in (-1, 0, 1)]
        for key in near:
            if key in by_dia and key not in seen:
                seen.add(key)
                out.append(by_dia[key])
    return out


class Memo:
    """The agent's token counter, remembering counts: the same lines are rendered many times."""

    def __init__(self, counter: HFTokenCounter) -> None:
        self.counter, self.seen = counter, dict[str, int]()

    def count(self, text: str) -> int:
        if text not in self.seen:
            self.seen[text] = self.counter.count(text)
        return self.seen[text]

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        return self.counter.truncate(text, max_tokens)


COUNTER = Memo(HFTokenCounter.from_file())


def recent(sample: dict[str, Any], cfg: AgentMemConfig) -> list[Item]:
    """The conversation section of a ``busy`` prompt: the last turns of the conversation as
    its most recent invocations (one turn asks, the next answers)."""
    said = [
        t
        for key, s in sample["conversation"].items()
        if key.startswith("session_") and isinstance(s, list)
        for t in s
    ]
    turns = int(setting(cfg, "conversation-turns"))
    pairs = [
        (said[i]["text"], said[i + 1]["text"])
        for i in range(len(said) - 2 * turns, len(said) - 1, 2)
    ]
    records = [
        ConversationTurn(turn_id=str(n), sequence=n, query=q, answer=a)
        for n, (q, a) in enumerate(pairs)
    ]
    return conversation_items(Conversation(turns=records), turns)


def rendered(
    counter: Memo, budget: int, sections: dict[str, list[Item]], layout: Layout
) -> set[str]:
    """The fact ids whose lines the agent's renderer puts whole in ``budget`` tokens."""
    context = render_context(counter, budget, sections, layout)
    if counter.counter.count(context.memory) > budget:
        OVERFLOWS[budget] += 1
    lines = set(context.memory.splitlines())
    return {i.ref.id for i in sections["facts"] if i.text in lines}


def within(counter: HFTokenCounter, facts: list[Fact], budget: int) -> set[str]:
    """The dia_ids whose lines fit in ``budget`` tokens, in order (whole lines only)."""
    lines = [item.text for item in fact_items(facts)]
    used, found = 0, set()
    for fact, size in zip(facts, counter.count_many(lines) if lines else [], strict=True):
        used += size + 1  # the line break
        if used > budget:
            break
        found.add(fact.metadata.get("dia_id", ""))
    return found


async def evaluate(
    data: list[dict[str, Any]],
    url: str,
    tmp: Path,
    ks: tuple[int, ...] = (),
    priors: bool = True,
    by_sentences: bool = True,
) -> None:
    bus = PulsarTransport(PulsarOptions(url=url))
    await bus.connect()
    topics = {
        "request": "request:tg:fact-memory:ctx:f",
        "response": "response:tg:fact-memory:ctx:f",
    }
    flows = tmp / "flows.yaml"
    flows.write_text(json.dumps({"ctx": {"processor:fact-ctx": {"f": {"topics": topics}}}}))
    settings = {
        "id": "fact-ctx",
        "flows": flows,
        "data_dir": tmp / "facts",
        "state_dir": tmp,
        "near_duplicate_threshold": 1.0,
        "concurrency": 4,
    }
    service = FactMemoryProcessor(FactMemoryProcessor.Settings.load(settings), bus)
    await service.start()
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        bus, topics["request"], topics["response"], FactResponse, timeout=120
    )
    await client.start()
    memory, counter = FactClient(client), HFTokenCounter.from_file()
    hits: dict[tuple[str, str, str], int] = defaultdict(int)
    questions: dict[tuple[str, str], int] = defaultdict(int)
    try:
        for n, sample in enumerate(data):
            split = "tune" if n < TUNE else "report"
            where, facts = Scope("ctx", f"locomo-{sample['sample_id']}"), turns(sample)
            for request in sessions(facts):  # one request per session, as locomo_recall
                await memory.store(where, request, sequence=True)
            by_dia = {}
            offset = None
            while True:
                page = await memory.page(where, limit=1000, offset=offset)
                by_dia.update({f.metadata["dia_id"]: f for f in page.items})
                if not page.next:
                    break
                offset = page.next
            for qa in sample["qa"]:
                if not qa.get("evidence") or "answer" not in qa:
                    continue
                category = CATEGORIES.get(qa["category"], str(qa["category"]))
                if ks:
                    for name in (category, "all"):
                        questions[split, name] += 1
                    await agent_assembly(
                        memory, where, qa, sample, ks, (split, category), hits, priors,
                        by_sentences,
                    )  # fmt: skip
                    continue
                first = await memory.retrieve(where, qa["question"], top_k=50)
                top = first[0].content.split(": ", 1)[-1] if first else ""
                second = await memory.retrieve(where, f"{qa['question']} {top}", top_k=50)
                made = {
                    "ranked": first,
                    "spread": spread(first),
                    "2hop": alternate(first, second),
                    "ranked+ctx": with_neighbours(first, by_dia),
                }
                evidence = set(qa["evidence"])
                for name in (category, "all"):
                    questions[split, name] += 1
                    for assembly, ordered in made.items():
                        ten = {f.metadata.get("dia_id", "") for f in ordered[:10]}
                        hits[split, name, f"{assembly} @10"] += evidence <= ten
                        for budget in BUDGETS:
                            fits = within(counter, ordered, budget)
                            hits[split, name, f"{assembly} {budget}"] += evidence <= fits
            print(f"  {where.collection}: {len(facts)} turns ({split})", flush=True)
    finally:
        await client.close()
        await service.stop()
        await bus.close()
    columns = [f"{a} {k}" for a in ASSEMBLIES for k in ("@10", *map(str, BUDGETS))]
    if ks:
        report(ks, questions, hits)
        return
    for split in ("tune", "report"):
        print(f"\n{split} split: recall@10 and recall within N tokens of the fact section")
        print(f"{'category':<12} {'n':>4}  " + " ".join(f"{c:>16}" for c in columns))
        for name in [*CATEGORIES.values(), "all"]:
            count = questions[split, name]
            if count:
                cells = " ".join(f"{hits[split, name, c] / count:>16.3f}" for c in columns)
                print(f"{name:<12} {count:>4}  {cells}")


def report(
    ks: tuple[int, ...],
    questions: dict[tuple[str, str], int],
    hits: dict[tuple[str, str, str], int],
) -> None:
    print(f"renders over budget: {dict(OVERFLOWS) or 'none'}")
    for split in ("tune", "report"):
        n, multi = questions[split, "all"], questions[split, "multi-hop"]
        print(f"\n{split} split ({n} questions, {multi} multi-hop): all / multi-hop")
        print(f"{'scene':<6} {'top-k':>5}  " + " ".join(f"{b:>13}" for b in AGENT_BUDGETS))
        for scene in SCENES:
            for k in ks:
                cells = " ".join(
                    f"{hits[split, 'all', f'{scene} k={k} {b}'] / max(n, 1):>6.3f} / "
                    f"{hits[split, 'multi-hop', f'{scene} k={k} {b}'] / max(multi, 1):.3f}"
                    for b in AGENT_BUDGETS
                )
                print(f"{scene:<6} {k:>5}  {cells}")


async def agent_assembly(
    memory: FactClient,
    where: Scope,
    qa: dict[str, Any],
    sample: dict[str, Any],
    ks: tuple[int, ...],
    key: tuple[str, str],
    hits: dict[tuple[str, str, str], int],
    priors: bool = True,
    by_sentences: bool = True,
) -> None:
    """Count one question's evidence in the agent's rendered memory, per top k and budget
    (without ``priors``: the ranking before the priors on a fact's text; without
    ``by_sentences``: the ranking before facts were ranked by their best sentence too)."""
    split, category = key
    cfg = AGENT_CFG
    evidence = set(qa["evidence"])
    busy = recent(sample, cfg)
    for k in ks:
        options = cfg.retrieval()
        if not priors:
            options = options.model_copy(update={"priors": False})
        if not by_sentences:
            options = options.model_copy(update={"sentences": False})
        facts = await memory.retrieve(
            where, qa["question"], top_k=k, min_score=cfg.fact_min_score, retrieval=options
        )
        dia = {f.id: f.metadata.get("dia_id", "") for f in facts}
        items = fact_items(facts)
        for scene, sections in (
            ("alone", {"facts": items}),
            ("busy", {"facts": items, "conversation": busy}),
        ):
            for budget in AGENT_BUDGETS:
                found = {dia[i] for i in rendered(COUNTER, budget, sections, LAYOUT)}
                for name in (category, "all"):
                    hits[split, name, f"{scene} k={k} {budget}"] += evidence <= found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--top-k",
        default="",
        help="comma-separated fact-retrieval-top-k values: the agent's own assembly instead",
    )
    parser.add_argument(
        "--no-priors",
        action="store_true",
        help="with --top-k: rank without the priors on a fact's text (the default before them)",
    )
    parser.add_argument(
        "--no-sentences",
        action="store_true",
        help="with --top-k: rank without the facts' sentence vectors (the default before them)",
    )
    args = parser.parse_args()
    ks = tuple(int(k) for k in args.top_k.split(",") if k.strip())
    if not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to evaluate")
        return
    data = json.loads(args.data.read_text())
    with (
        tempfile.TemporaryDirectory(prefix="locomo-ctx-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker") as broker,
    ):
        asyncio.run(
            evaluate(data, broker.url, Path(tmp), ks, not args.no_priors, not args.no_sentences)
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
