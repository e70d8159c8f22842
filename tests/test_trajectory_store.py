"""The trajectory store: episode-memory records each trajectory the learner plans as an
episode, with its task type, parent session, success score, cost and the playbook bullets
shown and used; ``react-mem trajectories list|show`` query them by owner, task type,
outcome and time, and ``reflect`` finds lessons across at least five of them and, with
``--apply``, curates them into the owner's playbook exactly once."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.cli import build_parser
from react_mem.clients.base import owner
from react_mem.commands import memory_command, trajectories
from react_mem.commands.common import ServiceQueues
from react_mem.learner.batch import TooFew, batch_lessons
from react_mem.learner.planner import Limits, Planner
from react_mem.schema import AgentStep
from react_mem.schema.agent import MemoryRef
from react_mem.schema.episodes import Episode, EpisodeResponse
from react_mem.schema.playbook import PlaybookRequest, PlaybookResponse
from react_mem.schema.scope import Scope
from react_mem.schema.trajectory import Trajectory
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import START, MovableClock, serving

pytestmark = pytest.mark.broker

BULLETS = [MemoryRef(kind="bullet", id=f"b{n}", content=f"Strategy number {n}.") for n in (1, 2)]


def trajectory(n: int, tool: str, right: bool, **fields: Any) -> Trajectory:
    """A unit conversion by ``tool``; the answer is right or misses the ground truth."""
    values: dict[str, Any] = {
        "trajectory_id": f"s{n}",
        "session_id": f"s{n}",
        "question": f"How many kilometres is {20 + n} miles for Ada's marathon?",
        "answer": "42.2" if right else "13.1",
        "ground_truth": "42.2",
        "steps": [AgentStep(thought="t", action=tool, observation="42.2" if right else "13.1")],
        "task_type": "conversion",
        "parent_session_id": "plan-7",
        "memory_used": BULLETS,
        "bullets_used": ["b1"],
        "in_tokens": 300,
        "out_tokens": 20,
        "duration_seconds": 1.5,
        "extract_facts": False,
    }
    return Trajectory(**(values | fields))


async def record(service: Any, workspace: str, t: Trajectory, user: str | None) -> str:
    """The learner's planner makes the episode; stored as the learner's writer does."""
    plan = await Planner(None, Limits()).for_trajectory(t, None)
    assert plan.episode is not None
    request = plan.episode.model_copy(update=owner(Scope(workspace, "default", user)))
    reply: EpisodeResponse = await service.ask(request, workspace)
    assert reply.error is None and reply.id
    return reply.id


def queues(service: str, workspace: str) -> dict[str, str]:
    """The stack's queue names, as the command line finds them."""
    at = ServiceQueues.of(service, workspace, "f1")
    return {"request": at.request, "response": at.response}


@contextlib.asynccontextmanager
async def stack(
    transport: PulsarTransport, tmp_path: Path, workspace: str, clock: MovableClock
) -> AsyncIterator[tuple[Any, Any]]:
    registry = CollectorRegistry()
    common: dict[str, Any] = {
        "registry": registry,
        "clock": clock,
        "embedder": HashingEmbedder(),
        "metrics": False,
    }
    async with (
        serving(
            EpisodeMemoryProcessor,
            EpisodeResponse,
            transport,
            pid=f"episodes-{workspace}",
            queues={workspace: queues("episode-memory", workspace)},
            data_dir=tmp_path / "episodes",
            **common,
        ) as episodes,
        serving(
            PlaybookMemoryProcessor,
            PlaybookResponse,
            transport,
            pid=f"playbook-{workspace}",
            queues={workspace: queues("playbook-memory", workspace)},
            data_dir=tmp_path / "playbook",
            seed_bullets="none",  # the test counts the owner's bullets
            **common,
        ) as playbook,
    ):
        yield episodes, playbook


