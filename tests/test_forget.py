"""Forgetting a user (issue 13): a canary told to the agent by alice reaches every kind of
memory (facts, conversation turns and summary, episode, learner ledger with its
trajectories, the playbook's reflections); ``forget`` over
the real broker removes it from every store and every file under the stack's directories,
while bob's canary stays. Real broker, services, qdrant-edge and embedder; scripted LLM."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from memory_services import dedup_guard
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.commands.common import ServiceQueues
from react_mem.commands.forget import LEARNER, Report, forget_user
from react_mem.commands.progress import StatusLine
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import Stack, agent_stack, facts_of, forget_queues
from tests.support.kinds import INSTALLED
from tests.support.memory_services import until

pytestmark = pytest.mark.broker

CANARY = {"alice": "quokkacanaryalice", "bob": "quokkacanarybob"}
STEPS = 2  # tool calls per invocation, so the learner records an episode


def _user(text: str) -> str:
    return next((u for u, c in CANARY.items() if c in text), "nobody")


def llm(request: TextCompletionRequest) -> str:
    """Agent: two tool steps, then an answer quoting the canary. Learner: a fact and a
    summary quoting it."""
    canary = CANARY.get(_user(request.prompt), "")
    if request.system.startswith("You are a helpful agent"):
        if request.prompt.count("Observation:") < STEPS:
            return (
                f'Thought: look it up\nAction: knowledge\nAction Input: {{"question": "{canary}"}}'
            )
        return f"Thought: done\nFinal Answer: Noted your code word {canary}."
    if "curate the long-term memory" in request.system:
        return json.dumps({"facts": [{"content": f"The user's code word is {canary}."}]})
    if "running summary" in request.system:
        return json.dumps({"summary": f"The user shared the code word {canary}."})
    return json.dumps({"lessons": []})


TOOLS = {
    "knowledge": {
        "type": "knowledge-query",
        "name": "knowledge",
        "description": "Ask the knowledge graph",
        "arguments": [{"name": "question", "type": "string", "description": "q"}],
    }
}


def files_with(root: Path, text: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``text``."""
    needle = text.encode()
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_forgetting_a_user_leaves_no_byte_of_their_canary(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=llm,
        learner=True,
        tools=TOOLS,
        playbook=PlaybookMemoryProcessor,
    ) as stack:
        for user in CANARY:
            question = f"Please remember that my code word is {CANARY[user]}."
            answer = await stack.ask(question, conversation_id=f"c-{user}", user=user)
            assert CANARY[user] in answer[-1].content
        for user in CANARY:
            await until(lambda u=user: _learned(stack, u), timeout=60)  # type: ignore[misc]
        learner_dir = tmp_path / f"learner-{unique}"
        await until(lambda: _in_files(tmp_path, CANARY["alice"]), timeout=30)
        before = files_with(tmp_path, CANARY["alice"])

        to = {
            name: _queues(stack, name)
            for name in ("fact-memory", "episode-memory", "conversation-memory", "playbook-memory")
        }
        to[LEARNER] = forget_queues(unique)
        terminal = Terminal()
        progress = StatusLine(terminal, "forget")
        reports = await forget_user(
            stack.transport, to, kinds=INSTALLED, user="alice", timeout=120, progress=progress
        )
        # The services run in this process: the merge guard kept no reading of any text.
        assert dedup_guard.readings() == 0
        lines = [line.split() for line in terminal.getvalue().splitlines()]
        assert [words[1] for words in lines] == [f"{n}/5" for n in range(1, 6)]  # as they answer
        assert sorted(words[2] for words in lines) == sorted(to)
        by = {r.service: r for r in reports}

        assert await facts_of(stack, "alice") == []
        assert any(CANARY["bob"] in f for f in await facts_of(stack, "bob"))
        after_alice = files_with(tmp_path, CANARY["alice"])
        after_bob = files_with(tmp_path, CANARY["bob"])

    print("alice's canary before the forget:", before)
    assert {"fact-memory", "episode-memory", "conversation-memory"} <= {
        name.split("/")[0].removesuffix(f"-{unique}") for name in before
    }
    # The learner's ledger keeps its texts encrypted: no file of it ever held the canary.
    assert not any(name.startswith(learner_dir.name) for name in before)
    for name in ("fact-memory", "episode-memory", "conversation-memory", "playbook-memory"):
        assert by[name].status == "forgotten", by[name]
    assert by[LEARNER].status == "forgotten", by[LEARNER]
    assert _removed(by["fact-memory"], "facts") >= 1
    assert _removed(by["episode-memory"], "episodes") >= 1
    assert _removed(by["conversation-memory"], "conversations") == 1
    assert _removed(by["conversation-memory"], "turns") >= 1
    assert _removed(by[LEARNER], "ledger-ledger") >= 1
    assert _removed(by[LEARNER], "ledger-trajectories") >= 1
    assert by["dead-letters"].status == "not reached"
    assert after_alice == []
    # bob's memory stays, on disk and in every store.
    assert {"fact-memory", "episode-memory", "conversation-memory"} <= {
        name.split("/")[0].removesuffix(f"-{unique}") for name in after_bob
    }


def _removed(report: Report, kind: str) -> int:
    assert report.forgotten is not None, report
    return report.forgotten.records.get(kind, 0)


def _queues(stack: Stack, name: str) -> ServiceQueues:
    return ServiceQueues(stack.topics[name]["request"], stack.topics[name]["response"])


async def _learned(stack: Stack, user: str) -> bool:
    return any(CANARY[user] in f for f in await facts_of(stack, user))


async def _in_files(root: Path, text: str) -> bool:
    return bool(files_with(root, text))
