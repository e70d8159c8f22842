"""The ReAct reply parser and its streaming counterpart, without the bus."""

from __future__ import annotations

import json
import random

import pytest

from react_mem.agent.json_reply import ANSWER, parse_json_reply
from react_mem.agent.parse import CORRECTION, Action, Final, ParseError, parse_reply
from react_mem.agent.streaming import Chunk, StreamingReplyParser

CODE_ANSWER = """\
Here is the function:

```python
def f(x):
    if x:
        return {"a": [1, 2]}
    return None
```

  - indented bullet
Done."""

JSON_ANSWER = '{\n  "name": "x",\n  "items": [\n    1,\n    2\n  ]\n}'


def arguments(reply: str) -> dict[str, str]:
    parsed = parse_reply(reply)
    assert isinstance(parsed, Action)
    return parsed.arguments


def answer_of(reply: str) -> str:
    parsed = parse_reply(reply)
    assert isinstance(parsed, Final)
    return parsed.answer


# -- actions --------------------------------------------------------------------------------


def test_action_with_args_on_the_same_line() -> None:
    reply = 'Thought: I should search\nAction: search\nArgs: {"query": "cats", "limit": 3}'
    assert parse_reply(reply) == Action(
        "I should search", "search", {"query": "cats", "limit": "3"}
    )


def test_args_on_following_lines_with_nesting_and_braces_in_strings() -> None:
    reply = """Thought: t
Action: mcp-tool
Args:
{
  "query": "a } tricky { string \\" }",
  "filter": {"tags": ["x", "y"], "deep": {"n": null, "ok": true}}
}
Some trailing chatter"""
    action = parse_reply(reply)
    assert isinstance(action, Action)
    assert action.arguments["query"] == 'a } tricky { string " }'
    assert json.loads(action.arguments["filter"]) == {
        "tags": ["x", "y"],
        "deep": {"n": None, "ok": True},
    }


@pytest.mark.parametrize(
    "args",
    [
        '```json\n{"query": "q"}\n```',
        '\n```json\n{"query": "q"}\n```\n',
        '```{"query": "q"}```',
        '\n\n   {"query":\n "q"}',
    ],
)
def test_args_in_json_fences_or_after_blank_lines(args: str) -> None:
    assert arguments(f"Thought: t\nAction: search\nArgs: {args}") == {"query": "q"}


def test_action_input_is_an_alias_of_args() -> None:
    reply = 'Thought: t\nAction: search\nAction Input: {"query": "q"}'
    assert parse_reply(reply) == Action("t", "search", {"query": "q"})


def test_action_without_args_has_no_arguments() -> None:
    assert parse_reply("Thought: t\nAction: clock") == Action("t", "clock", {})
    assert parse_reply("Thought: t\nAction: clock\nArgs:") == Action("t", "clock", {})
    assert parse_reply("Thought: t\nAction: clock\nObservation: 12:00") == Action("t", "clock", {})


@pytest.mark.parametrize("name", ['"search"', "`search`", "'search'", "**search**", "  search  "])
def test_action_name_loses_quotes_and_backticks(name: str) -> None:
    assert parse_reply(f"Thought: t\nAction: {name}\nArgs: {{}}") == Action("t", "search", {})


def test_argument_values_are_strings_json_for_the_rest() -> None:
    reply = 'Action: t\nArgs: {"s": "text", "n": 2.5, "b": false, "z": null, "l": ["é"]}'
    assert arguments(reply) == {
        "s": "text",
        "n": "2.5",
        "b": "false",
        "z": "null",
        "l": '["é"]',
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("what is the capital of France", "must be a JSON object"),
        ('"just a string"', "must be a JSON object"),
        ("[1, 2]", "must be a JSON object"),
        ("{'query': 'python dict'}", "not valid JSON"),
        ('{"query": "unterminated"', "not valid JSON"),
    ],
)
def test_args_that_are_not_a_json_object_are_an_error(args: str, says: str) -> None:
    with pytest.raises(ParseError, match=says) as info:
        parse_reply(f"Thought: t\nAction: search\nArgs: {args}")
    assert "search" in str(info.value)


def test_action_naming_no_tool_is_an_error() -> None:
    with pytest.raises(ParseError, match="names no tool"):
        parse_reply('Thought: t\nAction:\nArgs: {"a": "b"}')


def test_hallucinated_observation_and_later_steps_are_ignored() -> None:
    reply = """Thought: look it up
Action: search
Args: {"query": "x"}
Observation: x is 42
Thought: now I know
Final Answer: 42"""
    assert parse_reply(reply) == Action("look it up", "search", {"query": "x"})


def test_observation_before_any_decision_ends_the_reply() -> None:
    with pytest.raises(ParseError, match='no "Action:" line'):
        parse_reply("Thought: t\nObservation: made up\nFinal Answer: also made up")


# -- final answers ------------------------------------------------------------------------------


