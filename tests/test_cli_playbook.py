"""``react-mem playbook`` against the real playbook-memory service and ``react-mem feedback``
onto the persistent feedback queue, over the real embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.transport import Transport
from react_mem.cli import build_parser
from react_mem.commands import feedback, playbook
from react_mem.commands.common import ServiceQueues
from react_mem.schema.playbook import (
    Delta,
    DeltaOperation,
    Feedback,
    PlaybookRequest,
    PlaybookResponse,
)
from tests.support.memory_services import MovableClock, Running, serving

pytestmark = pytest.mark.broker


# -- feedback ------------------------------------------------------------------------


async def run_feedback(transport: Transport, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["feedback", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = await feedback.send(transport, args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@contextlib.asynccontextmanager
async def feedback_queue(transport: PulsarTransport, unique: str) -> AsyncIterator[Any]:
    """The learner's side: subscribed first, as a running learner is."""
    queue = Queue.parse(f"flow:tg:agent-feedback:cli-{unique}:f1")
    consumer = await transport.consumer(queue, f"learner-{unique}")
    try:
        yield consumer
    finally:
        await consumer.close()


async def received(consumer: Any) -> tuple[Feedback, dict[str, str]]:
    delivery = await asyncio.wait_for(consumer.receive(), 10)
    await consumer.ack(delivery)
    return Feedback.decode(delivery.data), delivery.properties


async def test_feedback_is_published_on_the_flows_feedback_queue(
    transport: PulsarTransport, unique: str
) -> None:
    where = ["--workspace", f"cli-{unique}", "--flow", "f1"]
    async with feedback_queue(transport, unique) as consumer:
        code, out, err = await run_feedback(
            transport,
            "session-7",
            "--harmful",
            "--rubric",
            "format=fail",
            "--rubric",
            "cites the rules=PASS",
            "--ground-truth",
            "42 km",
            "--comment",
            "wrong unit",
            "--user",
            "ada",
            "--collection",
            "games",
            *where,
        )
        assert code == 0, err
        message, properties = await received(consumer)
        assert (message.session_id, message.helpful, message.rating) == ("session-7", False, None)
        assert [(r.name, r.passed) for r in message.rubric] == [
            ("format", False),
            ("cites the rules", True),
        ]
        assert (message.ground_truth, message.comment) == ("42 km", "wrong unit")
        assert (message.user, message.collection) == ("ada", "games")
        assert message.feedback_id and properties["id"] == message.feedback_id
        assert out == (
            f"sent feedback {message.feedback_id} to flow:tg:agent-feedback:cli-{unique}:f1: "
            "session session-7 harmful; rubric: format fail, cites the rules pass; "
            "ground truth: '42 km'; comment: 'wrong unit'\n"
        )

        code, out, _ = await run_feedback(
            transport, "session-8", "--rating", "0.5", "--json", *where
        )
        message, _ = await received(consumer)
        assert code == 0 and json.loads(out) == message.to_wire()
        assert (message.session_id, message.rating, message.helpful) == ("session-8", 0.5, None)
        assert message.user is None and message.rubric == []

        code, out, err = await run_feedback(transport, "session-9", "--rating", "2", *where)
        assert code == 2 and out == ""
        assert "invalid arguments: rating: Input should be less than or equal to 1" in err
        code, _, _ = await run_feedback(transport, "session-10", "--helpful", *where)
        message, _ = await received(consumer)  # the refused one was never sent
        assert (message.session_id, message.helpful) == ("session-10", True)


def test_feedback_needs_exactly_one_verdict_and_well_formed_rubrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    for argv in (
        ["feedback", "s"],
        ["feedback", "s", "--helpful", "--harmful"],
        ["feedback", "s", "--helpful", "--rubric", "format"],
        ["feedback", "s", "--helpful", "--rubric", "format=maybe"],
    ):
        with pytest.raises(SystemExit) as exit:
            parser.parse_args(argv)
        assert exit.value.code == 2
    assert "expected NAME=pass or NAME=fail, not 'format=maybe'" in capsys.readouterr().err


