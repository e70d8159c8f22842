"""The mem0 comparison's parts that run without mem0 (``benchmarks/vs_mem0.py``): the fact
generator's known answers, and the worker's JSON-lines protocol over real pipes, with a
stand-in for ``mem0.Memory`` (mem0 itself is never installed by the tests)."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchmarks.generated_facts import CAPACITY, generate
from benchmarks.mem0_worker import serve
from benchmarks.vs_mem0 import Worker, WorkerError, sizes

ROOT = Path(__file__).resolve().parents[1]

#: A stand-in for mem0.Memory: keeps what it is given, ranks by words shared with the query.
FAKE = textwrap.dedent(
    """
    class FakeMemory:
        def __init__(self):
            self.added = []

        def add(self, messages, *, user_id, metadata, infer):
            assert infer is False, "the benchmark never asks mem0 for an LLM"
            self.added += [(user_id, m["content"], metadata) for m in messages]

        def search(self, query, *, top_k, filters):
            if query == "boom":
                raise RuntimeError("store gone")
            words = set(query.lower().split())
            mine = [a for a in self.added if a[0] == filters["user_id"]]
            mine.sort(key=lambda a: -len(words & set(a[1].lower().rstrip(".").split())))
            return {"results": [{"memory": t, "metadata": m} for _, t, m in mine[:top_k]]}
    """
)


def fake_memory() -> Any:
    scope: dict[str, Any] = {}
    exec(FAKE, scope)
    return scope["FakeMemory"]()


def test_generated_facts_are_the_same_for_the_same_seed_and_each_question_has_its_answer() -> None:
    facts, questions = generate(3000, 200)
    again, asked_again = generate(3000, 200)
    assert (facts, questions) == (again, asked_again)
    other, _ = generate(3000, 200, seed=8)
    assert [f.text for f in other] != [f.text for f in facts]
    assert len({f.text for f in facts}) == len(facts) == 3000
    assert len({q.answer for q in questions}) == len(questions) == 200
    by_key = {f.key: f.text for f in facts}
    for question in questions:
        # The question names its fact's person, e.g. "What car does Ava Okafor drive?"
        name = " ".join(by_key[question.answer].replace("'s ", " ").split()[:2])
        assert name in question.text


@pytest.mark.parametrize("whole_people", [True, False])
def test_whole_people_share_their_name_with_eleven_other_facts(whole_people: bool) -> None:
    facts, _ = generate(1200, 10, whole_people=whole_people)
    people: dict[str, int] = {}
    for fact in facts:
        name = " ".join(fact.text.replace("'s ", " ").split()[:2])
        people[name] = people.get(name, 0) + 1
    if whole_people:
        assert len(people) == 100 and set(people.values()) == {12}
    else:  # spread over 10,000 people: nearly everyone has one fact
        assert len(people) > 1000


def test_generated_facts_refuse_a_size_past_their_capacity() -> None:
    with pytest.raises(ValueError, match="count must be"):
        generate(CAPACITY + 1, 10)


def test_sizes_read_thousands() -> None:
    assert sizes("10k, 100k,2500") == [10_000, 100_000, 2_500]
    assert sizes("") == []


def test_worker_answers_each_request_line_and_reports_failures() -> None:
    memory = fake_memory()
    requests = [
        {"op": "add", "scope": "u1", "items": [{"key": "a", "text": "Ava drives a van."}]},
        {"op": "add", "scope": "u2", "items": [{"key": "b", "text": "Ava drives a van."}]},
        {"op": "search", "scope": "u1", "query": "what does ava drive", "k": 5},
        {"op": "search", "scope": "u1", "query": "boom", "k": 5},
        {"op": "nonsense"},
        {"op": "close"},
        {"op": "search", "scope": "u1", "query": "after close", "k": 5},
    ]
    out = io.StringIO()
    serve(memory, io.StringIO("\n".join(json.dumps(r) for r in requests)), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(answers) == 5  # nothing after close
    assert answers[0]["count"] == 1 and answers[0]["seconds"] >= 0
    assert answers[2]["keys"] == ["a"]  # only its own scope
    assert "store gone" in answers[3]["error"]
    assert "unknown op" in answers[4]["error"]


async def test_worker_client_drives_the_worker_process_over_pipes(tmp_path: Path) -> None:
    script = tmp_path / "fake_worker.py"
    script.write_text(
        f"import json, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks.mem0_worker import serve\n"
        f"{FAKE}\n"
        "print(json.dumps({'ready': 1}), flush=True)\n"
        "serve(FakeMemory(), sys.stdin, sys.stdout)\n"
    )
    worker = Worker([sys.executable, str(script)], {}, tmp_path / "worker.log")
    await worker.start(timeout=60)
    try:
        seconds = await worker.add(
            "u1", [("f0", "Ava Okafor drives a blue van."), ("f1", "Ben Ito keeps bees.")]
        )
        assert seconds >= 0
        keys, _ = await worker.search("u1", "which van does Ava Okafor drive", 2)
        assert keys == ["f0", "f1"]
        assert (await worker.search("u2", "Ava", 2))[0] == []
        with pytest.raises(WorkerError, match="store gone"):
            await worker.search("u1", "boom", 2)
    finally:
        await worker.close()
    assert worker.proc is not None and worker.proc.returncode == 0
