"""The learner's parsing, filtering, fallbacks and ledger, without a bus."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from react_mem.errors import RequestTimeout
from react_mem.learner.explicit import about_user, explicit_facts
from react_mem.learner.extract import FactReply, SummaryReply, clip, keep_facts, merge_summary
from react_mem.learner.grounding import fact_grounded, summary_grounded, ungrounded
from react_mem.learner.ledger import TrajectoryLedger
from react_mem.learner.llm import Complete, JsonLLM, LLMUnavailable, first_json, parse
from react_mem.learner.planner import Limits, Planner
from react_mem.learner.records import (
    fallback_merge,
    heuristic_lessons,
    invocation_summary,
    is_task,
    score,
    tools_used,
    trajectory_record,
)
from react_mem.schema import AgentStep, TextCompletionRequest, TextCompletionResponse
from react_mem.schema.conversations import ConversationEnded, ConversationTurn
from react_mem.schema.trajectory import PARSE_ERROR_ACTION, Trajectory


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
    question = "What is the capital of France?"
    # What the user said earlier in the conversation grounds the facts (see the test below).
    said = [question, "Paris is lovely; I want to visit in May. Lyon: third-largest city?"]
    kept = keep_facts(items, questions=[question], said=said, limit=10, max_chars=200)
    assert [f.content for f in kept] == [
        "The capital of France is Paris.",
        "The user wants to visit Paris in May.",
        "Lyon is the third-largest city of France.",
    ]
    assert kept[2].importance == 1.0  # clamped into 0..1
    assert len(keep_facts(items, questions=[], said=said, limit=1, max_chars=200)) == 1


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
    ledger = TrajectoryLedger(path, retention=100, clock=lambda: now[0])
    await ledger.open()
    await ledger.save_plan("ws", "trajectory:a", {"summary": "s"})
    await ledger.mark_steps("ws", "trajectory:a", ["summary"])
    await ledger.save_plan("ws", "trajectory:b", {})
    await ledger.mark_done("ws", "trajectory:b")
    assert await ledger.get("other-ws", "trajectory:a") is None
    await ledger.close()

    reopened = TrajectoryLedger(path, retention=100, clock=lambda: now[0])
    await reopened.open()
    entry = await reopened.get("ws", "trajectory:a")
    assert entry is not None and entry.plan == {"summary": "s"} and entry.steps == ["summary"]
    assert not entry.done
    done = await reopened.get("ws", "trajectory:b")
    assert done is not None and done.done
    await reopened.close()

    now[0] += 101
    pruned = TrajectoryLedger(path, retention=100, clock=lambda: now[0])
    await pruned.open()
    assert await pruned.get("ws", "trajectory:a") is None
    await pruned.close()


# -- explicit "remember ..." requests ---------------------------------------------------
@pytest.mark.parametrize(
    ("said", "facts"),
    [
        (
            "Hi, I'm Ada. Please remember that I am allergic to peanuts.",
            ["The user's name is Ada.", "The user is allergic to peanuts."],
        ),
        ("remember that my dog is called Rex", ["The user's dog is called Rex."]),
        ("Please remember I like tea.", ["The user likes tea."]),
        ("PLEASE REMEMBER THAT I WATCH FILMS", ["The user watches FILMS."]),
        ("Don\u2019t forget that I\u2019m vegan!", ["The user is vegan."]),
        ("Do not forget that I was born in 1990.", ["The user was born in 1990."]),
        ("Note that my wife and I live in Leeds.", ["The user's wife and the user live in Leeds."]),
        ("Keep in mind that I've been to Japan twice.", ["The user has been to Japan twice."]),
        ("Bear in mind that I have two cats.", ["The user has two cats."]),
        ("Could you please remember that I study French?", ["The user studies French."]),
        ("Remember, I really love jazz.", ["The user really loves jazz."]),
        ("Please note: I don't drink coffee.", ["The user doesn't drink coffee."]),
        ("Remember this: I do not eat meat", ["The user does not eat meat."]),
        ("Remember that I'd like window seats, please.", ["The user would like window seats."]),
        ("Remember that I'd moved twice by then.", ["The user had moved twice by then."]),
        ("Remember that I'll be in Paris in May.", ["The user will be in Paris in May."]),
        ("Remember that the red bike is mine.", ["The red bike is the user's."]),
        ("Remember that I taught myself German.", ["The user taught themselves German."]),
        ("Oh, and remember that my boss called me.", ["The user's boss called the user."]),
        ("Please remember my birthday is on May 3.", ["The user's birthday is on May 3."]),
        ("Remember that the wifi password is hunter2.", ["The wifi password is hunter2."]),
        ("Remember that it is my birthday on Friday.", ["It is the user's birthday on Friday."]),
        (
            "Remember that I'm vegan and don't forget that I go swimming on Mondays.",
            ["The user is vegan.", "The user goes swimming on Mondays."],
        ),
        (
            "Remember that I'm vegan and I hate mushrooms.",
            ["The user is vegan and the user hates mushrooms."],
        ),
        (
            "Please remember that I, for one, prefer aisle seats.",
            ["The user said: I, for one, prefer aisle seats."],
        ),
        ("Please remember that my doctor is Dr. Smith.", ["The user's doctor is Dr. Smith."]),
        ("My name is Ada Lovelace.", ["The user's name is Ada Lovelace."]),
        (
            "call me Zoë, and remember that I hate rain",
            ["The user's name is Zoë.", "The user hates rain."],
        ),
        ("Please remember that I am Ada.", ["The user's name is Ada."]),
        ("I'm Ada. Remember that my name is Ada.", ["The user's name is Ada."]),
    ],
)
def test_explicit_requests_to_remember_become_facts_about_the_user(
    said: str, facts: list[str]
) -> None:
    assert explicit_facts([said]) == facts


@pytest.mark.parametrize(
    "said",
    [
        "Do you remember the film?",
        "I can't remember.",
        "I remember that I was late.",
        "Remember when we went to Paris?",
        "Remember when we went to Paris.",
        "Remember to buy milk.",
        "Remember me?",
        "Will you remember my birthday?",
        "Can you remember that?",
        "Remember the Alamo.",
        "Note the time.",
        "Did you note that I like tea?",
        "The notes say to remember that it rained.",
        "I'm allergic to peanuts.",
        "I'm Allergic to peanuts.",
        "I am English.",
        "I'm John's dad.",
        "my name is not important",
        "",
    ],
)
def test_what_is_not_an_explicit_request(said: str) -> None:
    assert explicit_facts([said]) == []


def test_explicit_facts_are_distinct_bounded_and_in_order() -> None:
    said = ["I'm Ada.", "Please remember that I like tea.", "Remember: I LIKE TEA"]
    assert explicit_facts(said) == ["The user's name is Ada.", "The user likes tea."]
    assert explicit_facts(said, limit=1) == ["The user's name is Ada."]
    long = "Please remember that I like " + "very " * 100 + "hot tea."
    assert explicit_facts([long], max_chars=400) == []


@pytest.mark.parametrize(
    ("said", "about"),
    [
        ("I fix bikes", "The user fixes bikes."),
        ("I carry a spare key", "The user carries a spare key."),
        ("I play chess", "The user plays chess."),
        ("I went to Rome", "The user went to Rome."),
        ("I can't swim", "The user can't swim."),
        ("I haven't seen Dune", "The user hasn't seen Dune."),
        ("I never eat after eight", "The user never eats after eight."),
        ("my brother is taller than I", "The user's brother is taller than the user."),
        ("I and my wife cook", "The user said: I and my wife cook."),
        ("Bob and I are friends", "Bob and the user are friends."),
        ("use the tool, i.e. the calculator", "Use the tool, i.e. the calculator."),
    ],
)
def test_the_third_person_rewrite(said: str, about: str) -> None:
    assert about_user(said) == about


def _complete(facts: list[str] | None) -> Complete:
    """A text-completion stand-in: ``facts`` for the fact question, nonsense for the rest;
    ``None``: the service is down."""

    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        if facts is None:
            raise RequestTimeout("no answer")
        if "facts" in (request.schema_ or {}).get("properties", {}):
            return TextCompletionResponse(response=json.dumps({"facts": facts}))
        return TextCompletionResponse(response="no json here")

    return complete


ADA = "Hi, I'm Ada. Please remember that I am allergic to peanuts."


async def test_explicit_facts_are_in_every_plan_and_not_repeated_by_the_llm() -> None:
    t = Trajectory(trajectory_id="s", conversation_id="c", question=ADA)
    llm = JsonLLM(
        _complete(
            ["the user is allergic to  peanuts", "Ada has a peanut allergy.", "Ada lives in Leeds."]
        )
    )
    plan = await Planner(llm, Limits()).for_trajectory(t, None)
    assert [(f.content, f.importance, f.metadata["extracted-by"]) for f in plan.facts] == [
        ("The user's name is Ada.", 0.8, "explicit-request"),
        ("The user is allergic to peanuts.", 0.8, "explicit-request"),
        ("Ada has a peanut allergy.", None, "llm"),
    ]
    assert plan.ungrounded == {"fact": 1}  # Leeds was never said
    assert {f.source_conversation for f in plan.facts} == {"c"}
    assert {f.context for f in plan.facts} == {ADA}  # the words it was learned from

    # Junk from the LLM, no LLM at all: the explicit facts still.
    for planner in (Planner(JsonLLM(_complete([])), Limits()), Planner(None, Limits())):
        plan = await planner.for_trajectory(t, "earlier")
        assert [f.content for f in plan.facts] == [
            "The user's name is Ada.",
            "The user is allergic to peanuts.",
        ]
    with pytest.raises(LLMUnavailable):  # the service is down: retried later (service.py)
        await Planner(JsonLLM(_complete(None), attempts=1), Limits()).for_trajectory(t, "")

    quiet = t.model_copy(update={"extract_facts": False})
    assert (await Planner(None, Limits()).for_trajectory(quiet, None)).facts == []


async def test_a_conversation_end_keeps_each_turns_explicit_requests() -> None:
    event = ConversationEnded(
        conversation_id="c",
        event_id="e",
        turns=[
            ConversationTurn(query=ADA),
            ConversationTurn(query="What should I eat?"),
            ConversationTurn(query="Don't forget that I am allergic to peanuts!"),
        ],
    )
    plan = await Planner(None, Limits()).for_conversation(event, facts=True, episode=False)
    assert [f.content for f in plan.facts] == [
        "The user's name is Ada.",
        "The user is allergic to peanuts.",
    ]
    assert {f.metadata["learned-from"] for f in plan.facts} == {"conversation-end"}
    plan = await Planner(None, Limits()).for_conversation(event, facts=False, episode=False)
    assert plan.facts == []


# -- the agent's malformed replies are not tools ------------------------------------------
def test_malformed_replies_are_not_counted_as_tools_or_steps() -> None:
    bad = AgentStep(action=PARSE_ERROR_ACTION, observation="Your reply could not be parsed")
    tool = AgentStep(action="search", observation="found")
    t = Trajectory(question="q?", answer="a", steps=[bad, bad, tool, bad, AgentStep()])
    summary = invocation_summary(t)
    assert PARSE_ERROR_ACTION not in summary
    assert "Agent used search in 2 steps after 3 malformed replies." in summary
    assert tools_used(t.steps) == ["search"]
    assert heuristic_lessons(t) == ["Answered with search in 2 steps."]
    assert PARSE_ERROR_ACTION not in trajectory_record(t, max_chars=2000)

    chat = Trajectory(question="q?", answer="a", steps=[bad, AgentStep(thought="t")])
    assert "Agent answered after 1 malformed reply." in invocation_summary(chat)
    assert not is_task(chat, min_steps=2)  # one real step: a chat, not a task
    assert "Agent answered directly." in invocation_summary(Trajectory(question="q?"))


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("Ada is allergic to peanuts.</summary>", "Ada is allergic to peanuts."),
        ("<summary> Ada said hello. </summary>", "Ada said hello."),
        ("Running summary so far: (none yet)", None),
        ("Latest turn: User asked: hi", None),
    ],
)
async def test_a_summary_echoing_the_prompt_or_its_tags_is_cleaned_or_refused(
    said: str, kept: str | None
) -> None:
    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        return TextCompletionResponse(response=json.dumps({"summary": said}))

    turn = "User asked: hi, I'm Ada and allergic to peanuts. Agent answered directly. Result: hello"
    assert await merge_summary(JsonLLM(complete), "", turn, max_chars=400) == kept


# -- nothing stored that was not said -------------------------------------------------------
def test_a_fact_whose_key_terms_the_user_never_said_is_dropped_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said = [ADA]
    dropped: Counter[str] = Counter()
    items = [
        "The user is a Rust developer.",  # never said
        "Ada has a peanut allergy.",  # said in other forms: peanuts, allergic
        "Ada is allergic to tree nuts.",  # "tree nuts" never said
    ]
    with caplog.at_level(logging.INFO, logger="react_mem.learner.extract"):
        kept = keep_facts(items, questions=said, limit=5, max_chars=200, dropped=dropped)
    assert [f.content for f in kept] == ["Ada has a peanut allergy."]
    assert dropped == Counter({"fact": 2})
    assert "dropped 2 fact(s)" in caplog.text and "Rust" not in caplog.text


def test_grounding_matches_word_forms_not_lookalikes() -> None:
    said = ["I'm allergic to peanuts and I develop apps in Go."]
    assert fact_grounded("The user's name is Ada.", ["I'm Ada"])
    assert fact_grounded("The user has peanut allergies.", said)
    assert ungrounded("The user is an approved developer of apps.", said) == ["approved"]
    assert not fact_grounded("The user.", said)  # no key term at all
    assert summary_grounded("Ada asked the agent to remember her peanut allergy.", [ADA])
    assert not summary_grounded("Your request has been approved and processed.", [ADA])


async def test_an_invented_summary_is_refused_and_the_fallback_used() -> None:
    invented = "Your request has been approved. Thank you for choosing our bank."
    t = Trajectory(trajectory_id="s", conversation_id="c", question=ADA, answer="Noted, Ada.")
    llm = JsonLLM(_complete_summary(invented))
    dropped: Counter[str] = Counter()
    turn = invocation_summary(t)
    assert await merge_summary(llm, "", turn, max_chars=400, dropped=dropped) is None
    assert dropped == Counter({"summary": 1})
    plan = await Planner(JsonLLM(_complete_summary(invented)), Limits()).for_trajectory(t, "")
    assert plan.summary == fallback_merge("", turn, Limits().summary_chars)
    assert plan.ungrounded["summary"] == 1


def _complete_summary(summary: str) -> Complete:
    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        reply: dict[str, object] = {"summary": summary} if "summary" in request.system else {"facts": []}
        return TextCompletionResponse(response=json.dumps(reply))

    return complete


async def test_tool_results_ground_facts_the_agents_own_reply_does_not() -> None:
    looked_up = AgentStep(action="lookup", observation="Maria has lived in Lisbon since 2019.")
    failed = AgentStep(action="lookup", observation="Porto is down.", step_type="tool-error")
    t = Trajectory(
        trajectory_id="s",
        question="Where does my sister Maria live?",
        answer="Maria lives in Lisbon, near Porto, in a big house.",
        steps=[looked_up, failed],
    )
    facts = ["Maria lives in Lisbon.", "Maria lives near Porto.", "Maria has a big house."]
    plan = await Planner(JsonLLM(_complete(facts)), Limits()).for_trajectory(t, None)
    assert [f.content for f in plan.facts] == ["Maria lives in Lisbon."]
    assert plan.ungrounded == {"fact": 2}


async def test_a_malformed_reply_is_logged_without_the_words_it_echoes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def echo(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        return TextCompletionResponse(response='{"summary": "User asked: ' + ADA + "\n</r")

    with caplog.at_level(logging.DEBUG):
        assert await JsonLLM(echo).ask("s", ADA, SummaryReply) is None
    assert "malformed reply" in caplog.text and "peanuts" not in caplog.text


async def test_a_forget_waits_out_the_users_learning_under_way() -> None:
    """What the learner is learning from a user when a forget arrives lands first, so the
    memory services' forget (sent after the learner's) removes it too."""
    import asyncio

    from react_mem.learner.locks import InFlight

    learning = InFlight()
    release = asyncio.Event()
    order: list[str] = []

    async def learn() -> None:
        async with learning.running(("ws", "alice")):
            await release.wait()
            order.append("learned")

    task = asyncio.create_task(learn())
    await asyncio.sleep(0)
    assert await learning.idle(("ws", "bob"), 1)  # another owner's forget does not wait
    assert not await learning.idle(("ws", "alice"), 0.01)  # bounded
    waiting = asyncio.create_task(learning.idle(("ws", "alice"), 10))
    await asyncio.sleep(0)
    assert not waiting.done()
    release.set()
    assert await waiting and order == ["learned"]
    await task
