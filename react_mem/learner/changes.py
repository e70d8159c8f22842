"""Asking the LLM whether new facts update or contradict stored ones.

Fact-memory supersedes by rule (a closed list of attributes); an LLM reads any wording. For
each fact a plan would store, the learner brings the few most similar current facts of the
same owner and asks, with a JSON schema, which of them the new fact updates (the same thing
about the same subject, now with another value, or no longer so) and which it contradicts
with no way to tell which holds now. Stored facts are shown under short keys (``s1``...),
never their ids (a small model mangles UUIDs), and a reply may name only those shown. The
answers travel in ``FactInput.updates`` / ``contradicts``; the service applies them. No LLM,
an unusable reply or an LLM outage: the facts go as they are, and the rule still applies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from react_mem.learner.extract import DATA_NOTE, wrap_record
from react_mem.learner.llm import JsonLLM, LLMUnavailable
from react_mem.schema.facts import Fact, FactInput

logger = logging.getLogger(__name__)

SYSTEM = (
    "You keep the long-term memory of an AI agent consistent. " + DATA_NOTE + "\n"
    "For each NEW fact, name the STORED facts it updates (the same attribute of the same "
    "subject, now with another value, or no longer true: 'lives in Paris' updates 'lives in "
    "Berlin'; 'not allergic to peanuts any more' updates 'allergic to peanuts') and those it "
    "contradicts with no way to tell which is true now. Facts about different things, or "
    "that can both be true (two hobbies, two pets), are neither. Reply "
    '{"judgements": [{"new": "n1", "updates": ["s2"], "contradicts": []}]}, one per new '
    "fact that updates or contradicts something; if none does, reply "
    '{"judgements": []}.'
)
#: Stored facts shown per new fact.
SHOWN = 3


class Judgement(BaseModel):
    new: str
    updates: list[str] = Field(default_factory=list, max_length=SHOWN)
    contradicts: list[str] = Field(default_factory=list, max_length=SHOWN)


class JudgementSchema(BaseModel):
    """What is asked for."""

    judgements: list[Judgement] = Field(max_length=20)


class JudgementReply(BaseModel):
    """What is accepted: items are checked one by one."""

    judgements: list[Any]


async def judge(
    llm: JsonLLM | None, facts: Sequence[FactInput], stored: Sequence[Sequence[Fact]]
) -> list[FactInput]:
    """``facts`` with ``updates`` / ``contradicts`` set where the LLM says so; ``stored``
    holds each fact's most similar current facts."""
    facts = list(facts)
    keys: dict[str, str] = {}
    for found in stored:
        for held in found[:SHOWN]:
            keys.setdefault(held.id, f"s{len(keys) + 1}")
    if llm is None or not facts or not keys:
        return facts
    by_key = {key: id for id, key in keys.items()}
    contents = {f.id: f.content for found in stored for f in found}
    lines = ["NEW facts:"]
    lines += [f"n{n}: {fact.content}" for n, fact in enumerate(facts, 1)]
    lines += ["STORED facts:"]
    lines += [f"{key}: {contents[id]}" for id, key in keys.items()]
    try:
        reply = await llm.ask(
            SYSTEM, wrap_record("\n".join(lines)), JudgementReply, schema=JudgementSchema
        )
    except LLMUnavailable:
        logger.warning("LLM unavailable: %d facts stored without its judgement", len(facts))
        return facts
    if reply is None:
        return facts
    for item in reply.judgements:
        try:
            judged = Judgement.model_validate(item)
        except ValueError:
            continue
        index = _index(judged.new, len(facts))
        if index is None:
            continue
        updates = [by_key[k] for k in judged.updates if k in by_key]
        contradicts = [
            by_key[k] for k in judged.contradicts if k in by_key and k not in judged.updates
        ]
        fact = facts[index]
        facts[index] = fact.model_copy(
            update={
                "updates": list(dict.fromkeys([*fact.updates, *updates])),
                "contradicts": list(dict.fromkeys([*fact.contradicts, *contradicts])),
            }
        )
    return facts


def _index(key: str, count: int) -> int | None:
    number = key.strip().lower().removeprefix("n")
    if not number.isdigit() or not 1 <= int(number) <= count:
        return None
    return int(number) - 1
