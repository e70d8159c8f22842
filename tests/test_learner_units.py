"""The learner's parsing, filtering, fallbacks and ledger, without a bus."""

from __future__ import annotations

from pathlib import Path

from react_mem.learner.extract import FactReply, SummaryReply, clip, keep_facts
from react_mem.learner.ledger import Ledger
from react_mem.learner.llm import first_json, parse
from react_mem.learner.records import fallback_merge, is_task, score
from react_mem.schema import AgentStep
from react_mem.schema.trajectory import Trajectory


def test_json_is_found_inside_chatter_and_code_fences() -> None:
    text = 'Here you go:\n```json\n{"summary": "Bob likes tea."}\n```\nAnything else?'
    found = parse(text, SummaryReply)
    assert found is not None and found.summary == "Bob likes tea."
    assert first_json("{broken [1, 2] tail") == [1, 2]
    assert first_json("no json at all") is None
    assert parse('{"summary": 3}', SummaryReply) is None  # wrong type: not coerced
    assert parse('{"facts": "Maria"}', FactReply) is None


def test_facts_that_restate_the_question_or_describe_the_exchange_are_dropped() -> None:
    items = [
        "The capital of France is Paris.",
        "What is the capital of France?",
        "The capital of France is",  # adds nothing to the question
        "The user asked about the capital of France.",
        "The user wants to visit Paris in May.",  # a preference: kept
        {"content": "Paris  is the capital   of France.", "importance": 7},  # a duplicate
        {"content": "Lyon is the third-largest city of France.", "importance": 7},
        {"text": "wrong key"},
        42,
        "Too short",
    ]
    kept = keep_facts(items, questions=["What is the capital of France?"], limit=10, max_chars=200)
    assert [f.content for f in kept] == [
        "The capital of France is Paris.",
        "The user wants to visit Paris in May.",
        "Lyon is the third-largest city of France.",
    ]
    assert kept[2].importance == 1.0  # clamped into 0..1
    assert len(keep_facts(items, questions=[], limit=1, max_chars=200)) == 1


def test_the_fallback_summary_stays_bounded_and_keeps_the_latest_turn() -> None:
    summary = ""
    for n in range(50):
        summary = fallback_merge(summary, f"User asked: question {n}. Result: answer {n}", 300)
        assert len(summary) <= 300
    assert summary.endswith("answer 49") and "question 0." not in summary
    assert clip("one two three four", 10) == "one two…"


def test_what_counts_as_a_task_and_how_it_scores() -> None:
    tool = AgentStep(action="search", observation="found")
    assert is_task(Trajectory(question="q", steps=[tool]), min_steps=2)
    assert not is_task(Trajectory(question="q", steps=[AgentStep(thought="t")]), min_steps=2)
    assert is_task(Trajectory(question="q", outcome="failure"), min_steps=2)
    assert score(Trajectory(outcome="partial", tool_errors=2)) == 0.3
    assert score(Trajectory(outcome="success", tool_errors=20)) == 0.0


async def test_the_ledger_survives_a_reopen_and_prunes_old_records(tmp_path: Path) -> None:
    now = [1000.0]
    path = tmp_path / "ledger" / "learner.sqlite3"
    ledger = Ledger(path, retention=100, clock=lambda: now[0])
    await ledger.open()
    await ledger.save_plan("ws", "trajectory:a", {"summary": "s"})
    await ledger.mark_steps("ws", "trajectory:a", ["summary"])
    await ledger.save_plan("ws", "trajectory:b", {})
    await ledger.mark_done("ws", "trajectory:b")
    assert await ledger.get("other-ws", "trajectory:a") is None
    await ledger.close()

    reopened = Ledger(path, retention=100, clock=lambda: now[0])
    await reopened.open()
    entry = await reopened.get("ws", "trajectory:a")
    assert entry is not None and entry.plan == {"summary": "s"} and entry.steps == ["summary"]
    assert not entry.done
    done = await reopened.get("ws", "trajectory:b")
    assert done is not None and done.done
    await reopened.close()

    now[0] += 101
    pruned = Ledger(path, retention=100, clock=lambda: now[0])
    await pruned.open()
    assert await pruned.get("ws", "trajectory:a") is None
    await pruned.close()
