"""The PII screen's detector and policy, on generated real-looking values (no broker)."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.pii.engine import (
    BlankEnglish,
    Detector,
    IndexedContextEnhancer,
    LemmaContextAwareEnhancer,  # Presidio's, imported there without torch
)
from memory_services.pii.guard import PiiGuard, PiiRefused
from memory_services.pii.policy import ENTITIES, PiiPolicy
from react_mem.errors import BadRequest, ConfigurationError
from react_mem.schema.facts import FactInput, FactRequest
from tests.support import pii_values
from tests.support.pii_values import KINDS, iban_valid, luhn_check_digit, ordinary, sentence

PII_KINDS = [*KINDS, "api_key"]
EXAMPLES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


def redact(detector: Detector, text: str, policy: PiiPolicy | None = None) -> tuple[str, list[str]]:
    policy = policy or PiiPolicy()
    return detector.redact(text, detector.find(text, policy.entities, policy.threshold))


def test_generators_obey_the_rules() -> None:
    rng = random.Random(7)
    for _ in range(200):
        digits = "".join(c for c in pii_values.card(rng) if c.isdigit())
        assert luhn_check_digit(digits[:-1]) == digits[-1]
        assert iban_valid(pii_values.iban(rng))
    assert luhn_check_digit("411111111111111") == "1"  # the classic test Visa
    assert iban_valid("GB82 WEST 1234 5698 7654 32")


@pytest.mark.parametrize("kind", PII_KINDS)
@EXAMPLES
@given(rng=st.randoms(use_true_random=False))
def test_each_kind_is_redacted_to_its_type(
    detector: Detector, kind: str, rng: random.Random
) -> None:
    text, value, entity = sentence(rng, kind)
    redacted, entities = redact(detector, text)
    assert value not in redacted
    assert f"<{entity}>" in redacted, (redacted, entities)
    # The words around it stay.
    for word in text.replace(value, " ").split():
        assert word in redacted


@EXAMPLES
@given(rng=st.randoms(use_true_random=False))
def test_many_values_in_one_text_are_all_redacted(detector: Detector, rng: random.Random) -> None:
    parts = [sentence(rng, kind) for kind in rng.sample(PII_KINDS, 4)]
    text = " ".join(p[0] for p in parts)
    redacted, _ = redact(detector, text)
    for _, value, entity in parts:
        assert value not in redacted
        assert f"<{entity}>" in redacted


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rng=st.randoms(use_true_random=False))
def test_ordinary_sentences_are_unchanged(detector: Detector, rng: random.Random) -> None:
    text = ordinary(rng)
    assert redact(detector, text) == (text, [])


@pytest.mark.parametrize(
    "text",
    [
        "I have 3 cats",
        "The password requirements changed last week.",
        "I forgot my password yesterday.",
        "Use a token bucket for rate limiting.",
        "The API key rotation runs monthly.",
        "Released 2024-05-01, version 3.12.1, build 20240501.",
        "See https://docs.python.org/3/library/re.html for details.",
        "Meet at 10:30 in room 4.12; bring 2 copies.",
    ],
)
def test_no_false_positive(detector: Detector, text: str) -> None:
    assert redact(detector, text) == (text, [])


@pytest.mark.parametrize(
    ("text", "entity"),
    [
        ("My SSN is 123-45-6789.", "US_SSN"),  # Presidio exempts it as a sample; not here
        ("my password is hunter2!", "SECRET"),
        ("api_key=Zx9fK2LmQ8vR4tY7wP1nB6cD3", "SECRET"),
        ("server at 192.168.10.20", "IP_ADDRESS"),
        ("btc 1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "CRYPTO"),
    ],
)
def test_more_kinds(detector: Detector, text: str, entity: str) -> None:
    redacted, entities = redact(detector, text)
    assert entities == [entity]
    assert f"<{entity}>" in redacted


def test_entity_types_narrow_the_screen(detector: Detector) -> None:
    text = "Write to jane@example.com or call (212) 736-5000."
    only_email = PiiPolicy.build("redact", ["EMAIL_ADDRESS"])
    assert redact(detector, text, only_email) == (
        "Write to <EMAIL_ADDRESS> or call (212) 736-5000.",
        ["EMAIL_ADDRESS"],
    )


def test_context_words_raise_a_score(detector: Detector) -> None:
    """The blank pipeline's lower-cased tokens stand in for lemmas: "phone" near a number
    lifts it over a threshold a bare number stays under."""
    strict = PiiPolicy.build("redact", threshold=0.5)
    assert redact(detector, "See 212 736 5000 tomorrow.", strict)[1] == []
    assert redact(detector, "My phone number: 212 736 5000.", strict)[1] == ["PHONE_NUMBER"]


@settings(max_examples=80, deadline=None)
@given(words=st.lists(st.text("ab1 -.", min_size=1, max_size=6), min_size=1, max_size=40))
def test_the_indexed_context_enhancer_finds_presidios_token(words: list[str]) -> None:
    nlp = BlankEnglish()
    nlp.load()
    artifacts = nlp.process_text(" ".join(words), "en")
    tokens, indices = artifacts.tokens, artifacts.tokens_indices
    for start in range(len(artifacts.tokens.text)):
        try:
            expected = LemmaContextAwareEnhancer._find_index_of_match_token(
                "w", start, tokens, indices
            )
        except ValueError:
            with pytest.raises(ValueError, match="no token"):
                IndexedContextEnhancer._find_index_of_match_token("w", start, tokens, indices)
        else:
            assert (
                IndexedContextEnhancer._find_index_of_match_token("w", start, tokens, indices)
                == expected
            )


def test_the_detector_knows_every_policy_entity(detector: Detector) -> None:
    assert set(detector._analyzer.get_supported_entities()) == ENTITIES


def test_email_domains_are_checked_offline(
    detector: Detector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Presidio's stock e-mail recognizer fetches the public suffix list at first use."""
    tried: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        tried.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    fresh = Detector()
    assert redact(fresh, "mail a.b@corp-mail.io")[1] == ["EMAIL_ADDRESS"]
    assert tried == []


