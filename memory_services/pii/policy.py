"""What a workspace does with PII and secrets found in memory it writes.

The service's settings (``pii_policy``, ``pii_entities``, ``pii_score_threshold``) give the
default; a workspace overrides it with the ``pii-policy`` key of its ``agent-mem`` config:
a word (``redact``, ``drop``, ``allow``) or a JSON object::

    {"action": "redact", "entities": ["CREDIT_CARD", "US_SSN"], "score-threshold": 0.5}

``redact`` (the default) stores each finding replaced by ``<ENTITY_TYPE>``; ``drop`` refuses
the record (error ``pii-refused``, naming the entity types only); ``allow`` stores as is.
Keys left out of the object keep the service's default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Literal, get_args

from react_mem.errors import ConfigurationError

Action = Literal["redact", "drop", "allow"]
ACTIONS: tuple[str, ...] = get_args(Action)

#: Every entity type the detector knows (see :mod:`memory_services.pii.engine`).
ENTITIES = frozenset(
    {
        "CREDIT_CARD",
        "US_SSN",
        "US_ITIN",
        "IBAN_CODE",
        "EMAIL_ADDRESS",
        "PHONE_NUMBER",
        "IP_ADDRESS",
        "CRYPTO",
        "API_KEY",
        "JWT",
        "PRIVATE_KEY",
        "SECRET",
        "DATE_OF_BIRTH",
        "PASSPORT",
        "PIN",
    }
)

#: Findings scored below this are ignored. Presidio scores a bare phone number 0.4 and a
#: checksum-validated match 1.0; its weakest patterns (0.05) stay out.
DEFAULT_THRESHOLD = 0.4


@dataclass(frozen=True, kw_only=True)
class PiiPolicy:
    action: Action = "redact"
    entities: frozenset[str] = ENTITIES
    threshold: float = DEFAULT_THRESHOLD

    @classmethod
    def build(
        cls, action: str, entities: list[str] | None = None, threshold: float = DEFAULT_THRESHOLD
    ) -> PiiPolicy:
        """Validated; the error names the bad value."""
        if action not in ACTIONS:
            raise ConfigurationError(
                f"pii-policy action {action!r}: expected one of {', '.join(ACTIONS)}"
            )
        chosen = ENTITIES if entities is None else frozenset(entities)
        unknown = sorted(chosen - ENTITIES)
        if unknown:
            raise ConfigurationError(
                f"pii-policy entities {unknown}: expected some of {sorted(ENTITIES)}"
            )
        if not 0.0 <= threshold <= 1.0:
            raise ConfigurationError(f"pii-policy score-threshold {threshold!r}: expected 0..1")
        return cls(action=action, entities=chosen, threshold=threshold)  # type: ignore[arg-type]

    def overridden(self, value: str) -> PiiPolicy:
        """This policy with a workspace's ``pii-policy`` value applied."""
        text = value.strip()
        try:
            parsed = json.loads(text) if text[:1] in ("{", '"') else text
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"pii-policy {value!r}: not JSON ({exc})") from exc
        if isinstance(parsed, str):
            return replace(self, action=self.build(parsed).action)
        if not isinstance(parsed, dict) or set(parsed) - {"action", "entities", "score-threshold"}:
            raise ConfigurationError(
                f"pii-policy {value!r}: expected an action or an object with action, "
                "entities, score-threshold"
            )
        entities = parsed.get("entities", sorted(self.entities))
        threshold = parsed.get("score-threshold", self.threshold)
        if not isinstance(entities, list) or not all(isinstance(e, str) for e in entities):
            raise ConfigurationError(f"pii-policy entities {entities!r}: expected a list")
        if not isinstance(threshold, int | float) or isinstance(threshold, bool):
            raise ConfigurationError(f"pii-policy score-threshold {threshold!r}: not a number")
        return self.build(str(parsed.get("action", self.action)), entities, float(threshold))
