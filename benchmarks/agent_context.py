"""Memory overhead per agent invocation, and prompt tokens per turn, on the real stack.

Everything runs in this process on one event loop, as ``react-mem up`` runs it: an
embedded broker, the real fact-, episode- and conversation-memory processors (edge store
in a temp dir) and the real ``AgentProcessor``, whose flow names those services (its
text-completion queue has no consumer: no LLM is called).

1. Context assembly as ``AgentProcessor.begin`` does it: ``MemoryRecall.recall`` (the
   question embedded once, then fact, episode and conversation memory asked in parallel
   over the bus) plus ``prompt.render_memory`` within ``memory-token-budget``, timed from
   the agent's side for ``--queries`` questions, one invocation at a time, with N facts in
   the scope (plus episodes and a 20-turn conversation). Facts are written straight into
   the fact-memory service's store with its record layout (setup speed; their vectors are
   embedded in large batches and cached between runs, as ``fact_memory.py`` does);
   episodes and turns go through the services. Then again after ``EdgeStore.optimize()``
   (HNSW) of the facts collection, run offline between two starts of the stack.
2. Prompt tokens over a 50-turn conversation: the agent's prompt (system + memory section
   + question) against replaying the whole transcript, each turn appended to conversation
   memory by ``InvocationEnd.append_turn`` and followed by 1-2 facts and an episode.

Fact texts and timing questions come from ``fact_memory.py`` (LoCoMo turns and questions
from ``../shared/eval/`` when present, then generated ones); the chat is generated. The
first run at 100k embeds 100k fact texts (long on 2 cores); later runs, and runs after
``fact_memory.py``, read the vectors from its cache.

    python benchmarks/agent_context.py            # 10k and 100k, flat and HNSW, 50 turns
    python benchmarks/agent_context.py --quick    # a smoke run: 2,000 facts, 40 questions
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from fact_memory import LOCOMO, corpus, embed_all, optimize, questions
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts import records as rec
from memory_services.facts.service import FactMemoryProcessor
from memory_services.store.base import Record
from memory_services.store.base import Scope as StoreScope
from memory_services.store.edge import EdgeStore
from react_mem.agent import prompt
from react_mem.agent.config import AgentMemConfig
from react_mem.agent.invocation import Invocation
from react_mem.agent.recall import MemoryRecall, Recall
from react_mem.agent.service import AgentProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.facts import FactClient
from react_mem.processor.flow import Flow
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema import AgentRequest, AgentStep
from react_mem.schema.agent import MemoryState
from react_mem.schema.episodes import EpisodeRequest
from react_mem.schema.facts import FactInput
from react_mem.schema.scope import Scope
from react_mem.tokens import HFTokenCounter

WS, FLOW, COLLECTION, USER = "default", "bench", "bench", "maya"
TARGET_P50_MS, TARGET_P99_MS, TARGET_REDUCTION = 25.0, 60.0, 0.80
FACTS_COLLECTION = "facts-384"
TABLE_TURNS = (1, 5, 10, 20, 30, 40, 50)
ORDER = ("embed", "facts", "episodes", "conversation", "render")
SERVICES: dict[str, type[Any]] = {
    "fact-memory": FactMemoryProcessor,
    "episode-memory": EpisodeMemoryProcessor,
    "conversation-memory": ConversationMemoryProcessor,
}

# -- the generated chat: one user (Maya) and an assistant --------------------------------
# fmt: off
PERSONA = {
    "race": "Lisbon half marathon|Berlin marathon|Cork city 10k|Ghent trail race",
    "date": "12 October|3 November|the last Sunday of September|21 April",
    "km": "14|16|18|21|24", "diet": "vegetarian|pescatarian|vegan|gluten-free",
    "guests": "six|eight|ten|four", "day": "Saturday|Friday evening|Sunday lunchtime",
    "city": "Osaka|Montreal|Krakow|Valparaiso|Tbilisi|Bergen",
    "month": "March|May|June|September|October", "nights": "five|seven|ten",
    "relative": "sister|partner|parents|two kids",
    "job": "data analyst|product designer|nurse|site engineer",
    "company": "a logistics start-up|the city hospital|a solar energy firm|a publishing house",
    "plant": "fiddle-leaf fig|lemon tree|basil plant|monstera",
    "spot": "balcony|kitchen windowsill|south-facing patio", "freq": "two days|day|week",
    "amount": "3,000|5,000|8,000", "goal": "camper van|sailing course|house deposit",
    "lang": "Portuguese|Japanese|Polish|Korean", "minutes": "15|20|30",
    "pet": "beagle|border collie|ginger cat|rescue greyhound",
    "petname": "Biscuit|Pepper|Mochi|Rusty",
    "habit": "barking at the postman|chewing the sofa|waking us at 5 am|pulling on the lead",
    "appliance": "dishwasher|boiler|washing machine|fridge",
    "room": "kitchen|utility room|basement", "years": "seven|nine|twelve",
    "book": "Klara and the Sun|The Overstory|Piranesi|Project Hail Mary",
    "hours": "five|five and a half|six",
    "event": "the new job started|we moved flats|the baby arrived",
}
# fmt: on
#: Per topic (blank-line separated): Questions asked in turn, Answer sentences, Facts the
#: learner would keep, and a Recall question asked later; "  " continues a line.
TOPIC_TEXT = """\
Q I'm training for the {race} on {date} and my longest run so far is {km} km. How should I build up
  over the next few weeks?
