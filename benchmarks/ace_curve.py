"""The ACE learning curve: does the playbook keep what helps and drop what hurts?

A suite of tasks with checkable answers (``ace_tasks.py``: four families where one of three
tools is right, and the strategy bullet recommending it decides success; plus distractor
lookups) runs in epochs, each arm with its own playbook and episodes, all starting from the
same playbook (the three strategies of each family with no marks, and generic distractor
bullets):

- ``ace-on``: each trajectory is reflected on and curated into a delta (the learner's own
  planner, reflector and curator, heuristic mode) and applied by the real playbook-memory
  service (real store; in-process bus);
- ``ace-off``: nothing is learned: its baseline;
- ``episodes``: no playbook learning, but each trajectory is stored as an episode by the
  learner's planner in the real episode-memory service and recalled into later prompts;
- ``oracle``: a playbook holding only the right strategies, nothing learned: the best the
  policy can do at this noise.

- ``--policy simulated``: each prompt is recalled and rendered as the agent does it (its
  ``agent-mem`` defaults, its prompt code) and a stand-in for the LLM answers: it follows
  the strategies its prompt speaks best of, citing the bullet it follows, with ``--noise``
  slips (``ace_tasks.py``); the evaluator's right answer is the trajectory's ground truth;
- ``--policy openai --llm-url URL --llm-model M``: the same tasks through the real agent
  (``ace_agent.py``: agent, text completion through the endpoint, memory services, learner,
  the tools as a tool service; the right answer goes back as feedback). No endpoint runs on
  the machines this was written on; a test runs it against a local double.

Per epoch it prints each arm's success rate (family tasks only: distractors always succeed),
the ace-on playbook's size, its bullets with more harmful than helpful marks (held, and
shown in an ace-on prompt that epoch), the helpful marks its bullets recommending a wrong
tool hold (misplaced credit: ``--credit shown`` shows what credit assignment saves) and
each arm's mean prompt tokens. The last line is
``ace-on S_on ace-off S_off oracle S_max harmful-kept K`` for the final epoch (K: bullets
with more harmful than helpful marks shown in an ace-on prompt in that epoch).

    python benchmarks/ace_curve.py --policy simulated --noise 0.2 --seed 7 --epochs 6
    python benchmarks/ace_curve.py --gain 0.25     # playbook reinforcement_gain override
    python benchmarks/ace_curve.py --credit shown  # every bullet shown credited alike
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

try:
    from benchmarks.ace_agent import run_through_agent
    from benchmarks.ace_tasks import (
        DISTRACTOR_BULLETS,
        Decision,
        Task,
        recommends_wrong,
        simulated_policy,
        strategy_bullets,
        suite,
    )
except ModuleNotFoundError:  # run as a script: benchmarks/ is on the path, not its parent
    from ace_agent import run_through_agent  # type: ignore[no-redef]
    from ace_tasks import (  # type: ignore[no-redef]
        DISTRACTOR_BULLETS,
        Decision,
        Task,
        recommends_wrong,
        simulated_policy,
        strategy_bullets,
        suite,
    )
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.agent import json_reply, prompt
from react_mem.agent.config import AgentMemConfig
from react_mem.agent.items import bullet_items, episode_items
from react_mem.agent.sources import Sources, setting
from react_mem.agent.tools import Tool
from react_mem.bus.in_process import InProcessTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.base import owner
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.playbook import PlaybookClient, PlaybookRef
from react_mem.embedding.base import Embedder
from react_mem.learner.ace import AceConfig
from react_mem.learner.heuristic import matches
from react_mem.learner.planner import Limits, Planner
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema import AgentStep
from react_mem.schema.episodes import EpisodeResponse
from react_mem.schema.playbook import Delta, DeltaOperation, PlaybookResponse
from react_mem.schema.scope import Scope
from react_mem.schema.trajectory import Trajectory
from react_mem.tokens import HFTokenCounter, TokenCounter

#: The memory kinds' recall sources and the agent-mem keys they declare, read once.
SOURCES = Sources.of(MemoryKinds.from_entry_points())
KEYS = SOURCES.keys

WS, FLOW = "default", "curve"
#: (name, learns a playbook, stores episodes, seeded with the right strategies only)
ARMS = (
    ("ace-on", True, False, False),
    ("ace-off", False, False, False),
    ("episodes", False, True, False),
    ("oracle", False, False, True),
)


@dataclass
class Services:
    playbook: PlaybookClient
    episodes: EpisodeClient
    embedder: Embedder
    counter: TokenCounter
    cfg: AgentMemConfig = field(default_factory=lambda: AgentMemConfig.parse({}, keys=KEYS))


#: What answers a prompt: (task, system, user prompt, ids shown, rng) -> decision, tokens.
Policy = Callable[[Task, str, str, list[str], random.Random], Awaitable[tuple[Decision, int]]]


@dataclass
class Epoch:
    """One arm's figures for one epoch."""

    success: float
    tokens: float
    bullets: int = 0
    harmful_held: int = 0
    harmful_shown: int = 0
    #: Helpful marks held by bullets that recommend a wrong tool (misplaced credit).
    wrong_helpful: int = 0


