"""PII and secrets in every stored kind of memory, over the real broker, store and embedder:
redacted by default, refused under a workspace's ``pii-policy: drop``, kept under ``allow``.

Each service runs three workspaces: ``ws-a`` (no policy: the default, redact), ``ws-drop``
and ``ws-allow`` (set in their agent-mem config, as a deployment would).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.records import turn_record_id, turn_text
from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.embedding.priority import is_lowered
from react_mem.schema import AgentStep
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.playbook import (
    Delta,
    DeltaOperation,
    PlaybookRequest,
    PlaybookResponse,
)
from react_mem.schema.scope import Scope
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, serving, topics
from tests.support.pii_values import sentence

pytestmark = pytest.mark.broker

WORKSPACES = ("ws-a", "ws-drop", "ws-allow")
CONFIG = {
    "ws-drop": {"agent-mem": {"pii-policy": "drop"}},
    "ws-allow": {"agent-mem": {"pii-policy": "allow"}},
}
CLEAN = "The user prefers short answers in the morning."


def personal(seed: int) -> tuple[str, list[str], list[str]]:
    """A text holding a card, an SSN, an IBAN, an e-mail, a phone and a credential (fixed
    seed), the values, and the ``<TYPE>`` placeholders a redaction must show."""
    rng = random.Random(seed)
    parts = [sentence(rng, k) for k in ("card", "ssn", "iban", "email", "phone", "api_key")]
    return " ".join(p[0] for p in parts), [p[1] for p in parts], [f"<{p[2]}>" for p in parts]


def assert_redacted(text: str, values: list[str], placeholders: list[str]) -> None:
    for value in values:
        assert value not in text
    for placeholder in placeholders:
        assert placeholder in text


def detections(registry: CollectorRegistry, processor: str, kind: str) -> float:
    return sum(
        sample.value
        for metric in registry.collect()
        if metric.name == "tg_memory_pii_detections"
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels["processor"] == processor
        and sample.labels["kind"] == kind
    )


def start(
    cls: Any,
    response: Any,
    name: str,
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    registry: CollectorRegistry,
    extra: tuple[str, ...] = (),
) -> Any:
    return serving(
        cls,
        response,
        transport,
        pid=f"{name}-{unique}",
        queues={ws: topics(name, unique, ws, extra) for ws in WORKSPACES},
        data_dir=tmp_path / name,
        registry=registry,
        clock=MovableClock(),
        config=CONFIG,
        retry_delay=0.01,
        metrics=False,
        # The playbook's seed bullets would be listed with what a test writes.
        **({"seed_bullets": None} if name == "playbook-memory" else {}),
    )


async def test_facts(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    text, values, placeholders = personal(1)
    async with start(
        FactMemoryProcessor, FactResponse, "fact-memory", transport, tmp_path, unique, registry
    ) as svc:

        async def store(ws: str, *contents: str, **meta: str) -> FactResponse:
            facts = [FactInput(content=c, metadata=meta) for c in contents]
            return await svc.ask(FactRequest(operation="store", user="alice", facts=facts), ws)

        async def contents(ws: str) -> list[str]:
            """Every stored text: contents and metadata values."""
            listed = await svc.ask(FactRequest(operation="list", user="alice", limit=100), ws)
            return [f.content for f in listed.facts] + [
                v for f in listed.facts for v in f.metadata.values()
            ]

        stored = await store("ws-a", text, CLEAN, note=text)
        assert stored.error is None
        texts = await contents("ws-a")
        assert CLEAN in texts
        [*personal_texts] = [t for t in texts if t != CLEAN]
        assert len(personal_texts) == 3  # one content, two notes
        for stored_text in personal_texts:
            assert_redacted(stored_text, values, placeholders)

        # update: the new version is screened too.
        updated = await svc.ask(
            FactRequest(
                operation="update",
                user="alice",
                fact_id=stored.stored[1].id,
                fact=FactInput(content=f"{CLEAN} {text}"),
            ),
            "ws-a",
        )
        assert updated.error is None
        history = await svc.ask(
            FactRequest(operation="history", user="alice", fact_id=updated.stored[0].id), "ws-a"
        )
        assert_redacted(history.facts[-1].content, values, placeholders)
        assert detections(registry, svc.processor.id, "fact") == 4 * len(values)

        refused = await store("ws-drop", CLEAN, text)
        assert refused.error is not None and refused.error.type == "pii-refused"
        assert not any(v in refused.error.message for v in values)
        assert await contents("ws-drop") == []  # the whole batch refused
        assert (await store("ws-drop", CLEAN)).error is None

        assert (await store("ws-allow", text)).error is None
        assert text in await contents("ws-allow")


async def test_episodes(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    text, values, placeholders = personal(2)
    steps = [
        AgentStep(
            thought=f"The user said: {text}",
            action="lookup",
            arguments={"query": text},
            observation=text,
        )
    ]
    async with start(
        EpisodeMemoryProcessor,
        EpisodeResponse,
        "episode-memory",
        transport,
        tmp_path,
        unique,
        registry,
    ) as svc:

        async def store(ws: str) -> EpisodeResponse:
            request = EpisodeRequest(
                operation="store",
                user="alice",
                goal=text,
                steps=steps,
                outcome="success",
                lessons=[text, CLEAN],
                session_id="s1",
            )
            return await svc.ask(request, ws)

        async def listed(ws: str) -> list[Any]:
            return (await svc.ask(EpisodeRequest(operation="list", user="alice"), ws)).episodes

        assert (await store("ws-a")).error is None
        [episode] = await listed("ws-a")
        [step] = episode.steps
        for stored in (
            episode.goal,
            episode.lessons[0],
            step.thought,
            step.observation,
            step.arguments["query"],
        ):
            assert_redacted(stored, values, placeholders)
        assert episode.lessons[1] == CLEAN
        assert detections(registry, svc.processor.id, "episode") == 5 * len(values)

        refused = await store("ws-drop")
        assert refused.error is not None and refused.error.type == "pii-refused"
        assert await listed("ws-drop") == []

        assert (await store("ws-allow")).error is None
        [kept] = await listed("ws-allow")
        assert kept.goal == text and kept.steps[0].observation == text


async def test_conversation_turns_and_summaries(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    text, values, placeholders = personal(3)
    async with start(
        ConversationMemoryProcessor,
        ConversationResponse,
        "conversation-memory",
        transport,
        tmp_path,
        unique,
        registry,
        ("ended",),
    ) as svc:

        async def ask(ws: str, operation: str, **fields: Any) -> ConversationResponse:
            request = ConversationRequest(
                operation=operation, user="alice", conversation_id="c1", **fields
            )
            return await svc.ask(request, ws)

        async def write(ws: str) -> list[ConversationResponse]:
            return [
                await ask(ws, "append", turn_id="t1", query=text, answer=text, summary=text),
                await ask(ws, "update-summary", summary=f"{CLEAN} {text}"),
            ]

        assert all(r.error is None for r in await write("ws-a"))
        got = await ask("ws-a", "get")
        assert got.conversation is not None
        [turn] = got.conversation.turns
        for stored in (turn.query, turn.answer, turn.summary, got.conversation.summary):
            assert_redacted(stored, values, placeholders)
        assert got.conversation.summary.startswith(CLEAN)
        found = await ask("ws-a", "search", query="card number and e-mail", min_score=-1.0)
        assert found.error is None and len(found.turns) == 1
        assert_redacted(found.turns[0].answer, values, placeholders)
        assert detections(registry, svc.processor.id, "turn") == 3 * len(values)
        assert detections(registry, svc.processor.id, "summary") == len(values)

        refused = await write("ws-drop")
        assert [r.error.type if r.error else None for r in refused] == ["pii-refused"] * 2
        assert (await ask("ws-drop", "get")).conversation is None

        assert all(r.error is None for r in await write("ws-allow"))
        kept = await ask("ws-allow", "get")
        assert kept.conversation is not None and kept.conversation.turns[0].query == text
        assert kept.conversation.summary == f"{CLEAN} {text}"


async def test_playbook_bullets_and_their_history(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    text, values, placeholders = personal(4)
    async with start(
        PlaybookMemoryProcessor,
        PlaybookResponse,
        "playbook-memory",
        transport,
        tmp_path,
        unique,
        registry,
    ) as svc:

        async def apply(ws: str, delta_id: str) -> PlaybookResponse:
            delta = Delta(
                delta_id=delta_id,
                reason=f"learned from: {text}",
                operations=[
                    DeltaOperation(type="ADD", content=f"When asked to pay, reuse {text}"),
                    DeltaOperation(type="ADD", content="Confirm the amount before paying."),
                ],
            )
            return await svc.ask(PlaybookRequest(operation="apply-delta", delta=delta), ws)

        async def bullets(ws: str) -> list[str]:
            listed = await svc.ask(PlaybookRequest(operation="list"), ws)
            return [b.content for b in listed.bullets]

        assert (await apply("ws-a", "d1")).error is None
        [personal_bullet] = [b for b in await bullets("ws-a") if b.startswith("When")]
        assert_redacted(personal_bullet, values, placeholders)
        assert "Confirm the amount before paying." in await bullets("ws-a")
        [record] = (await svc.ask(PlaybookRequest(operation="history"), "ws-a")).history
        assert_redacted(record.reason, values, placeholders)
        assert_redacted(record.operations[0].content or "", values, placeholders)
        assert detections(registry, svc.processor.id, "bullet") == 2 * len(values)

        refused = await apply("ws-drop", "d1")
        assert refused.error is not None and refused.error.type == "pii-refused"
        assert await bullets("ws-drop") == []

        assert (await apply("ws-allow", "d1")).error is None
        assert f"When asked to pay, reuse {text}" in await bullets("ws-allow")


async def test_a_turn_is_embedded_as_stored_though_the_embedding_starts_before_the_screen(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    """conversation-memory embeds an appended turn beside its PII screen: the vector kept is
    the embedding of the text kept (redacted, when the screen changed it), and a text the
    screen left alone is embedded once."""
    text, values, placeholders = personal(4)
    embedder = HashingEmbedder()
    name = "conversation-memory"
    async with serving(
        ConversationMemoryProcessor,
        ConversationResponse,
        transport,
        pid=f"{name}-{unique}",
        queues={ws: topics(name, unique, ws, ("ended",)) for ws in ("ws-a", "ws-allow")},
        data_dir=tmp_path / name,
        registry=registry,
        clock=MovableClock(),
        config=CONFIG,
        embedder=embedder,
        metrics=False,
    ) as svc:
        collection = svc.processor.memory.memory.collection
        for ws, redacted, embeddings in (("ws-a", True, 2), ("ws-allow", False, 1)):
            before = embedder.texts_embedded
            request = ConversationRequest(
                operation="append", user="alice", conversation_id="c1", turn_id="t1",
                query=text, answer=CLEAN,
            )  # fmt: skip
            assert (await svc.ask(request, ws)).error is None
            assert embedder.texts_embedded - before == embeddings
            scope = Scope(ws, "default", "alice", "c1")
            [record] = await svc.processor.store.get(
                collection, [turn_record_id(scope, "t1")], scope=scope
            )
            kept = turn_text(record.payload)
            if redacted:
                assert_redacted(kept, values, placeholders)
            else:
                assert kept == f"{text}\n{CLEAN}"
            [expected, as_sent] = await embedder.embed([kept, f"{text}\n{CLEAN}"])
            assert record.vector is not None  # float32 in the store
            assert list(record.vector) == pytest.approx(expected, abs=1e-6)
            assert (list(record.vector) == pytest.approx(as_sent, abs=1e-6)) is not redacted


class _NotingEmbedder(HashingEmbedder):
    """Notes, per call, whether it was made as work off an answer's path."""

    def __init__(self) -> None:
        super().__init__()
        self.noted: list[tuple[str, bool]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.noted += [(text, is_lowered()) for text in texts]
        return await super().embed(texts)


async def test_a_turns_embedding_runs_below_what_callers_wait_for(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    """An appended turn is stored beside its answer, not before it: its embeddings (as
    sent, and as stored when the screen changed the text) run on lowered threads, so the
    answer, the searches and the bus come first on shared cores. A search's embedding is
    what its caller waits for: not lowered."""
    text, _, _ = personal(5)
    embedder = _NotingEmbedder()
    name = "conversation-memory"
    async with serving(
        ConversationMemoryProcessor,
        ConversationResponse,
        transport,
        pid=f"{name}-{unique}",
        queues={"ws-a": topics(name, unique, "ws-a", ("ended",))},
        data_dir=tmp_path / name,
        registry=registry,
        clock=MovableClock(),
        config=CONFIG,
        embedder=embedder,
        metrics=False,
    ) as svc:
        append = ConversationRequest(
            operation="append", user="alice", conversation_id="c1", turn_id="t1",
            query=text, answer=CLEAN,
        )  # fmt: skip
        assert (await svc.ask(append, "ws-a")).error is None
        assert len(embedder.noted) == 2  # as sent, then as stored (redacted)
        assert all(lowered for _, lowered in embedder.noted)
        search = ConversationRequest(
            operation="search", user="alice", query="short answers", top_k=3
        )
        assert (await svc.ask(search, "ws-a")).error is None
        assert embedder.noted[-1] == ("short answers", False)