Q My knees felt sore after the last {km} km run. Should I change my plan for the {race}?
A Increase your long run by no more than ten percent a week, and every third or fourth week cut the
  distance back so your body can absorb the work.
A Keep most of your running at an easy, conversational pace; one interval session and one tempo run
  a week are plenty.
A With {date} as race day, plan a two-week taper in which you reduce volume by about a third while
  keeping a little speed.
A Practise your race-day breakfast, shoes and gels on long runs, never for the first time on the
  day itself.
A Soreness that fades within a day or two is normal, but sharp pain or pain that changes your
  stride is a reason to rest and see a physiotherapist.
A Strength work twice a week, such as squats, lunges and calf raises, makes injuries much less
  likely.
A Sleep and food matter as much as mileage: eat carbohydrates after long runs and aim for at least
  seven hours in bed.
F Maya is training for the {race} on {date}.
F Maya's longest training run so far is {km} km.
R Remind me, when is my race and how far have I run so far?

Q I'm {diet} and I'm hosting {guests} people on {day}. What main course can I prepare the day
  before?
Q For the dinner on {day}, what dessert could I make that doesn't need the oven?
A A baked dish is the easiest option, because it can be assembled the day before and only needs
  reheating while your guests arrive.
A For a {diet} table a mushroom and lentil lasagne, a vegetable tagine with apricots or a tray of
  stuffed peppers all hold up well overnight.
A Make the sauce or the stew base first; the flavours usually improve after a night in the fridge.
A Cook grains such as couscous or rice on the day, since they dry out and lose texture when
  reheated.
A For {guests} people, plan on roughly two kilos of vegetables and a large dish per main, plus a
  simple salad for freshness.
A Write a short timeline for {day}, working back from the time you want to eat, so the oven is
  never needed for two things at once.
A A dessert that sets in the fridge, like a panna cotta or a chocolate pot, frees you completely on
  the day.
F Maya is {diet}.
F Maya is hosting {guests} people for dinner on {day}.
R How many guests am I cooking for, and what diet did I say I follow?

Q We're going to {city} in {month} for {nights} nights with my {relative}. Which areas are good to
  stay in and what should we not miss?
Q What day trips from {city} would you suggest for our {month} visit?
A In {month} it is worth booking accommodation early, as the most central neighbourhoods fill up
  quickly.
A Stay close to a metro or tram line rather than right in the old centre; you save money and still
  reach everything in fifteen minutes.
A Plan one slow day for every two busy ones, especially travelling with your {relative}, so the
  trip does not turn into a checklist.
A Food markets are usually the best value for lunch and a good way to try local dishes without a
  reservation.
A Buy a transport day pass on arrival rather than single tickets, and check whether it includes the
  airport connection.
A Keep a rainy-day plan with a museum or a covered market in mind, because the weather can change
  quickly.
A For {nights} nights, one day trip out of {city} by train is usually worth it.
F Maya is travelling to {city} in {month} for {nights} nights with her {relative}.
R Which city are we visiting, when, and for how many nights?

Q I started as a {job} at {company} last month. How should I prepare for my first review in
  {month}?
Q My manager at {company} asked me to lead a small project. How do I set it up well?
A Start a simple log now of what you delivered each week, with numbers where you have them; reviews
  reward specifics, not impressions.
A Ask your manager early what a good first review looks like, so you are measured against
  expectations you both know.
A Pick one or two visible improvements you can finish before {month} rather than many half-finished
  ones.
A Collect short notes of thanks or feedback from colleagues; they are easy to forget and useful
  evidence later.
A Prepare questions about growth as well: training budget, mentoring and which projects you could
  lead next.
A Be honest about what took longer than planned and what you learned from it; managers value that
  more than a perfect record.
A As a new {job}, it helps to show that you understand how your work connects to the team's goals.
F Maya works as a {job} at {company}.
F Maya has her first performance review in {month}.
R What did I tell you about my new job and my review?

Q The {plant} on my {spot} has yellowing leaves. I water it every {freq}. What am I doing wrong?
Q Should I repot the {plant} before winter, and what compost should I use?
A Yellow leaves most often mean too much water rather than too little, particularly when the lower
  leaves turn first.