@contextlib.asynccontextmanager
async def services(
    root: Path, embedder: Embedder, playbook_settings: dict[str, Any]
) -> AsyncIterator[Services]:
    """The real playbook- and episode-memory processors (edge store under ``root``) on an
    in-process bus, with a client for each."""
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    transport = InProcessTransport()
    await transport.connect()
    started: list[Any] = []
    clients: list[RequestResponseClient[Any, Any]] = []
    try:
        found: dict[str, Any] = {}
        for name, cls, response in (
            ("playbook-memory", PlaybookMemoryProcessor, PlaybookResponse),
            ("episode-memory", EpisodeMemoryProcessor, EpisodeResponse),
        ):
            queues = {s: f"{s}:tg:{name}:{WS}:{FLOW}" for s in ("request", "response")}
            flows = root / f"flows-{name}.json"
            flows.write_text(json.dumps({WS: {f"processor:{name}": {FLOW: {"topics": queues}}}}))
            extra = playbook_settings if name == "playbook-memory" else {}
            settings = cls.Settings.load(
                {"id": name, "flows": flows, "data_dir": root / name, "metrics": False, **extra}
            )
            processor = cls(settings, transport, registry=CollectorRegistry(), embedder=embedder)
            await processor.start()
            started.append(processor)
            rpc: RequestResponseClient[Any, Any] = RequestResponseClient(
                transport, queues["request"], queues["response"], response, timeout=120
            )
            await rpc.start()
            clients.append(rpc)
            found[name] = rpc
        counter = await asyncio.to_thread(HFTokenCounter.from_file)
        yield Services(
            PlaybookClient(found["playbook-memory"]),
            EpisodeClient(found["episode-memory"]),
            embedder,
            counter,
        )
    finally:
        for rpc in clients:
            await rpc.close()
        for processor in reversed(started):
            await processor.stop()
        await transport.close()


def tools_of(task: Task) -> list[Tool]:
    async def never(call: Any) -> str:
        raise AssertionError("the benchmark runs its tools itself")

    return [Tool(name, f"Computes the answer the {name} way.", (), never) for name in task.tools]


def seed_operations(right_only: bool) -> list[DeltaOperation]:
    """An arm's first playbook: the strategies (all, or the right ones) and distractors."""
    texts = [(t, "strategies") for t in strategy_bullets(right_only)]
    texts += [(t, "style") for t in DISTRACTOR_BULLETS]
    return [DeltaOperation(type="ADD", content=t, section=section) for t, section in texts]


async def seed(s: Services, arm: str, right_only: bool) -> None:
    ops = seed_operations(right_only)
    await s.playbook.apply_delta(
        PlaybookRef(collection=arm), Delta(delta_id="seed", operations=ops)
    )