def test_final_answer_on_one_line() -> None:
    assert parse_reply("Thought: easy\nFinal Answer: Paris") == Final("easy", "Paris")
    assert parse_reply("Final Answer: Paris") == Final("", "Paris")


@pytest.mark.parametrize("answer", [CODE_ANSWER, JSON_ANSWER, "line 1\n\n\n    line 4\n\tline 5"])
def test_multi_line_answers_are_kept_exactly(answer: str) -> None:
    assert answer_of(f"Thought: t\nFinal Answer: {answer}") == answer
    assert answer_of(f"Thought: t\nFinal Answer:\n\n{answer}\n\n") == answer


def test_marker_like_lines_inside_an_answer_stay_in_it() -> None:
    answer = "Steps:\nThought: is a marker elsewhere\nAction: also\nObservation: kept"
    assert answer_of(f"Thought: t\nFinal Answer: {answer}") == answer


def test_the_first_of_action_and_final_answer_wins() -> None:
    assert parse_reply("Thought: t\nFinal Answer: done\nAction: search\nArgs: {}") == Final(
        "t", "done\nAction: search\nArgs: {}"
    )
    assert parse_reply("Thought: t\nAction: search\nArgs: {}\nFinal Answer: done") == Action(
        "t", "search", {}
    )


def test_empty_final_answer_is_an_error() -> None:
    with pytest.raises(ParseError, match="empty"):
        parse_reply("Thought: t\nFinal Answer:   \n\n")


# -- markers and layout -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "thought: t\nfinal answer: A",
        "THOUGHT: t\nFINAL ANSWER: A",
        "**Thought:** t\n**Final Answer:** A",
        "**Thought**: t\n**Final Answer**: A",
        "### Thought: t\n### Final Answer: A",
        "## **Thought:** t\n\n## **Final Answer:**\nA",
        "   Thought: t\n    Final Answer: A",
        "__Thought:__ t\nFinal  Answer : A",
        "Sure, here you go.\nThought: t\nFinal Answer: A",
    ],
)
def test_markers_are_lenient(reply: str) -> None:
    assert parse_reply(reply) == Final("t", "A")


def test_bold_and_headers_on_actions_too() -> None:
    reply = '**Thought:** t\n**Action:** `search`\n**Args:**\n```json\n{"q": "x"}\n```'
    assert parse_reply(reply) == Action("t", "search", {"q": "x"})


def test_a_reply_wrapped_in_a_fence() -> None:
    assert parse_reply("```\nThought: t\nFinal Answer: A\n```") == Final("t", "A")
    assert parse_reply('```text\nThought: t\nAction: s\nArgs: {"a": 1}\n```\n') == Action(
        "t", "s", {"a": "1"}
    )
    # The answer's own code block survives; only the wrapping fence goes.
    assert parse_reply(f"```\nThought: t\nFinal Answer:\n{CODE_ANSWER}\n```") == Final(
        "t", CODE_ANSWER
    )
    assert parse_reply("```\nThought: t\nFinal Answer: x\n```python\ny\n```\n```") == Final(
        "t", "x\n```python\ny\n```"
    )


def test_an_answer_ending_in_a_code_block_is_not_unwrapped() -> None:
    reply = "Thought: t\nFinal Answer: run\n```\nls\n```"
    assert answer_of(reply) == "run\n```\nls\n```"


def test_thought_keeps_its_lines_and_several_thoughts_are_joined() -> None:
    reply = "Thought: first\n  continued\n\nThought:\nThought: second\nFinal Answer: A"
    assert parse_reply(reply).thought == "first\n  continued\nsecond"


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("", "empty"),
        ("  \n\t ", "empty"),
        ("```\n```", "none of"),
        ("The answer is 42.", "none of"),
        ("Paris is the capital of France.\nIt is large.", "none of"),
        ("Thought: I am thinking\nstill thinking", 'no "Action:"'),
        ("Thought: t\nArgs: {}", 'no "Action:"'),
    ],
)
def test_replies_without_a_decision_are_errors(reply: str, says: str) -> None:
    with pytest.raises(ParseError, match=says):
        parse_reply(reply)


def test_parse_error_is_a_value_error_and_correction_restates_both_formats() -> None:
    assert issubclass(ParseError, ValueError)
    for marker in ("Thought:", "Action:", "Args:", "Final Answer:"):
        assert marker in CORRECTION


# -- streaming ----------------------------------------------------------------------------------