A Check the soil a few centimetres down with a finger, and water only when that layer is dry.
A Make sure the pot has drainage holes and that no water stands in the saucer after watering.
A A {plant} on a {spot} may also be reacting to a change in light or a cold draught.
A Feed it with a diluted balanced fertiliser once a month in the growing season, and not at all in
  winter.
A Remove the worst leaves so that the plant spends its energy on new growth.
A If the roots are circling the pot or are brown and soft, repot into fresh, free-draining compost.
F Maya keeps a {plant} on her {spot}.
F Maya waters her {plant} every {freq}.
R What plant did I say was struggling, and how often do I water it?

Q I want to save {amount} euros for a {goal} by next {month}. What is a realistic plan?
Q I'm behind on saving for the {goal}. Should I move the deadline or cut spending?
A Divide the target by the months left to get a monthly figure, then check it against what actually
  remains after fixed costs.
A Move the money automatically on payday into a separate account, so saving happens before
  spending.
A Look at the last three months of statements; subscriptions and small daily purchases are usually
  where the slack is.
A Keep a small emergency buffer separate from the {goal} fund, so a surprise bill does not wipe out
  your progress.
A If the monthly figure is too high, either extend the deadline or look for one larger saving, such
  as a cheaper phone contract.
A Track progress once a month rather than daily; it stays motivating without becoming a chore.
A An easy-access savings account with a decent rate will add a little on top of the {amount} euros
  over the year.
F Maya is saving {amount} euros for a {goal} by {month}.
R What am I saving for again, and how much?

Q I practise {lang} for {minutes} minutes a day with an app, but I freeze when I have to speak. How
  can I get better at conversation?
Q Can you suggest {lang} podcasts or shows for a lower-intermediate learner?
A Apps are good for vocabulary, but speaking is a separate skill that needs its own practice.
A Book a weekly conversation session with a tutor or a language exchange partner, even if it is
  only thirty minutes.
A Shadowing helps: play short audio clips in {lang} and repeat them aloud straight after the
  speaker.
A Prepare a few set phrases for asking people to repeat or slow down; they buy time and reduce the
  panic.
A Talk to yourself in {lang} while cooking or walking, describing what you are doing.
A Accept mistakes as part of the process; most native speakers care far more about effort than
  accuracy.
A Keep your {minutes} minutes on the app, but swap one day a week for listening to a podcast.
F Maya is learning {lang} for {minutes} minutes a day.
F Maya finds speaking {lang} harder than reading it.
R Which language am I learning, and how much do I practise?

Q Our {pet} {petname} keeps {habit}. How can we stop it?
Q {petname} has been a bit better lately. How do we keep the progress going?
A Most habits like this come from boredom or excess energy, so more exercise and play is usually
  the first step.
A Reward the behaviour you want immediately and consistently, and avoid giving attention to the
  behaviour you don't want.
A Everyone in the household has to respond the same way, otherwise {petname} learns that it
  sometimes works.
A Short training sessions of five minutes, twice a day, work better than one long session.
A Puzzle feeders and chew toys give a {pet} something to do with its mind.
A If the problem started suddenly, a vet check is wise to rule out pain or illness.
A Progress is usually gradual; expect a few weeks before the habit fades.
F Maya has a {pet} called {petname}.
F Maya's {pet} {petname} keeps {habit}.
R What's my pet's name again, and what was the problem?

Q The {appliance} in our {room} has started making a loud grinding noise. It's about {years} years
  old. Repair or replace?
Q If we replace the {appliance}, what should we look for in a new one?
A A grinding noise usually points to a worn bearing, a pump problem or something caught in a moving
  part.
A First switch it off and check for obvious obstructions, such as a coin or a hair clip; that is
  often a quick fix.
A At {years} years old, get a repair quote and compare it with a new model; a common rule is to
  replace when the repair costs more than half.
A Newer models are often much more energy efficient, which can cover part of the price over a few
  years.
A Ask whether the repair comes with a warranty on parts and labour.
A If you replace it, check whether the retailer takes the old {appliance} away for recycling.
A Keep the manual and the model number to hand when you call a technician; it speeds things up.
F Maya's {appliance} in the {room} is about {years} years old and makes a grinding noise.
R Which appliance was making the noise, and how old is it?

Q I just finished {book} and loved it. Can you recommend something similar for my holiday?
Q I didn't get on with the last book you suggested. Anything closer to {book}?
A If you enjoyed {book}, look for novels that combine a strong sense of wonder with a quiet,
  personal story.
A Authors who write in a similar register include Kazuo Ishiguro, Richard Powers, Susanna Clarke
  and Ted Chiang.
A Short story collections suit a holiday because you can finish one in a single sitting.
A For something lighter, a warm science fiction adventure keeps the sense of discovery without the
  heavy themes.
A Check your local library's e-book app before buying; holiday reads are often available to borrow.
A If you prefer audiobooks, several of these have excellent narrators.
A Online reading groups often publish lists of read-alikes for popular titles.
F Maya recently read and loved {book}.
R Which book did I say I loved?

