"""Compress a list of agent steps to a token threshold.

Steps under the threshold come back unchanged. Otherwise the most recent ``keep_recent``
steps are kept verbatim (as many as fit, leaving at least ``min_summary_tokens`` for the
summary) and the older ones are replaced by one ``step_type="summary"`` step: an LLM summary
or, when the LLM fails, a deterministic digest that says what was cut. The result is
recounted and never exceeds the threshold; an over-long summary is re-asked once, then cut.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from react_mem.errors import ReactMemError
from react_mem.schema import AgentStep
from react_mem.schema.working import SUMMARY_STEP_TYPE
from react_mem.tokens import TokenCounter, count_steps, fit_text, render_step

TRUNCATED = " … [summary truncated]"
_DIGEST_CHARS = 160


class SummaryUnavailable(ReactMemError):
    """The summariser could not produce a summary (LLM down, erroring, or empty)."""


class Summariser(Protocol):
    async def __call__(
        self, steps: Sequence[AgentStep], max_tokens: int, *, previous_tokens: int | None = None
    ) -> str:
        """A summary of ``steps`` in at most ``max_tokens``; ``previous_tokens`` says the
        last attempt was that long (too long). Raises :class:`SummaryUnavailable`."""
        ...


@dataclass(frozen=True, kw_only=True)
class Compression:
    steps: list[AgentStep]
    tokens_before: int
    tokens_after: int
    summarised: int
    kept: int
    fallback: bool


@dataclass(frozen=True, kw_only=True)
class Policy:
    threshold: int
    keep_recent: int
    min_summary_tokens: int = 64
    reask_on_overflow: bool = True


def choose_kept(counts: Sequence[int], policy: Policy) -> int:
    """How many recent steps stay verbatim: up to ``keep_recent``, leaving the summary room."""
    n = len(counts)
    reserve = min(policy.min_summary_tokens, policy.threshold)
    kept = min(policy.keep_recent, n)
    while kept > 0 and sum(counts[n - kept :]) + reserve > policy.threshold:
        kept -= 1
    return kept


async def compress(
    steps: Sequence[AgentStep],
    policy: Policy,
    counter: TokenCounter,
    summarise: Summariser,
    *,
    counts: Sequence[int] | None = None,
) -> Compression:
    """``counts`` are the steps' token counts when the caller has them already."""
    counts = count_steps(counter, steps) if counts is None else counts
    before = sum(counts)
    if before <= policy.threshold:
        return Compression(
            steps=list(steps),
            tokens_before=before,
            tokens_after=before,
            summarised=0,
            kept=len(steps),
            fallback=False,
        )
    n = len(steps)
    kept = choose_kept(counts, policy)
    older, recent = list(steps[: n - kept]), list(steps[n - kept :])
    budget = policy.threshold - sum(counts[n - kept :])
    notice = ""
    if kept < min(policy.keep_recent, n):
        notice = (
            f"[working memory: {kept} of {min(policy.keep_recent, n)} recent steps kept "
            f"verbatim; threshold {policy.threshold} tokens]\n"
        )
    text_budget = max(0, budget - _overhead(counter, notice))
    fallback = False
    try:
        text = await _llm_summary(older, text_budget, policy, counter, summarise)
    except SummaryUnavailable:
        text, fallback = fallback_summary(older, counter, text_budget), True
    summary = fit_summary(counter, notice + text, budget, marker=" …" if fallback else TRUNCATED)
    result = [summary, *recent]
    after = sum(count_steps(counter, result))
    if after > policy.threshold:  # pragma: no cover - fit_summary guarantees this
        raise AssertionError(f"compressed to {after} tokens, over {policy.threshold}")
    return Compression(
        steps=result,
        tokens_before=before,
        tokens_after=after,
        summarised=len(older),
        kept=kept,
        fallback=fallback,
    )


def _overhead(counter: TokenCounter, notice: str) -> int:
    """Tokens the summary step costs besides its summary text."""
    probe = "x"
    rendered = render_step(summary_step(notice + probe))
    return counter.count(rendered) - counter.count(probe)


async def _llm_summary(
    older: list[AgentStep],
    text_budget: int,
    policy: Policy,
    counter: TokenCounter,
    summarise: Summariser,
) -> str:
    if text_budget <= 0:
        raise SummaryUnavailable("no room for a summary")
    text = (await summarise(older, text_budget)).strip()
    length = counter.count(text)
    if length > text_budget and policy.reask_on_overflow:
        try:
            shorter = (await summarise(older, text_budget, previous_tokens=length)).strip()
        except SummaryUnavailable:
            return text  # the first summary, cut to fit below
        if counter.count(shorter) < length:
            return shorter
    return text


def summary_step(text: str) -> AgentStep:
    return AgentStep(observation=text, step_type=SUMMARY_STEP_TYPE)


def fit_summary(
    counter: TokenCounter, text: str, budget: int, *, marker: str = TRUNCATED
) -> AgentStep:
    """The summary step for ``text``, cut deterministically to at most ``budget`` tokens."""
    step = summary_step(text)
    room = budget - (counter.count(render_step(step)) - counter.count(text))
    while counter.count(render_step(step)) > budget:
        step = summary_step(fit_text(counter, text, room, marker=marker))
        room -= 1
        if room < 0:
            return summary_step("")
    return step


def fallback_summary(older: Sequence[AgentStep], counter: TokenCounter, budget: int) -> str:
    """A deterministic digest of ``older`` in about ``budget`` tokens: first what was cut,
    then one line per step (action, arguments, start of the result) while they fit."""
    actions = Counter(s.action for s in older if s.action)
    without = sum(1 for s in older if not s.action)
    parts = [f"{name}×{count}" for name, count in actions.items()]  # noqa: RUF001 (a multiplication sign is meant)
    what = f"actions {', '.join(parts)}" if parts else "no actions"
    if parts and without:
        what += f"; {without} without action"
    plural = "s" if len(older) != 1 else ""
    lines = [f"[working memory: {len(older)} earlier step{plural} omitted: {what}]"]
    used = counter.count(lines[0])
    digests = [_digest(i, s) for i, s in enumerate(older, 1)]
    for index, line in enumerate(digests):
        more = len(digests) - index - 1
        cost = counter.count(line) + (counter.count(f"- (+{more} more)") if more else 0)
        if used + cost > budget:
            lines.append(f"- (+{len(digests) - index} more)")
            break
        lines.append(line)
        used += counter.count(line)
    return "\n".join(lines)


def _digest(index: int, step: AgentStep) -> str:
    if step.step_type == SUMMARY_STEP_TYPE:  # compressed before: keep more of it
        return f"- step {index}: earlier summary: {_short(step.observation, 3 * _DIGEST_CHARS)}"
    if step.action:
        args = ", ".join(f"{k}={_short(v, 40)}" for k, v in step.arguments.items())
        head = f"{step.action}({args})"
        if step.observation:
            head += f" -> {_short(step.observation, _DIGEST_CHARS)}"
    else:
        head = _short(step.thought or step.observation, _DIGEST_CHARS)
    return f"- step {index}: {head}"


def _short(text: str, limit: int) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
