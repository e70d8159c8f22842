"""The PII screen reads text as the prompt renders it (issue 26, finding 6): a value in
full-width digits or split by zero-width characters is found, as are values said in words
(a date of birth, a passport number, a PIN, a bare SSN named as one, an e-mail address
spelled out). Stored memory never gives the LLM such a value back once folded.

Over the real broker (both where installed), fact-memory's real store and embedder; a
property test over generated disguises on the detector itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from memory_services.pii.guard import _shared_detector
from memory_services.pii.policy import PiiPolicy
from react_mem.agent.items import clean
from react_mem.bus.transport import Transport
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.text import fold
from tests.test_pii_memory import start

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"

#: (text, the value a reader must never see again, its placeholder).
EVASIONS = [
    (
        "My SSN is \uff15\uff13\uff16-\uff12\uff12-\uff18\uff17\uff14\uff11.",
        "536228741",
        "<US_SSN>",
    ),
    ("Her SSN: 536-22\u200b-8741", "536228741", "<US_SSN>"),
    ("Write to me: ada at example dot com", "ada@example.com", "<EMAIL_ADDRESS>"),
    ("Or ada [at] example [dot] org", "ada@example.org", "<EMAIL_ADDRESS>"),
    ("My social security number is 536228741", "536228741", "<US_SSN>"),
    ("My passport number is X8841297.", "X8841297", "<PASSPORT>"),
    ("I was born on 14 March 1987.", "14 March 1987", "<DATE_OF_BIRTH>"),
    ("Date of birth: 1987-03-14", "1987-03-14", "<DATE_OF_BIRTH>"),
    ("My bank PIN is 4921, don't share it.", "4921", "<PIN>"),
]


def seen(text: str) -> str:
    """What a reader takes from ``text``: folded, spaces and separators out, as an
    address is spelled out."""
    spelled = re.sub(r"\s*[\[(]?\b(at)\b[\])]?\s*", "@", clean(text), flags=re.I)
    spelled = re.sub(r"\s*[\[(]?\bdot\b[\])]?\s*", ".", spelled, flags=re.I)
    return re.sub(r"[\s\-]", "", spelled)


async def test_disguised_and_spelled_out_values_are_redacted_before_storage(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with start(
        FactMemoryProcessor, FactResponse, "fact-memory", transport, tmp_path, unique, registry
    ) as svc:
        facts = [FactInput(content=text) for text, _, _ in EVASIONS]
        stored = await svc.ask(FactRequest(operation="store", user="ada", facts=facts), "ws-a")
        assert stored.error is None
        listed = await svc.ask(FactRequest(operation="list", user="ada", limit=100), "ws-a")
    contents = [f.content for f in listed.facts]
    assert len(contents) == len(EVASIONS)
    for _, value, placeholder in EVASIONS:
        assert any(placeholder in c for c in contents), placeholder
        assert not [c for c in contents if re.sub(r"[\s\-]", "", value) in seen(c)]


def disguise(draw: st.DrawFn, digits: str) -> str:
    """``digits`` in full-width or ASCII forms, zero-width characters sprinkled in."""
    out = []
    for digit in digits:
        out.append(chr(ord(digit) + 0xFEE0) if draw(st.booleans()) else digit)
        out.append(draw(st.text(alphabet=ZERO_WIDTH, max_size=2)))
    return "".join(out)


@st.composite
def disguised_ssn(draw: st.DrawFn) -> str:
    area = draw(st.integers(100, 665))
    group, serial = draw(st.integers(10, 99)), draw(st.integers(1000, 9999))
    dashed = draw(st.booleans())
    value = f"{area}-{group}-{serial}" if dashed else f"{area}{group}{serial}"
    return f"My SSN is {disguise(draw, value)} today."


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(disguised_ssn())
def test_no_disguise_of_digits_hides_an_ssn(text: str) -> None:
    policy = PiiPolicy()
    found = _shared_detector().find(fold(text), policy.entities, policy.threshold)
    assert "US_SSN" in {f.entity for f in found}, ascii(text)


@pytest.mark.parametrize(
    "text",
    [
        "We looked at the dot com bubble in class.",
        "My birthday party is on June 5 and my passport is ready.",
        "Pin the poster at 3 and call me at 5.",
        "I was born in a small town and moved in 1990.",
    ],
)
def test_ordinary_words_near_these_names_are_not_taken_for_values(text: str) -> None:
    policy = PiiPolicy()
    assert _shared_detector().find(fold(text), policy.entities, policy.threshold) == []