def test_screened_words_are_not_kept(detector: Detector) -> None:
    """spaCy keeps every word it has not seen in its vocabulary for the life of the
    process: users' words after they are forgotten, and a heap that grows with each one
    (the soak's creep). The screen forgets them with the text, and still finds what the
    text held."""
    redact(detector, "A first text, so the vocabulary holds what any text adds.")
    before = detector.words_known
    rng = random.Random(11)
    for n in range(300):
        word = f"zq{rng.getrandbits(40):x}"
        text = f"{word} took a ferret to Osaka (note {n}); mail {word}@corp-mail.io"
        said, kinds = redact(detector, text)
        assert kinds == ["EMAIL_ADDRESS"] and word in said and "@" not in said
    assert detector.words_known == before


def test_presidio_is_imported_without_torch() -> None:
    """spaCy's thinc and Presidio import torch when installed; the screen keeps it out
    (≈300 MiB a memory service's ONNX embedder does not need)."""
    code = (
        "import sys; from memory_services.pii.engine import Detector; Detector(); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- policy --------------------------------------------------------------------------------


def test_policy_values() -> None:
    default = PiiPolicy()
    assert default.action == "redact" and default.entities == ENTITIES
    assert default.overridden("drop").action == "drop"
    assert default.overridden('"allow"').action == "allow"
    custom = default.overridden(
        '{"action": "drop", "entities": ["US_SSN"], "score-threshold": 0.9}'
    )
    assert (custom.action, custom.entities, custom.threshold) == ("drop", {"US_SSN"}, 0.9)
    kept = PiiPolicy.build("drop", ["JWT"]).overridden('{"score-threshold": 0.5}')
    assert (kept.action, kept.entities) == ("drop", {"JWT"})


@pytest.mark.parametrize(
    "value",
    [
        "forget",
        '{"action": "mask"}',
        '{"entities": ["PERSON"]}',
        '{"score-threshold": 2}',
        "{",
        "[1]",
    ],
)
def test_bad_policy_values_name_the_problem(value: str) -> None:
    with pytest.raises(ConfigurationError, match="pii-policy"):
        PiiPolicy().overridden(value)


# -- guard ---------------------------------------------------------------------------------


@pytest.fixture
def guard() -> tuple[PiiGuard, CollectorRegistry]:
    registry = CollectorRegistry()
    return PiiGuard("fact-memory-test", PiiPolicy(), registry), registry


def facts(*contents: str) -> FactRequest:
    return FactRequest(operation="store", facts=[FactInput(content=c) for c in contents])


async def test_guard_applies_each_workspace_policy(
    guard: tuple[PiiGuard, CollectorRegistry],
) -> None:
    screen, registry = guard
    await screen.on_config("ws-drop", {"agent-mem": {"pii-policy": "drop"}}, 1)
    await screen.on_config("ws-allow", {"agent-mem": {"pii-policy": "allow"}}, 1)
    await screen.on_config("ws-bad", {"agent-mem": {"pii-policy": "shred"}}, 1)  # logged, ignored
    text = "Email jane@example.com, card 4111 1111 1111 1111."

    redacted = await screen.screen("ws-a", facts(text, "I have 3 cats"))
    assert [f.content for f in redacted.facts] == [
        "Email <EMAIL_ADDRESS>, card <CREDIT_CARD>.",
        "I have 3 cats",
    ]
    assert (await screen.screen("ws-bad", facts(text))).facts[0].content != text
    assert (await screen.screen("ws-allow", facts(text))).facts[0].content == text
    with pytest.raises(PiiRefused, match="CREDIT_CARD, EMAIL_ADDRESS") as refused:
        await screen.screen("ws-drop", facts(text))
    assert refused.value.type == "pii-refused"
    assert "jane" not in str(refused.value) and "4111" not in str(refused.value)
    assert (await screen.screen("ws-drop", facts("I have 3 cats"))).facts[0].content == (
        "I have 3 cats"
    )
    # Reads are never screened.
    query = FactRequest(operation="retrieve", query=text)
    assert await screen.screen("ws-a", query) is query

    def count(entity: str) -> float | None:
        return registry.get_sample_value(
            "tg_memory_pii_detections_total",
            {"processor": "fact-memory-test", "kind": "fact", "entity": entity},
        )

    assert count("EMAIL_ADDRESS") == count("CREDIT_CARD") == 3.0  # ws-a, ws-bad, ws-drop

    # Longer than any service stores, and than spaCy takes: refused before detection.
    with pytest.raises(BadRequest, match="over 1000000") as too_long:
        await screen.screen("ws-a", facts("x" * 1_000_001))
    assert too_long.value.type == "too-large"

    # The workspace's key removed: back to the service's default.
    await screen.on_config("ws-drop", {"agent-mem": {}}, 2)
    assert screen.policy("ws-drop") == PiiPolicy()