SAMPLES = [
    "Thought: easy\nFinal Answer: Paris",
    f"Thought: I know\nthis well\nFinal Answer:\n{CODE_ANSWER}\n",
    f"**Thought:** bold\n\n**Final Answer:** {JSON_ANSWER}   \n\n",
    "### Thought:\n  spaced out  \n### Final Answer:\n\n  A  \n  B\n",
    f"```\nThought: wrapped\nFinal Answer:\n{CODE_ANSWER}\n```",
    "```markdown\nThought: w\nFinal Answer: x\n```python\ny\n```\n``` \n\n",
    "```\nThought: w\nFinal Answer: ends `` ticks\n``",
    "Thought: run\nFinal Answer: run\n```\nls\n```",
    "Preamble text\nThought: one\nThought:\nThought: two\n  three\nFinal Answer: four",
    "Thought: t\nFinal Answer: done\nAction: search\nArgs: {}",
    'Thought: look it up\nAction: search\nArgs: {"q": "x"}\nObservation: 1\nFinal Answer: no',
    "Thought: t\n\n**Action:** `search`\n**Args:**\n```json\n{}\n```",
    "thought:*emph* t\nFINAL ANSWER:** A*",
    "Thought: Action is not a marker here\nActions: neither\nFinal Answer: Observation: kept",
    "Final Answer: no thought",
    "  __Thought__ : x\n #### Final  Answer :\tA\n\n\n",
]


def stream(parts: list[str]) -> tuple[str, str, StreamingReplyParser]:
    parser = StreamingReplyParser()
    chunks: list[Chunk] = []
    for part in parts:
        chunks += parser.feed(part)
    chunks += parser.finish()
    thought = "".join(c.text for c in chunks if c.kind == "thought")
    answer = "".join(c.text for c in chunks if c.kind == "answer")
    return thought, answer, parser


def expected(reply: str) -> tuple[str, str]:
    parsed = parse_reply(reply)
    return parsed.thought, parsed.answer if isinstance(parsed, Final) else ""


@pytest.mark.parametrize("reply", SAMPLES)
def test_streaming_matches_the_parser_split_anywhere(reply: str) -> None:
    want = expected(reply)
    for i in range(len(reply) + 1):
        for j in range(i, len(reply) + 1, 7):
            thought, answer, parser = stream([reply[:i], reply[i:j], reply[j:]])
            assert (thought, answer) == want, (i, j)
            assert parser.text == reply


@pytest.mark.parametrize("reply", SAMPLES)
def test_streaming_matches_the_parser_in_random_chunks(reply: str) -> None:
    rng = random.Random(reply)
    want = expected(reply)
    assert stream(list(reply))[:2] == want  # one character at a time
    for _ in range(50):
        parts, rest = [], reply
        while rest:
            n = rng.randint(1, 12)
            parts.append(rest[:n])
            rest = rest[n:]
        assert stream(parts)[:2] == want


def test_streaming_emits_incrementally_and_holds_back_only_maybe_markers() -> None:
    parser = StreamingReplyParser()
    assert parser.feed("Thought: I will") == [Chunk("thought", "I will")]
    assert parser.feed(" answer \n") == [Chunk("thought", " answer")]
    assert parser.feed("now\nFinal Ans") == [Chunk("thought", " \nnow")]
    assert parser.feed("wer") == []
    assert parser.feed(":") == []
    assert parser.feed(" Hello") == [Chunk("answer", "Hello")]
    assert parser.feed(" wor") == [Chunk("answer", " wor")]
    assert parser.feed("ld\nFinal Answer: not a marker") == [
        Chunk("answer", "ld\nFinal Answer: not a marker")
    ]
    assert parser.finish() == []


def test_streaming_sends_no_action_text() -> None:
    parser = StreamingReplyParser()
    out = parser.feed("Thought: use a tool\nAction: sea")
    out += parser.feed('rch\nArgs: {"query": "q"}\n')
    out += parser.finish()
    assert out == [Chunk("thought", "use a tool")]


def test_streaming_holds_a_possible_closing_fence_of_a_wrapped_reply() -> None:
    parser = StreamingReplyParser()
    assert parser.feed("```\nThought: t\nFinal Answer: code\n``") == [
        Chunk("thought", "t"),
        Chunk("answer", "code"),
    ]
    assert parser.feed("`") == []
    assert parser.feed("python\n") == [Chunk("answer", "\n```python")]
    assert parser.feed("x\n```\n```") == [Chunk("answer", "\nx\n```")]
    assert parser.finish() == []


def test_streaming_a_plain_line_is_sent_before_its_end() -> None:
    parser = StreamingReplyParser()
    parser.feed("Thought: a\n")
    assert parser.feed("The weather") == [Chunk("thought", "\nThe weather")]
    assert parser.feed("  ") == []
    assert parser.feed("is fine") == [Chunk("thought", "  is fine")]


def test_a_json_decision_may_hold_raw_newlines_in_its_strings() -> None:
    """Small models write a raw newline inside "thought"; the decision is still read."""
    reply = '{"thought": "first line\nsecond\tline", "action": "' + ANSWER + '", "answer": "Hi"}'
    decision = parse_json_reply(reply)
    assert isinstance(decision, Final) and decision.answer == "Hi"
    assert decision.thought == "first line\nsecond\tline"
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_json_reply('{"thought": "cut off')  # still refused: truncated