async def attempt(
    s: Services,
    arm: str,
    episodes: bool,
    task: Task,
    policy: Policy,
    rng: random.Random,
    session: str,
    credit: str = "cited",
) -> tuple[Trajectory, Decision, int]:
    """Recall and render the prompt as the agent does, let the policy answer it, and make
    the trajectory the agent would publish (with the evaluator's ground truth)."""
    cfg = s.cfg
    [vector] = await s.embedder.embed([task.question])
    bullets = await s.playbook.retrieve(
        PlaybookRef(collection=arm),
        task.question,
        vector=vector,
        top_k=setting(cfg, "playbook-top-k"),
        relevance=setting(cfg, "playbook-relevance"),
        weights=setting(cfg, "playbook-weights"),
    )
    sections = {"playbook": bullet_items(bullets)}
    if episodes:
        found = await s.episodes.retrieve(
            Scope(WS, arm),
            goal=task.question,
            vector=vector,
            top_k=cfg.episode_retrieval_top_k,
            min_score=cfg.episode_min_score,
            retrieval=cfg.retrieval(),
        )
        sections["episodes"] = episode_items(found)
    context = prompt.render_context(
        s.counter,
        cfg.memory_token_budget,
        sections,
        prompt.Layout.of(SOURCES),
        playbook_share=cfg.playbook_token_share,
        post_context=cfg.playbook_injection == "post_context",
    )
    shown = [r.id for r in context.used if r.kind == "bullet"]
    system = prompt.system_prompt(
        tools_of(task), None, json_reply.FORMAT, cite=json_reply.CITE if shown else ""
    )
    user = prompt.user_prompt(context.memory, [], task.question, context.post)
    decision, tokens = await policy(task, system, user, shown, rng)
    result = task.run(decision.tool)
    answer = result if decision.answer is None else decision.answer
    step = AgentStep(
        thought="Compute it.",
        action=decision.tool,
        arguments={"question": task.question},
        observation=result,
    )
    t = Trajectory(
        trajectory_id=session,
        session_id=session,
        collection=arm,
        question=task.question,
        answer=answer,
        steps=[step] if decision.called else [],
        outcome="success",
        iterations=2,
        in_tokens=tokens,
        memory_used=context.used,
        # "shown": as before credit assignment, every bullet shown counts as used.
        bullets_used=None if credit == "shown" else [b for b in decision.cited if b in shown],
        ground_truth=task.truth,
        task_type=task.task_type,
        score=1.0,
        extract_facts=False,
    )
    return t, decision, tokens


async def learn(s: Services, t: Trajectory, ace: bool, episodes: bool) -> None:
    """The learner's plan for the trajectory (heuristic reflector and curator), written."""
    key = f"trajectory:{t.trajectory_id}"
    plan = await Planner(None, Limits()).for_trajectory(
        t, None, ace=AceConfig() if ace else None, key=key
    )
    if ace and plan.ace is not None and plan.ace.delta.operations:
        await s.playbook.apply_delta(PlaybookRef(collection=t.collection), plan.ace.delta)
    if episodes and plan.episode is not None:
        scope = Scope(WS, t.collection)
        await s.episodes.store_request(plan.episode.model_copy(update=owner(scope)))


async def run_arm(
    s: Services,
    arm: tuple[str, bool, bool, bool],
    tasks: list[Task],
    policy: Policy,
    epochs: int,
    seed_value: int,
    credit: str = "cited",
) -> list[Epoch]:
    name, ace, episodes, right_only = arm
    await seed(s, name, right_only)
    rng = random.Random(f"policy-{seed_value}")
    figures = []
    for epoch in range(1, epochs + 1):
        order = list(tasks)
        random.Random(f"order-{seed_value}-{epoch}").shuffle(order)
        wins: list[bool] = []
        tokens: list[int] = []
        harmful_shown: set[str] = set()
        for n, task in enumerate(order):
            session = f"{name}-{epoch}-{n}"
            t, decision, used = await attempt(s, name, episodes, task, policy, rng, session, credit)
            tokens.append(used)
            harmful_shown |= decision.harmful_shown
            if task.family is not None:
                wins.append(matches(t.answer, task.truth))
            if ace or episodes:
                await learn(s, t, ace, episodes)
        listed = (await s.playbook.page(PlaybookRef(collection=name), limit=1000)).items
        figures.append(
            Epoch(
                success=sum(wins) / len(wins),
                tokens=statistics.fmean(tokens),
                bullets=len(listed),
                harmful_held=sum(1 for b in listed if b.harmful > b.helpful),
                harmful_shown=len(harmful_shown),
                wrong_helpful=sum(b.helpful for b in listed if recommends_wrong(b.content)),
            )
        )
    return figures


# -- policies ------------------------------------------------------------------------------
def simulated(noise: float, counter: TokenCounter) -> Policy:
    async def answer(
        task: Task, system: str, user: str, shown: list[str], rng: random.Random
    ) -> tuple[Decision, int]:
        return simulated_policy(task, user, rng, noise), counter.count(system + "\n" + user)

    return answer