# -- playbook ------------------------------------------------------------------------


async def run_playbook(transport: Transport, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["playbook", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = await playbook.execute(transport, args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()[1:]]


async def test_playbook_times_out_with_a_hint_and_refuses_an_unconfirmed_rollback(
    transport: PulsarTransport, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = await run_playbook(
        transport, "show", "--workspace", unique, "--timeout", "0.5"
    )
    assert code == 1 and out == ""
    assert f"no response from playbook-memory on request:tg:playbook-memory:{unique}:default" in err
    assert "react-mem up" in err

    monkeypatch.setattr("sys.stdin", io.StringIO())
    code, out, err = await run_playbook(transport, "rollback", "3", "--collection", "games")
    assert code == 1 and out == ""
    assert err == (
        "react-mem playbook: this replaces the playbook of collection games with its bullets "
        "as of version 3 (as a new version; the history is kept); add --yes to confirm\n"
    )


def test_playbook_search_takes_a_preset_or_json_weights(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(["playbook", "search", "q", "--weights", "relevance-dominant"])
    assert args.weights == "relevance-dominant"
    args = parser.parse_args(
        ["playbook", "search", "q", "--weights", '{"relevance": 0.7, "strength": 0.2, "type": 0.1}']
    )
    assert (args.weights.relevance, args.weights.strength, args.weights.type) == (0.7, 0.2, 0.1)
    with pytest.raises(SystemExit):
        parser.parse_args(["playbook", "search", "q", "--weights", "strongest"])
    assert (
        "'strongest' is neither a preset (default, relevance-dominant)" in capsys.readouterr().err
    )


@contextlib.asynccontextmanager
async def playbook_service(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> AsyncIterator[Running[Any, PlaybookRequest, PlaybookResponse]]:
    """The real playbook-memory service on the stack's queue names, workspace cli-{unique}."""
    from memory_services.playbook.service import PlaybookMemoryProcessor

    queues = ServiceQueues.of("playbook-memory", f"cli-{unique}", "f1")
    async with serving(
        PlaybookMemoryProcessor,
        PlaybookResponse,
        transport,
        pid=f"playbook-memory-{unique}",
        queues={f"cli-{unique}": {"request": queues.request, "response": queues.response}},
        data_dir=tmp_path / "playbook-memory",
        registry=CollectorRegistry(),
        clock=MovableClock(),
        retry_delay=0.01,
        metrics=False,
        seed_bullets=None,  # the seed bullets are tested in test_playbook.py
    ) as running:
        yield running


def add(content: str, section: str, **fields: Any) -> DeltaOperation:
    return DeltaOperation(type="ADD", content=content, section=section, **fields)


async def apply(
    service: Running[Any, PlaybookRequest, PlaybookResponse],
    unique: str,
    delta: Delta,
    scope: str = "",
) -> PlaybookResponse:
    response = await service.ask(
        PlaybookRequest(
            operation="apply-delta", collection="games", context_scope_id=scope, delta=delta
        ),
        f"cli-{unique}",
    )
    assert response.error is None, response.error
    return response


async def test_playbook_show_search_export_history_and_rollback(
    transport: PulsarTransport, tmp_path: Path, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = ["--collection", "games", "--workspace", f"cli-{unique}", "--flow", "f1"]
    async with playbook_service(transport, tmp_path, unique) as service:
        first = await apply(
            service,
            unique,
            Delta(
                delta_id="d1",
                source="trajectory:t1",
                operations=[
                    add("Re-read every rule of the game before moving", "Rules"),
                    add("Answer in the exact output format asked for", "Format"),
                    add("Count the pieces on the board twice", "Rules", memory_type="procedural"),
                ],
            ),
        )
        rules, form, count = (c.bullet_id for c in first.changes)
        await apply(
            service,
            unique,
            Delta(
                delta_id="d2",
                source="feedback:s1",
                operations=[
                    DeltaOperation(type="TAG", bullet_id=rules, helpful=5),
                    DeltaOperation(type="TAG", bullet_id=form, harmful=1, helpful=3),
                ],
            ),
        )
        await apply(
            service,
            unique,
            Delta(
                delta_id="d3",
                source="cli",
                operations=[DeltaOperation(type="REMOVE", bullet_id=count)],
            ),
        )
        await apply(  # another context scope: never shown in the shared one
            service,
            unique,
            Delta(delta_id="c1", operations=[add("Castle early in chess", "Openings")]),
            scope="chess",
        )

        code, out, err = await run_playbook(transport, "show", *where)
        assert code == 0, err
        assert out == (
            "## Format\n"
            f"- [{form}] Answer in the exact output format asked for"
            " (helpful=3, harmful=1, confidence=0.79)\n"  # seed 002: 3/4 + 4 * 0.01
            "\n"
            "## Rules\n"
            f"- [{rules}] Re-read every rule of the game before moving"
            " (helpful=5, harmful=0, confidence=1.00)\n"
        )
        code, out, _ = await run_playbook(transport, "show", "--section", "Rules", *where)
        assert out == (
            "## Rules\n"
            f"- [{rules}] Re-read every rule of the game before moving"
            " (helpful=5, harmful=0, confidence=1.00)\n"
        )
        code, out, _ = await run_playbook(transport, "show", "--version", "1", *where)
        assert code == 0
        assert (
            f"- [{count}] Count the pieces on the board twice"
            " (helpful=0, harmful=0, confidence=0.50)" in out  # no evidence yet
        )
        assert f"[{rules}] Re-read every rule of the game before moving (helpful=0," in out
        code, out, _ = await run_playbook(transport, "show", "--context-scope", "chess", *where)
        assert out.startswith("## Openings\n- [") and "Castle early in chess" in out
        code, out, _ = await run_playbook(transport, "show", "--collection", "other", *where[2:])
        assert out == "no bullets in collection other\n"
        code, out, err = await run_playbook(transport, "show", "--version", "99", *where)
        assert code == 1 and out == ""
        assert "playbook-memory error (not-found): version 99 does not exist" in err

        clock = (await service.ask(stats_request(), f"cli-{unique}")).clock
        code, out, err = await run_playbook(
            transport, "search", "which rules of the game apply?", "-k", "1", *where
        )
        assert code == 0, err
        header, *found = out.splitlines()
        assert header.split() == [
            "ID",
            "SCORE",
            "RELEVANCE",
            "STRENGTH",
            "HELPFUL/HARMFUL",
            "SECTION",
            "CONTENT",
        ]
        [row] = [line.split(None, 6) for line in found]
        assert (row[0], row[4], row[5]) == (rules, "5/0", "Rules")
        assert float(row[1]) > 0 and 0 < float(row[2]) <= 1
        code, out, _ = await run_playbook(
            transport,
            "search",
            "exact output format",
            "--weights",
            "relevance-dominant",
            "--relevance",
            "jaccard",
            "--json",
            *where,
        )
        found_json = json.loads(out)["bullets"]
        assert found_json[0]["id"] == form and len(found_json) == 2
        assert found_json[0]["score"] >= found_json[1]["score"]
        # Searching is looking, not using: the access clock did not move.
        assert (await service.ask(stats_request(), f"cli-{unique}")).clock == clock

        code, out, _ = await run_playbook(transport, "export", *where)
        exported = json.loads(out)
        assert (exported["collection"], exported["context_scope_id"]) == ("games", "")
        assert exported["version"] == 3
        assert sorted(b["id"] for b in exported["bullets"]) == sorted([rules, form])
        assert {b["id"]: b["helpful"] for b in exported["bullets"]} == {rules: 5, form: 3}
        code, out, _ = await run_playbook(transport, "export", "--format", "yaml", *where)
        assert yaml.safe_load(out) == exported
        code, markdown, _ = await run_playbook(transport, "export", "--format", "markdown", *where)
        assert markdown == (await run_playbook(transport, "show", *where))[1]
        # Page by page, a line per page on a terminal (stderr); the export is the same.
        monkeypatch.setattr(playbook, "PAGE", 1)
        args = build_parser().parse_args(["playbook", "export", *where])
        paged, terminal = io.StringIO(), Terminal()
        assert await playbook.execute(transport, args, out=paged, err=terminal) == 0
        assert json.loads(paged.getvalue()) == exported
        assert [line.split("\r\x1b[K")[-1] for line in terminal.getvalue().splitlines()] == [
            "export: 1 bullet fetched, more to come",
            "export: 2 bullets fetched, all",
        ]

        code, out, _ = await run_playbook(transport, "history", *where)
        assert out.splitlines()[0].split() == ["VERSION", "APPLIED", "DELTA", "SOURCE", "CHANGES"]
        history = [line.split(None, 5) for line in out.splitlines()[1:]]
        # VERSION, date, time, DELTA, SOURCE, CHANGES
        assert [(h[0], h[3], h[4]) for h in history] == [
            ("3", "d3", "cli"),
            ("2", "d2", "feedback:s1"),
            ("1", "d1", "trajectory:t1"),
        ]
        assert [h[5] for h in history] == ["removed 1", "tagged 2", "added 3"]
        code, out, _ = await run_playbook(transport, "history", "--limit", "1", *where)
        assert len(out.splitlines()) == 2 and out.splitlines()[1].startswith("3 ")

        code, out, err = await run_playbook(transport, "rollback", "1", "--yes", *where)
        assert (code, out) == (0, "rolled collection games back to version 1: now version 4\n")
        code, now, _ = await run_playbook(transport, "show", *where)
        assert now == (await run_playbook(transport, "show", "--version", "1", *where))[1]
        code, out, _ = await run_playbook(transport, "history", "--limit", "1", *where)
        assert out.splitlines()[1].split(None, 5)[4] == "rollback"


def stats_request() -> PlaybookRequest:
    return PlaybookRequest(operation="stats", collection="games")


async def test_playbook_as_a_user_grant_revoke_and_purge(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    where = ["--collection", "games", "--workspace", f"cli-{unique}", "--flow", "f1"]
    async with playbook_service(transport, tmp_path, unique) as service:
        lesson = "Castle before the twelfth move"
        done = await service.ask(
            PlaybookRequest(
                operation="apply-delta",
                collection="games",
                user="alice",
                delta=Delta(delta_id="a1", operations=[add(lesson, "Rules")]),
            ),
            f"cli-{unique}",
        )
        assert done.error is None, done.error

        async def seen_by(user: str) -> bool:
            code, out, err = await run_playbook(transport, "show", "--user", user, *where)
            assert code == 0, err
            return lesson in out

        assert await seen_by("alice") and not await seen_by("bob") and not await seen_by("")
        code, _, err = await run_playbook(
            transport, "grant", "bob", "--user", "bob", "--owner", "alice", *where
        )
        assert code == 1 and "not-found" in err  # bob cannot even see alice's playbook
        assert (await run_playbook(transport, "grant", "bob", "--user", "alice", *where))[0] == 0
        assert await seen_by("bob") and not await seen_by("carol")
        assert (await run_playbook(transport, "revoke", "bob", "--user", "alice", *where))[0] == 0
        assert not await seen_by("bob")
        code, out, _ = await run_playbook(transport, "purge", "--user", "alice", *where)
        assert code == 1 and "--yes" in out
        code, out, err = await run_playbook(transport, "purge", "--user", "alice", "--yes", *where)
        assert code == 0 and "bullets 1" in out, err
        assert not await seen_by("alice")