async def cli(transport: PulsarTransport, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["trajectories", *argv])
    out, err = io.StringIO(), io.StringIO()
    if args.action == "reflect":
        code = await trajectories.reflect(transport, args, out=out, err=err)
    else:
        code = await memory_command.execute(transport, args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def test_trajectories_are_kept_queried_and_reflected_on_per_owner(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    ws = f"cli-{unique}"
    where = ["--workspace", ws, "--flow", "f1"]
    clock = MovableClock()
    async with stack(transport, tmp_path, ws, clock) as (episodes, playbook):
        ids = []
        for n in range(4):  # the first hour: convert-units, always right
            ids.append(await record(episodes, ws, trajectory(n, "convert-units", True), "ada"))
        clock.advance(3600)
        for n in range(4, 7):  # the next: guess-units, always wrong
            ids.append(await record(episodes, ws, trajectory(n, "guess-units", False), "ada"))
        for n in range(7, 9):  # another owner's, of the same type
            await record(episodes, ws, trajectory(n, "convert-units", True), "bob")

        code, out, err = await cli(transport, "list", "-u", "ada", "--json", *where)
        listed = [Episode.model_validate(e) for e in json.loads(out)["episodes"]]
        assert code == 0, err
        assert sorted(e.id for e in listed) == sorted(ids)  # ada's only
        first = next(e for e in listed if e.id == ids[0])
        assert (first.task_type, first.parent_session_id, first.outcome) == (
            "conversion",
            "plan-7",
            "success",
        )
        assert (first.bullets_shown, first.bullets_used) == (["b1", "b2"], ["b1"])
        assert (first.tokens, first.duration_seconds, first.score) == (320, 1.5, 1.0)

        async def listing(*extra: str) -> set[str]:
            code, out, err = await cli(transport, "list", "-u", "ada", "--json", *extra, *where)
            assert code == 0, err
            return {e["id"] for e in json.loads(out)["episodes"]}

        assert await listing("--outcome", "failure") == set(ids[4:])  # judged by ground truth
        assert await listing("--since", str(START + 1800)) == set(ids[4:])
        assert await listing("--until", str(START + 1800)) == set(ids[:4])
        assert await listing("--task-type", "conversion", "--outcome", "success") == set(ids[:4])
        assert await listing("--task-type", "booking") == set()
        code, out, _ = await cli(
            transport, "list", "-u", "ada", "--task-type", "conversion", *where
        )
        assert out.splitlines()[0].split()[:4] == ["ID", "STORED", "TASK", "TYPE"]
        assert len(out.splitlines()) == 1 + 7

        code, out, err = await cli(transport, "show", ids[4], "-u", "ada", *where)
        assert code == 0, err
        assert "task type:      conversion" in out and "bullets used:   b1" in out
        assert "parent session: plan-7" in out and "step 1: guess-units" in out
        code, _, err = await cli(transport, "show", ids[4], "-u", "bob", *where)
        assert code == 1 and ids[4] in err  # another owner's is not found

        code, _, err = await cli(transport, "reflect", "-u", "bob", *where)
        assert code == 2 and "at least 5 trajectories, found 2" in err

        code, out, err = await cli(transport, "reflect", "-u", "ada", "--apply", *where)
        assert code == 0, err
        lessons = [line.strip() for line in out.splitlines() if line.startswith("  [")]
        assert lessons == [
            "[strategies] For conversion tasks, use convert-units: it succeeded in 4 of 4 tries.",
            "[pitfalls] For conversion tasks, avoid guess-units: it failed in 3 of 3 tries.",
        ]
        assert "Ada" not in out and "marathon" not in out  # labels and counts only
        assert "curated into the playbook (version" in out
        code, out, _ = await cli(transport, "reflect", "-u", "ada", "--apply", *where)
        assert code == 0 and "(already applied)" in out

        held: PlaybookResponse = await playbook.ask(
            PlaybookRequest(operation="list", user="ada", limit=100), ws
        )
        assert sorted(b.content for b in held.bullets) == sorted(
            x.split("] ", 1)[1] for x in lessons
        )
        assert all(b.user == "ada" for b in held.bullets)


def test_a_batch_needs_five_trajectories_and_a_tool_needs_three_attempts() -> None:
    def episode(n: int, tool: str, outcome: str, task_type: str = "t") -> Episode:
        return Episode(
            id=f"e{n}",
            goal="a goal",
            steps=[AgentStep(action=tool)],
            outcome=outcome,  # type: ignore[arg-type]
            task_type=task_type,
        )

    with pytest.raises(TooFew):
        batch_lessons([episode(n, "a", "success") for n in range(4)])
    mixed = [episode(n, "a", "success" if n % 2 else "failure") for n in range(6)]
    assert batch_lessons(mixed) == []  # half and half: no pattern either way
    two = [episode(n, "b", "success") for n in range(2)]
    assert batch_lessons(mixed[:3] + two) == []  # b: too few attempts to say
    many = [episode(n, "c", "success", "lookup") for n in range(3)]
    [lesson] = batch_lessons(mixed + many)
    assert lesson.content == "For lookup tasks, use c: it succeeded in 3 of 3 tries."
    assert lesson.type == "success" and "batch" in lesson.tags
