"""Presidio recognizers for credentials, which Presidio itself does not ship.

Vendor keys are matched by their documented prefixes and lengths (the same shapes gitleaks
and detect-secrets look for); a JWT must decode to a JSON header naming ``alg``; a PEM
private key block is taken whole (to the end of the text when its END line is missing).
:class:`AssignedSecretRecognizer` takes the value after ``password:``, ``api_key=``,
``token:`` and the like, when the value looks like a credential rather than a word.
Matching is case-sensitive: ``AKIA…`` is a key, ``akia…`` is not.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter

from presidio_analyzer import LocalRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

#: Vendor API keys and access tokens (all reported as ``API_KEY``).
API_KEY_PATTERNS = (
    Pattern("aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b", 0.9),
    Pattern("github-token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", 0.95),
    Pattern("github-fine-grained-pat", r"\bgithub_pat_[A-Za-z0-9_]{40,255}\b", 0.95),
    Pattern(
        "openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])", 0.8
    ),
    Pattern("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])", 0.9),
    Pattern("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b", 0.9),
    Pattern("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", 0.9),
    Pattern("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}\b", 0.9),
    Pattern("gitlab-token", r"\bglpat-[0-9A-Za-z_-]{20,}(?![0-9A-Za-z_-])", 0.9),
    Pattern("huggingface-token", r"\bhf_[A-Za-z]{34,}\b", 0.85),
)

JWT_PATTERN = Pattern(
    "jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{10,}(?![A-Za-z0-9_-])", 0.6
)

PRIVATE_KEY_PATTERN = Pattern(
    "pem-private-key",
    r"-----BEGIN[A-Z ]{0,32} PRIVATE KEY(?: BLOCK)?-----"
    r"[\s\S]*?(?:-----END[A-Z ]{0,32} PRIVATE KEY(?: BLOCK)?-----|\Z)",
    1.0,
)

#: ``<keyword> is <value>``, ``<keyword>: <value>``, ``<keyword>=<value>``: the value is
#: the secret (a keyword with no assignment, "password requirements", is not).
ASSIGNED = re.compile(
    r"(?i)\b(?P<key>pass(?:word|wd|phrase)?|pwd|secret|client[_ -]?secret|api[_ -]?key|"
    r"access[_ -]?key|secret[_ -]?key|private[_ -]?key|token|access[_ -]?token|"
    r"auth[_ -]?token|bearer)\b"
    r"(?:\s+is\s+|\s*[:=]\s*)[\"'`]?(?P<value>[^\s\"'`<>,;]{6,200})"
)
PASSWORD_KEYS = ("pass", "pwd")


def entropy(value: str) -> float:
    """Shannon entropy of the characters, in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def credential_like(value: str, key: str) -> bool:
    """A password may be anything that is not a plain word; a key or token must look
    random: 16+ characters mixing letters with digits or symbols, high entropy."""
    if key.lower().startswith(PASSWORD_KEYS):
        return not value.isalpha() or len(value) >= 12
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )
    return len(value) >= 16 and classes >= 2 and entropy(value) >= 3.0


class ApiKeyRecognizer(PatternRecognizer):
    def __init__(self) -> None:
        super().__init__(
            supported_entity="API_KEY",
            name="ApiKeyRecognizer",
            patterns=list(API_KEY_PATTERNS),
            global_regex_flags=re.MULTILINE,
        )


class JwtRecognizer(PatternRecognizer):
    def __init__(self) -> None:
        super().__init__(
            supported_entity="JWT",
            name="JwtRecognizer",
            patterns=[JWT_PATTERN],
            global_regex_flags=re.MULTILINE,
        )

    def validate_result(self, pattern_text: str) -> bool:
        header = pattern_text.split(".", 1)[0]
        try:
            decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return False
        return isinstance(decoded, dict) and "alg" in decoded


class PrivateKeyRecognizer(PatternRecognizer):
    def __init__(self) -> None:
        super().__init__(
            supported_entity="PRIVATE_KEY",
            name="PrivateKeyRecognizer",
            patterns=[PRIVATE_KEY_PATTERN],
            global_regex_flags=re.MULTILINE,
        )


class AssignedSecretRecognizer(LocalRecognizer):
    """The value of ``password: …``, ``api_key=…``, ``my token is …`` (``SECRET``)."""

    SCORE = 0.7

    def __init__(self) -> None:
        super().__init__(supported_entities=["SECRET"], name="AssignedSecretRecognizer")

    def load(self) -> None:
        """Nothing to load: one compiled expression."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        found = []
        for match in ASSIGNED.finditer(text):
            value = match.group("value").rstrip(".!?)]}")
            if credential_like(value, match.group("key")):
                start = match.start("value")
                found.append(RecognizerResult("SECRET", start, start + len(value), self.SCORE))
        return found


def secret_recognizers() -> list[LocalRecognizer]:
    return [ApiKeyRecognizer(), JwtRecognizer(), PrivateKeyRecognizer(), AssignedSecretRecognizer()]
