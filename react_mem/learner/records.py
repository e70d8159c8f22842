"""Deterministic text from a trajectory or a conversation: summaries, prompt records,
heuristic lessons, episode steps. The fallbacks for when the LLM gives nothing usable."""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.schema import AgentStep
from react_mem.schema.conversations import ConversationEnded, ConversationTurn
from react_mem.schema.trajectory import BASE_SCORE as BASE_SCORE
from react_mem.schema.trajectory import PARSE_ERROR_ACTION, Outcome, Trajectory, success_score
from react_mem.text import clip, render_step
from react_mem.text import one_line as _one_line


def tools_used(steps: Sequence[AgentStep]) -> list[str]:
    return list(dict.fromkeys(s.action for s in steps if s.action and not malformed(s)))


def malformed(step: AgentStep) -> bool:
    """The agent's record of a reply it could not parse, not a tool call."""
    return step.action == PARSE_ERROR_ACTION


def real_steps(steps: Sequence[AgentStep]) -> int:
    return sum(1 for s in steps if not malformed(s))


def invocation_summary(t: Trajectory, max_chars: int = 600) -> str:
    """ "User asked X, agent did Y, result was Z" in one line."""
    tools = tools_used(t.steps)
    did = f"used {', '.join(tools)} in {_steps(real_steps(t.steps))}" if tools else "answered"
    if retries := len(t.steps) - real_steps(t.steps):
        did += f" after {retries} malformed repl{'y' if retries == 1 else 'ies'}"
    elif not tools:
        did += " directly"
    result = clip(_one_line(t.answer), 240) if t.answer else "no answer"
    if t.outcome != "success":
        result += f" ({t.outcome}{': ' + clip(_one_line(t.error), 120) if t.error else ''})"
    line = f"User asked: {clip(_one_line(t.question), 200)} Agent {did}. Result: {result}"
    return clip(line, max_chars)


def fallback_merge(previous: str, turn: str, max_chars: int) -> str:
    """The previous summary plus the turn, oldest lines dropped to fit ``max_chars``."""
    lines = [*previous.splitlines(), turn]
    lines = [line for line in lines if line.strip()]
    while len(lines) > 1 and len("\n".join(lines)) > max_chars:
        lines.pop(0)
    return clip("\n".join(lines), max_chars)


def trajectory_record(t: Trajectory, *, max_chars: int, step_chars: int = 400) -> str:
    """The invocation as prompt data: question, steps, answer, outcome."""
    steps = [
        f"Step {n}: {clip(_one_line(render_step(step)), step_chars)}"
        for n, step in enumerate(t.steps, 1)
    ]
    tail = [
        f"Answer: {t.answer or '(none)'}",
        f"Outcome: {t.outcome}" + (f" ({t.error})" if t.error else ""),
    ]
    return _fit([f"Question: {t.question}"], steps, tail, max_chars)


def conversation_record(event: ConversationEnded, *, max_chars: int, turn_chars: int = 600) -> str:
    """The conversation as prompt data; the oldest turns go first when it is too long."""
    head = [f"Summary: {event.summary}"] if event.summary else []
    turns = [
        f"Turn {n}: User: {clip(_one_line(t.query), turn_chars)} | Agent: "
        + clip(_one_line(t.answer or t.summary), turn_chars)
        for n, t in enumerate(event.turns, 1)
    ]
    return _fit(head, turns, [], max_chars)


def is_task(t: Trajectory, min_steps: int) -> bool:
    """Tools were used, it took several steps, or it did not simply succeed."""
    steps = real_steps(t.steps)
    return bool(tools_used(t.steps)) or steps >= min_steps or t.outcome != "success"


def score(t: Trajectory) -> float:
    return success_score(t.outcome, t.tool_errors, t.parse_retries)


def heuristic_lessons(t: Trajectory) -> list[str]:
    tools = tools_used(t.steps)
    lessons = []
    if t.outcome == "failure":
        lessons.append(f"The task failed: {clip(_one_line(t.error or 'no answer'), 200)}.")
    if t.tool_errors:
        lessons.append(f"{t.tool_errors} tool call(s) failed; check tool names and arguments.")
    if t.outcome == "partial" and not t.tool_errors:
        lessons.append("The answer came at the iteration limit; plan fewer, surer steps.")
    if t.outcome == "success" and tools:
        lessons.append(f"Answered with {', '.join(tools)} in {_steps(real_steps(t.steps))}.")
    return lessons


def episode_steps(steps: Sequence[AgentStep], *, limit: int, chars: int) -> list[AgentStep]:
    """At most ``limit`` steps (the first and last halves), each text field clipped and
    at most ten arguments kept, so the episode stays inside the service's size limit."""
    chosen = list(steps)
    if len(chosen) > limit:
        chosen = chosen[: limit // 2] + chosen[len(chosen) - (limit - limit // 2) :]
    return [
        step.model_copy(
            update={
                "thought": clip(step.thought, chars),
                "observation": clip(step.observation, chars),
                "action": clip(step.action, 200),
                "arguments": {k: clip(v, chars) for k, v in list(step.arguments.items())[:10]},
                "plan": [],
                "subagent_results": {},
            }
        )
        for step in chosen
    ]


def turn_steps(turns: Sequence[ConversationTurn], *, limit: int, chars: int) -> list[AgentStep]:
    steps = [
        AgentStep(thought=t.query, observation=t.answer or t.summary, step_type="turn")
        for t in turns
    ]
    return episode_steps(steps, limit=limit, chars=chars)


def conversation_outcome(turns: Sequence[ConversationTurn]) -> Outcome:
    results = [t.result for t in turns if t.result is not None]
    if results and all(r == "failure" for r in results):
        return "failure"
    return "partial" if any(r != "success" for r in results) else "success"


def _steps(count: int) -> str:
    return f"{count} step" + ("" if count == 1 else "s")


def _fit(head: list[str], body: list[str], tail: list[str], max_chars: int) -> str:
    """Join the lines; past ``max_chars`` drop the oldest ``body`` lines, then clip."""
    body = list(body)
    while body and len("\n".join(head + body + tail)) > max_chars:
        body.pop(0)
    return clip("\n".join(head + body + tail), max_chars)