Q I've been sleeping only {hours} hours a night since {event}. Any tips to get more rest?
Q I tried your sleep tips for a week and it's a bit better. What should I try next?
A Keep the same wake-up time every day, even at weekends; it is the strongest signal for your body
  clock.
A Stop caffeine after lunchtime, because it stays in your system for many hours.
A A short wind-down routine of twenty minutes without screens helps your mind switch off.
A Keep the bedroom cool, dark and quiet, and use it only for sleep.
A If you lie awake for more than twenty minutes, get up and do something calm until you feel
  sleepy.
A Daylight in the morning and some exercise during the day both improve sleep at night.
A If poor sleep lasts for more than a few weeks, it is worth speaking to a doctor.
F Maya has been sleeping about {hours} hours a night since {event}.
R How much have I been sleeping, and since when?
"""


def _topics(text: str) -> list[tuple[list[str], list[str], list[str], str]]:
    topics = []
    for block in text.strip().split("\n\n"):
        entries: list[tuple[str, str]] = []
        for line in block.splitlines():
            if line.startswith("  "):
                entries[-1] = (entries[-1][0], f"{entries[-1][1]} {line.strip()}")
            else:
                entries.append((line[0], line[2:]))
        kinds = {k: [t for kind, t in entries if kind == k] for k in "QAFR"}
        topics.append((kinds["Q"], kinds["A"], kinds["F"], kinds["R"][0]))
    return topics


TOPICS = _topics(TOPIC_TEXT)
# fmt: off
FILLER = [
    "Happy to help with that.", "That is a very common situation.",
    "If anything has changed since then, tell me and I will take it into account.",
    "I can turn this into a short checklist if that helps.",
    "Let me know how it goes and we can adjust the plan.",
    "Earlier in our conversation you mentioned a few details that matter here.",
]
GOALS = [
    "Plan a {nights}-night trip to {city} in {month} with my {relative}",
    "Find a {diet} recipe for {guests} guests on {day}",
    "Draft a training plan for the {race}",
    "Work out a monthly budget to save {amount} euros for a {goal}",
    "Compare repair quotes for a {years}-year-old {appliance}",
    "Summarise feedback for my review at {company}",
    "Find {lang} conversation classes near me",
    "Recommend books similar to {book}",
    "Stop our {pet} from {habit}",
    "Improve my sleep since {event}",
    "Diagnose yellow leaves on a {plant} on the {spot}",
]
LESSONS = [
    "ask for the date before planning", "check the user's diet first",
    "the knowledge query needed the exact product name", "keep answers under 150 words",
    "prices changed since the last search; confirm them", "split the plan into weekly steps",
    "the user prefers metric units", "look up opening hours before suggesting a visit",
]
# fmt: on


def _fill(template: str, persona: dict[str, str]) -> str:
    return template.format(**persona)


def persona(rng: random.Random) -> dict[str, str]:
    return {k: rng.choice(v.split("|")) for k, v in PERSONA.items()}


@dataclass(frozen=True)
class Turn:
    question: str
    answer: str
    facts: list[str]


def chat(turns: int, seed: int) -> list[Turn]:
    """A user/assistant conversation: answers of 60-120 words, 1-2 facts per topic turn;
    every fifth turn asks back about something told before (and stores nothing)."""
    rng = random.Random(seed)
    me = persona(rng)
    order = list(range(len(TOPICS)))
    rng.shuffle(order)
    told: dict[int, list[str]] = {}
    out: list[Turn] = []
    topic_turns = 0
    for n in range(turns):
        if n % 5 == 4 and told:
            topic = rng.choice(list(told))
            _, answers, _, question = TOPICS[topic]
            said = f"From what you told me earlier: {' '.join(dict.fromkeys(told[topic]))}"
            sentences = [said, *rng.sample(FILLER[2:], 3), *(_fill(a, me) for a in answers)]
            facts: list[str] = []
        else:
            topic = order[topic_turns % len(order)]
            asked_before, topic_turns = topic_turns // len(order), topic_turns + 1
            questions_, answers, fact_templates, _ = TOPICS[topic]
            question = _fill(questions_[asked_before % len(questions_)], me)
            sentences = [rng.choice(FILLER[:2])] + [
                _fill(a, me) for a in rng.sample(answers, len(answers))
            ]
            picked = rng.sample(fact_templates, min(len(fact_templates), rng.choice((1, 2))))
            facts = [_fill(f, me) for f in picked]
            told.setdefault(topic, []).extend(facts)
        target, words, answer = rng.randint(60, 120), 0, []
        for sentence in sentences:
            size = len(sentence.split())
            if words >= target or (words >= 60 and words + size > 120):
                break
            answer.append(sentence)
            words += size
        out.append(Turn(question, " ".join(answer), facts))
    return out


def episode_requests(count: int, seed: int = 5) -> list[EpisodeRequest]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        goal = _fill(rng.choice(GOALS), persona(rng))
        outcome = rng.choice(("success", "success", "success", "partial", "failure"))
        step = AgentStep(
            thought="I should look this up first.",
            action="knowledge-query",
            arguments={"question": goal},
            observation=f"Found {rng.randint(2, 9)} relevant documents about: {goal}.",
        )
        out.append(
            EpisodeRequest(
                operation="store",
                collection=COLLECTION,
                user=USER,
                conversation_id=f"past-{n % 40}",
                goal=goal,
                steps=[step],
                outcome=outcome,
                score=1.0 if outcome == "success" else 0.4,
                lessons=rng.sample(LESSONS, rng.randint(0, 2)),
                tokens=rng.randint(400, 3000),
                duration_seconds=rng.uniform(2, 40),
                session_id=f"episode-{seed}-{n}",
            )
        )
    return out


# -- the stack -------------------------------------------------------------------------
@dataclass
class Stack:
    agent: AgentProcessor
    facts: FactMemoryProcessor
    flow: Flow

    @property
    def config(self) -> AgentMemConfig:
        return self.agent.workspace(WS).config

    @property
    def counter(self) -> HFTokenCounter:
        counter = self.agent.started.state.counter
        assert isinstance(counter, HFTokenCounter)
        return counter


def _flows(path: Path, body: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({WS: body}))  # JSON is YAML
    return path


@contextlib.asynccontextmanager
async def stack(
    transport: PulsarTransport, root: Path, tag: str, agent_mem: dict[str, str]
) -> AsyncIterator[Stack]:
    """The three memory services (data under ``root``) and the agent, queues tagged ``tag``."""
    registry, started = CollectorRegistry(), list[Any]()
    names = [*SERVICES, "agent", "text-completion"]
    topics = {
        n: {s: f"{s}:tg:{n}-{tag}:{WS}:{FLOW}" for s in ("request", "response")} for n in names
    }

    def settings(cls: type[Any], pid: str, config: dict[str, Any], **extra: Any) -> Any:
        flows = _flows(root / f"flows-{pid}.json", config)
        loaded: ProcessorSettings = cls.Settings.load(
            {"id": pid, "flows": flows, "state_dir": root / "state", "concurrency": 4, **extra}
        )
        return loaded

    try:
        services: dict[str, Any] = {}
        for name, cls in SERVICES.items():
            mine = dict(topics[name])
            if name == "conversation-memory":
                mine["ended"] = f"flow:tg:conversation-ended-{tag}:{WS}:{FLOW}"
            pid = f"{name}-{tag}"
            config: dict[str, Any] = {f"processor:{pid}": {FLOW: {"topics": mine}}}
            processor = cls(
                settings(cls, pid, config, data_dir=root / name), transport, registry=registry
            )
            await processor.start()
            started.append(processor)
            services[name] = processor
        agent_topics = {
            "request": topics["agent"]["request"],
            "next": topics["agent"]["request"],
            "response": topics["agent"]["response"],
        }
        for name in ("text-completion", *SERVICES):
            agent_topics[f"{name}-request"] = topics[name]["request"]
            agent_topics[f"{name}-response"] = topics[name]["response"]
        pid = f"agent-{tag}"
        config = {
            f"processor:{pid}": {FLOW: {"topics": agent_topics, "parameters": {}}},
            "agent-mem": agent_mem,
            "tool": {},
        }
        agent = AgentProcessor(settings(AgentProcessor, pid, config), transport, registry=registry)
        await agent.start()
        started.append(agent)
        yield Stack(agent, services["fact-memory"], agent.flows[(WS, FLOW)])
    finally:
        for processor in reversed(started):
            await processor.stop()


# -- filling ---------------------------------------------------------------------------
async def write_facts(service: FactMemoryProcessor, texts: list[str], vectors: np.ndarray) -> None:
    """Facts straight into the service's store, with its own record layout and scope,
    indexed as the store indexes while it grows (as if idle after each thousand)."""
    memory, scope, now = service.memory, StoreScope(WS, COLLECTION, USER), time.time()
    store = service.store if isinstance(service.store, EdgeStore) else None
    await memory.ctx.scopes.remember(scope)
    for first in range(0, len(texts), 1000):
        records = []
        for i in range(first, min(first + 1000, len(texts))):
            normalised = rec.normalise(texts[i])
            payload = rec.new_payload(
                scope, content=texts[i], normalised=normalised, now=now, importance=0.5,
                confidence=0.7, expires_at=rec.NEVER, metadata={}, source_conversation=None,
                request_id=None,
            )  # fmt: skip
            records.append(Record(rec.fact_id(scope, normalised), payload, vectors[i].tolist()))
        await memory.ctx.upsert(records)
        if store:
            await store.index_due(idle=True)
    if store:
        await store.flush()


async def store_episodes(flow: Flow, requests: list[EpisodeRequest]) -> None:
    episodes = EpisodeClient.of(flow, timeout=120)
    for first in range(0, len(requests), 16):  # concurrent stores share embedding batches
        await asyncio.gather(*(episodes.store_request(r) for r in requests[first : first + 16]))


async def store_facts(flow: Flow, facts: list[str]) -> None:
    owner = Scope(flow.workspace, COLLECTION, USER)
    await FactClient.of(flow, timeout=120).store(owner, [FactInput(content=f) for f in facts])


async def append(s: Stack, conversation: str, turn: Turn) -> None:
    """The turn into conversation memory exactly as the agent appends it after answering."""
    request = AgentRequest(
        question=turn.question,
        collection=COLLECTION,
        user=USER,
        conversation_id=conversation,
        session_id=str(uuid.uuid4()),
    )
    inv = Invocation.of(request, s.flow, s.config)
    inv.state = MemoryState(started_at=time.time())
    await s.agent.ending.append_turn(
        inv, turn.answer, "success", asyncio.Event(), before_answer=True
    )


# -- part 1: assembly latency ------------------------------------------------------------
async def assemble(
    s: Stack, question: str, scope: Scope, cfg: AgentMemConfig | None = None
) -> tuple[float, Recall, float, str]:
    """Total seconds, the recall, render seconds and the memory section, as ``begin``
    (with the workspace's config, or ``cfg``)."""
    cfg = cfg or s.config
    started = time.perf_counter()
    embedder = s.agent.started.state.embedder
    recall = await MemoryRecall(s.flow, embedder, cfg, s.agent.sources).recall(question, scope)
    rendered = time.perf_counter()
    budget = cfg.memory_token_budget
    context, _ = prompt.render_memory(s.counter, budget, recall.items, s.agent.layout)
    done = time.perf_counter()
    return done - started, recall, done - rendered, context


def torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


async def latency(s: Stack, asked: list[str], warmup: int, conversation: str, size: int) -> str:
    scope = Scope(WS, COLLECTION, USER, conversation)
    totals: list[float] = []
    parts: dict[str, list[float]] = {}
    facts, tokens, missed = [], [], 0
    for n, question in enumerate(asked):
        total, recall, render, context = await assemble(s, question, scope)
        if n < warmup:
            continue
        totals.append(total)
        for name, seconds in {**recall.timings, "render": render}.items():
            parts.setdefault(name, []).append(seconds)
        facts.append(len(recall.items.get("facts", [])))
        tokens.append(s.counter.count(context))
        # Sources this stack does not run (the playbook) are absent, not missed.
        missed += any(why != "not in this flow" for why in recall.missed.values())
    p50, p99 = ms(totals, 0.5), ms(totals, 0.99)
    met = p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS
    verdict = ("MET" if met else "NOT MET") if size >= 100_000 else "n/a below 100k"
    breakdown = ", ".join(f"{k} {ms(parts[k], 0.5):.1f}" for k in ORDER if k in parts)
    alone = await sources_alone(s, asked[warmup : warmup + 100], conversation)
    return (
        f"assembly p50 {p50:.1f} ms, p99 {p99:.1f} ms, mean {statistics.mean(totals) * 1000:.1f}"
        f" ms, max {max(totals) * 1000:.1f} ms over {len(totals)} questions "
        f"[targets at 100k: p50 <= {TARGET_P50_MS:g}, p99 <= {TARGET_P99_MS:g} ms: {verdict}]\n"
        f"      medians (ms; fan-outs overlap): {breakdown}\n"
        f"      each source asked alone (medians, ms): {alone}\n"
        f"      per prompt: {statistics.mean(facts):.1f} facts, memory section p50 "
        f"{statistics.median(tokens):.0f} / max {max(tokens)} tokens (budget "
        f"{s.config.memory_token_budget}); invocations with a source missed: {missed}"
    )


async def top_k_side_by_side(
    s: Stack, asked: list[str], warmup: int, conversation: str, ks: list[int]
) -> str:
    """Assembly with each ``fact-retrieval-top-k`` in ``ks``, taking turns per question (the
    first value changes each question), so load on the machine falls on all alike."""
    scope = Scope(WS, COLLECTION, USER, conversation)
    configs = {k: s.config.model_copy(update={"fact_retrieval_top_k": k}) for k in ks}
    totals: dict[int, list[float]] = {k: [] for k in ks}
    fact_ms: dict[int, list[float]] = {k: [] for k in ks}
    shown: dict[int, list[int]] = {k: [] for k in ks}
    tokens: dict[int, list[int]] = {k: [] for k in ks}
    for n, question in enumerate(asked):
        for k in ks[n % len(ks) :] + ks[: n % len(ks)]:
            total, recall, _, context = await assemble(s, question, scope, configs[k])
            if n >= warmup:
                totals[k].append(total)
                fact_ms[k].append(recall.timings.get("facts", 0.0))
                shown[k].append(len(recall.items.get("facts", [])))
                tokens[k].append(s.counter.count(context))
    return "\n      ".join(
        f"fact-retrieval-top-k {k}: assembly p50 {ms(totals[k], 0.5):.1f} ms, p99 "
        f"{ms(totals[k], 0.99):.1f} ms; facts source p50 {ms(fact_ms[k], 0.5):.1f} ms; "
        f"{statistics.mean(shown[k]):.1f} facts recalled, memory section p50 "
        f"{statistics.median(tokens[k]):.0f} tokens"
        for k in ks
    )


async def sources_alone(s: Stack, asked: list[str], conversation: str) -> str:
    """The same recall with one source enabled at a time, to see what each costs alone."""
    cfg, parts = s.config, dict[str, list[float]]()
    only = {
        "facts": ({"episode_retrieval_top_k": 0}, ""),
        "episodes": ({"fact_retrieval_top_k": 0}, ""),
        "conversation": ({"fact_retrieval_top_k": 0, "episode_retrieval_top_k": 0}, conversation),
    }
    for name, (update, conversation_id) in only.items():
        recall = MemoryRecall(
            s.flow, s.agent.started.state.embedder, cfg.model_copy(update=update), s.agent.sources
        )
        for question in asked:
            got = await recall.recall(question, Scope(WS, COLLECTION, USER, conversation_id))
            for key in (name, "embed"):
                if key in got.timings:
                    parts.setdefault(key, []).append(got.timings[key])
    return ", ".join(f"{k} {ms(parts[k], 0.5):.1f}" for k in ORDER if k in parts)


async def overhead(
    args: argparse.Namespace,
    transport: PulsarTransport,
    tmp: Path,
    agent_mem: dict[str, str],
    texts: list[str],
    vectors: np.ndarray,
    vector_seconds: float,
) -> None:
    asked = questions(args.queries + args.warmup)
    episodes = episode_requests(args.episodes)
    history = chat(20, seed=3)
    for size in args.sizes:
        root, conversation = tmp / f"size-{size}", "bench-conversation"
        print(
            f"\n== {size:,} facts, {len(episodes)} episodes and a {len(history)}-turn "
            f"conversation in one scope ({COLLECTION}/{USER})"
        )
        async with stack(transport, root, f"{size}-flat", agent_mem) as s:
            started = time.perf_counter()
            await write_facts(s.facts, texts[:size], vectors[:size])
            wrote = time.perf_counter() - started
            started = time.perf_counter()
            await store_episodes(s.flow, episodes)
            for turn in history:
                await append(s, conversation, turn)
            through_bus = time.perf_counter() - started
            print(
                f"  fill: {size:,} facts written straight into fact-memory's store (its record "
                f"layout) in {wrote:.1f} s, vectors {vector_seconds:.0f} s for the largest size "
                f"(see setup); {len(episodes)} episodes (episode-memory store) and "
                f"{len(history)} turns (InvocationEnd.append_turn) through the bus in "
                f"{through_bus:.1f} s; torch threads now {torch_threads()}"
            )
            print("  as grown (indexed by the store as it went):\n    " + await latency(
                s, asked, args.warmup, conversation, size))  # fmt: skip
            if args.fact_top_k:
                print("  side by side (taking turns per question):\n      " + await
                      top_k_side_by_side(s, asked, args.warmup, conversation,
                                         args.fact_top_k))  # fmt: skip
        if not args.hnsw:
            continue
        seconds = await optimize(root / "fact-memory")  # offline: it holds the GIL
        async with stack(transport, root, f"{size}-hnsw", agent_mem) as s:
            print(f"  after EdgeStore.optimize() of {FACTS_COLLECTION} (HNSW; {seconds:.0f} s, "
                  "offline):\n    " + await latency(
                      s, asked, args.warmup, conversation, size))  # fmt: skip


# -- part 2: prompt tokens per turn ------------------------------------------------------
async def tokens(transport: PulsarTransport, tmp: Path, agent_mem: dict[str, str]) -> None:
    turns, conversation = chat(50, seed=1), "chat-50"
    async with stack(transport, tmp / "chat", "chat", agent_mem) as s:
        cfg, counter, ws = s.config, s.counter, s.agent.workspace(WS)
        words = [len(t.answer.split()) for t in turns]
        print(
            f"\n== Prompt tokens over a {len(turns)}-turn conversation (MiniLM WordPiece counts;"
            f" answers {min(words)}-{max(words)} words, mean {statistics.mean(words):.0f}; "
            f"memory-token-budget {cfg.memory_token_budget}; torch threads {torch_threads()})"
        )
        print("  memory: the agent's first-iteration prompt, system (with its tools) + "
              "AgentProcessor.begin's memory section + question;")  # fmt: skip
        print("  transcript: the same system prompt without memory tools + every earlier "
              "question and answer + question")  # fmt: skip
        print(f"  {'turn':>4} {'memory section':>15} {'memory prompt':>14} {'transcript':>11} "
              f"{'reduction':>10}   facts/episodes/turns in memory")  # fmt: skip
        plain = prompt.system_prompt([], cfg.additional_context)
        transcript: list[str] = []
        last = (0, 0)
        for n, turn in enumerate(turns, 1):
            request = AgentRequest(
                question=turn.question, collection=COLLECTION, user=USER,
                conversation_id=conversation, session_id=str(uuid.uuid4()),
            )  # fmt: skip
            inv = Invocation.of(request, s.flow, cfg)
            state = await s.agent.begin(s.agent.started.state, inv)
            tools = s.agent.tools_for(ws, inv)
            system = prompt.system_prompt(list(tools.values()), cfg.additional_context)
            memory = counter.count(system) + counter.count(
                prompt.user_prompt(state.context, [], turn.question)
            )
            replay = "\n\n".join([*transcript, f"Question: {turn.question}"])
            full = counter.count(plain) + counter.count(replay)
            if n in TABLE_TURNS:
                kinds = [r.kind for r in state.used]
                held = (
                    f"{kinds.count('fact')}/{kinds.count('episode')}/"
                    f"{kinds.count('turn') + kinds.count('summary')}"
                )
                print(f"  {n:>4} {counter.count(state.context):>15} {memory:>14} {full:>11} "
                      f"{1 - memory / full:>9.0%}   {held}")  # fmt: skip
            last = (memory, full)
            # The answer is sent; the agent appends the turn, the learner keeps facts and an
            # episode (both written here through the services, as the learner writes them).
            await append(s, conversation, turn)
            if turn.facts:
                await store_facts(s.flow, turn.facts)
            await store_episodes(s.flow, [EpisodeRequest(
                operation="store", collection=COLLECTION, user=USER,
                conversation_id=conversation, goal=turn.question, outcome="success",
                score=1.0, session_id=f"chat-{n}",
            )])  # fmt: skip
            transcript.append(f"User: {turn.question}\nAssistant: {turn.answer}")
        reduction = 1 - last[0] / last[1]
        verdict = "MET" if reduction >= TARGET_REDUCTION else "NOT MET"
        print(
            f"  turn {len(turns)}: {last[0]:,} prompt tokens with memory vs {last[1]:,} replaying"
            f" the transcript: {reduction:.0%} fewer [target >= {TARGET_REDUCTION:.0%}: {verdict}]"
        )


async def run(args: argparse.Namespace, url: str, tmp: Path) -> None:
    agent_mem = {"memory-token-budget": str(args.budget)}
    texts = corpus(max(args.sizes)) if args.sizes else []
    started = time.perf_counter()
    vectors = await embed_all(texts) if texts else np.zeros((0, 384), dtype=np.float32)
    vector_seconds = time.perf_counter() - started
    if texts:
        print(
            f"  setup: {len(texts):,} fact vectors in {vector_seconds:.1f} s (all-MiniLM-L6-v2, "
            f"{os.cpu_count()} torch threads, batches of 2048; cached in the temp dir)"
        )
    transport = PulsarTransport(PulsarOptions(url=url))
    await transport.connect()
    try:
        if args.sizes:
            await overhead(args, transport, tmp, agent_mem, texts, vectors, vector_seconds)
        await tokens(transport, tmp, agent_mem)
    finally:
        await transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="facts per scope, comma-separated")
    parser.add_argument("--queries", type=int, default=200, help="timed invocations per state")
    parser.add_argument("--warmup", type=int, default=20, help="untimed invocations first")
    parser.add_argument("--episodes", type=int, default=500, help="episodes in the scope")
    parser.add_argument("--budget", type=int, default=800, help="memory-token-budget")
    parser.add_argument("--no-hnsw", dest="hnsw", action="store_false",
                        help="skip the runs after EdgeStore.optimize()")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 facts, 40 queries")
    parser.add_argument("--fact-top-k", default="",
                        help="fact-retrieval-top-k values timed side by side: 5,10")  # fmt: skip
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.fact_top_k = [int(k) for k in args.fact_top_k.split(",") if k.strip()]
    if args.quick:
        args.sizes, args.queries, args.warmup, args.episodes = [2000], 40, 5, 50
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(
        f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"load average {os.getloadavg()[0]:.2f}, Python {platform.python_version()}; "
        f"texts: {'LoCoMo + generated' if LOCOMO.is_file() else 'generated'}; "
        f"settings: {vars(args)}"
    )
    with tempfile.TemporaryDirectory(prefix="agent-bench-") as name:
        tmp = Path(name)
        broker = EmbeddedBroker(tmp / "broker")
        url = broker.start()
        try:
            asyncio.run(run(args, url, tmp))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