# -- the run -------------------------------------------------------------------------------
async def curve(
    *,
    policy: str = "simulated",
    noise: float = 0.2,
    seed_value: int = 7,
    epochs: int = 5,
    per_family: int = 5,
    distractors: int = 6,
    embedder: Embedder | None = None,
    playbook_settings: dict[str, Any] | None = None,
    llm_url: str = "",
    llm_model: str = "",
    arms: tuple[str, ...] = tuple(a[0] for a in ARMS),
    credit: str = "cited",
    root: Path | None = None,
    out: Callable[[str], None] = print,
) -> dict[str, list[Epoch]]:
    """Run every arm and print the table; return each arm's epochs."""
    if embedder is None:
        from react_mem.embedding.shared import shared_embedder

        embedder = shared_embedder(PlaybookMemoryProcessor.Settings.load({"id": "curve"}))
    await embedder.start()
    tasks = suite(per_family, distractors, seed_value)
    chosen_arms = tuple(a for a in ARMS if a[0] in arms)
    with contextlib.ExitStack() as stack:
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ace-curve-")))
        if policy == "openai":
            results = await run_through_agent(
                tasks,
                tuple(a[0] for a in chosen_arms),
                {a[0]: seed_operations(a[3]) for a in chosen_arms},
                epochs=epochs,
                seed_value=seed_value,
                root=root,
                embedder=embedder,
                llm_url=llm_url,
                llm_model=llm_model,
                playbook_settings=playbook_settings or {},
                epoch_type=Epoch,
                recommends_wrong=recommends_wrong,
            )
        else:
            async with services(root, embedder, playbook_settings or {}) as s:
                chosen = simulated(noise, s.counter)
                results = {
                    a[0]: await run_arm(s, a, tasks, chosen, epochs, seed_value, credit)
                    for a in chosen_arms
                }
    report(results, out)
    return results


def report(results: dict[str, list[Epoch]], out: Callable[[str], None]) -> None:
    names = list(results)
    out("epoch " + " ".join(f"{n:>9}" for n in names) + "  bullets harmful>helpful "
        "harmful-shown wrong-helpful " + " ".join(f"tokens:{n}" for n in names))  # fmt: skip
    epochs = len(next(iter(results.values())))
    on = results.get("ace-on")
    for e in range(epochs):
        row = f"{e + 1:>5} " + " ".join(f"{results[n][e].success:>9.2f}" for n in names)
        if on:
            row += f"  {on[e].bullets:>7} {on[e].harmful_held:>15} {on[e].harmful_shown:>13}"
            row += f" {on[e].wrong_helpful:>13}"
        row += " " + " ".join(f"{results[n][e].tokens:>{len(n) + 7}.0f}" for n in names)
        out(row)
    last = {n: results[n][-1].success for n in names}
    kept = on[-1].harmful_shown if on else 0
    out(
        f"ace-on {last.get('ace-on', 0.0):.2f} ace-off {last.get('ace-off', 0.0):.2f} "
        f"oracle {last.get('oracle', 0.0):.2f} harmful-kept {kept}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=("simulated", "openai"), default="simulated")
    parser.add_argument("--noise", type=float, default=0.2, help="simulated slips, 0..1")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--per-family", type=int, default=5, help="tasks per family per epoch")
    parser.add_argument("--distractors", type=int, default=6, help="lookup tasks per epoch")
    parser.add_argument("--gain", type=float, default=None,
                        help="playbook reinforcement_gain (default: the service's)")  # fmt: skip
    parser.add_argument(
        "--credit",
        choices=("cited", "shown"),
        default="cited",
        help="bullets credited: those the reply cites, or (as before) every one shown",
    )
    parser.add_argument("--llm-url", default="", help="OpenAI-compatible base URL (openai)")
    parser.add_argument("--llm-model", default="", help="model name (openai)")
    args = parser.parse_args()
    if args.policy == "openai" and not (args.llm_url and args.llm_model):
        parser.error("--policy openai needs --llm-url and --llm-model")
    settings = {} if args.gain is None else {"reinforcement_gain": args.gain}
    asyncio.run(
        curve(
            policy=args.policy,
            noise=args.noise,
            seed_value=args.seed,
            epochs=args.epochs,
            per_family=args.per_family,
            distractors=args.distractors,
            playbook_settings=settings,
            llm_url=args.llm_url,
            llm_model=args.llm_model,
            credit=args.credit,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
