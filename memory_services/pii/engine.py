"""Presidio's analyzer and anonymizer, offline, with no model.

Presidio's default NLP engine is spaCy with ``en_core_web_lg``, a model that is not on PyPI
and would be downloaded at run time. Here the NLP engine is a blank English spaCy pipeline
(tokens only, shipped with spaCy), which is all Presidio's pattern and checksum recognizers
need: their context words ("card", "ssn", "phone") are matched against lower-cased tokens.
What a blank pipeline cannot do is NER, so names, places and organisations (``PERSON``,
``LOCATION``, ``NRP``) are not detected.

Recognizers (entity types): credit cards with the Luhn check (``CREDIT_CARD``), US SSNs
(``US_SSN``) and ITINs (``US_ITIN``), IBANs with the mod-97 check (``IBAN_CODE``), e-mail
addresses (``EMAIL_ADDRESS``, the domain checked against the public suffix list bundled
with tldextract, never fetched), phone numbers parsed and validated by phonenumbers
(``PHONE_NUMBER``), IPv4/IPv6 addresses (``IP_ADDRESS``), Bitcoin addresses with their
checksum (``CRYPTO``), this package's credentials (``API_KEY``, ``JWT``,
``PRIVATE_KEY``, ``SECRET``; see :mod:`.secrets`), and values said in words: dates of
birth, passport numbers, PINs, bare SSNs, spelled-out e-mail addresses
(``DATE_OF_BIRTH``, ``PASSPORT``, ``PIN``; see :mod:`.stated`). Importing this module
imports Presidio (≈2 s, ≈120 MiB; see :mod:`.imports`).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from memory_services.pii.imports import presidio_modules

presidio_modules()

# Presidio is imported above, without torch.
import spacy  # noqa: E402
import tldextract  # noqa: E402
from presidio_analyzer import (  # noqa: E402
    AnalyzerEngine,
    Pattern,
    RecognizerRegistry,
)
from presidio_analyzer import RecognizerResult as Found  # noqa: E402
from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer  # noqa: E402
from presidio_analyzer.nlp_engine import NlpArtifacts, SlimSpacyNlpEngine  # noqa: E402
from presidio_analyzer.predefined_recognizers import (  # noqa: E402
    CreditCardRecognizer,
    CryptoRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UsItinRecognizer,
    UsSsnRecognizer,
)
from presidio_anonymizer import AnonymizerEngine  # noqa: E402
from presidio_anonymizer.entities import (  # noqa: E402
    ConflictResolutionStrategy,
    OperatorConfig,
    RecognizerResult,
)

from memory_services.pii.secrets import secret_recognizers  # noqa: E402
from memory_services.pii.stated import stated_recognizers  # noqa: E402

#: The public suffix list shipped inside tldextract: no fetch, no cache directory.
_OFFLINE_TLDS = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


class BlankEnglish(SlimSpacyNlpEngine):
    """``spacy.blank("en")``: tokens and stop words, no model, no download. Lemmas are the
    lower-cased tokens, so context words still raise a nearby match's score."""

    def __init__(self) -> None:
        super().__init__(models=[{"lang_code": "en", "model_name": "blank:en"}])

    def load(self) -> None:
        self.nlp = {"en": spacy.blank("en")}  # type: ignore[assignment]  # None before load

    def _doc_to_nlp_artifact(self, doc: Any, language: str) -> NlpArtifacts:
        artifacts = NlpArtifacts(
            entities=[],
            tokens=doc,
            tokens_indices=[token.idx for token in doc],
            lemmas=[token.lower_ for token in doc],
            nlp_engine=self,
            language=language,
            scores=[],
        )
        # Presidio only tests words for membership in its keyword list, once per word
        # around each match: a set keeps that from growing with the text.
        artifacts.keywords = set(artifacts.keywords)  # type: ignore[assignment]
        return artifacts


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, its domain check on the bundled suffix list (the
    stock one fetches the list from the internet at first use)."""

    def validate_result(self, pattern_text: str) -> bool:
        return _OFFLINE_TLDS(pattern_text).fqdn != ""


class CardRecognizer(CreditCardRecognizer):
    """Presidio's card recognizer (Luhn-checked), with Mastercard's 2221-2720 range, which
    its pattern predates."""

    PATTERNS = [
        *CreditCardRecognizer.PATTERNS,
        Pattern(
            "Mastercard 2-series (weak)",
            r"\b(2(?:22[1-9]|2[3-9]\d|[3-6]\d{2}|7[01]\d|720))"
            r"[- ]?(\d{4})[- ]?(\d{4})[- ]?(\d{4})\b",
            0.3,
        ),
    ]


class LongPhoneRecognizer(PhoneRecognizer):
    """Presidio's phone recognizer (numbers parsed and validated by phonenumbers for its
    regions), run only where a number could be, and without matches of fewer than 7 digits.

    phonenumbers scans the whole text once per region, ≈15 ms for a 650-character text;
    here it scans each run of digits and separators holding 7 or more digits (with one
    character either side, which its matcher checks), so plain prose costs nothing. Short
    matches are dropped because German numbering validates "16.4.0" (a version) as the
    number 1640, and a phone number worth remembering is longer."""

    MIN_DIGITS = 7
    CANDIDATE = re.compile(r"[+(]?\d[\d ().\-/]{5,40}\d")

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[Found]:
        found: list[Found] = []
        for candidate in self.CANDIDATE.finditer(text):
            if self._digits(candidate.group()) < self.MIN_DIGITS:
                continue
            start, end = max(candidate.start() - 1, 0), min(candidate.end() + 1, len(text))
            # Presidio annotates the artifacts as required but defaults them to None.
            for result in super().analyze(text[start:end], entities, nlp_artifacts):  # type: ignore[arg-type]
                result.start, result.end = result.start + start, result.end + start
                if self._digits(text[result.start : result.end]) >= self.MIN_DIGITS:
                    found.append(result)
        return found

    @staticmethod
    def _digits(text: str) -> int:
        return sum(c.isdigit() for c in text)


class SsnRecognizer(UsSsnRecognizer):
    """Presidio's SSN recognizer, without its exemption of published sample numbers: a
    user who calls 123-45-6789 their SSN still means it, and redacting it costs nothing."""

    SAMPLES = frozenset({"123456789", "987654320", "078051120"})

    def invalidate_result(self, pattern_text: str) -> bool:
        if "".join(c for c in pattern_text if c.isdigit()) in self.SAMPLES:
            return False
        return bool(super().invalidate_result(pattern_text))


class IndexedContextEnhancer(LemmaContextAwareEnhancer):
    """Presidio's context enhancer, finding a match's token by binary search: its own scan
    from the first token for every match makes a long text's cost quadratic (≈17 s for
    500 KB with 1,250 findings)."""

    @staticmethod
    def _find_index_of_match_token(
        word: str, start: int, tokens: Any, tokens_indices: list[int]
    ) -> int:
        # The first token ending after ``start``: token ends only grow.
        i = bisect.bisect_right(
            range(len(tokens_indices)), start, key=lambda i: tokens_indices[i] + len(tokens[i])
        )
        if i == len(tokens_indices):
            raise ValueError(f"no token at {start}, although a match starts there")
        return i


@dataclass(frozen=True)
class Finding:
    entity: str
    start: int
    end: int
    score: float


class Detector:
    """Finds and replaces PII and secrets in text. Not thread-safe: callers run it on one
    thread (see :class:`memory_services.pii.guard.PiiGuard`)."""

    def __init__(self) -> None:
        registry = RecognizerRegistry(supported_languages=["en"])
        for recognizer in (
            CardRecognizer(),
            SsnRecognizer(),
            UsItinRecognizer(),
            IbanRecognizer(),
            OfflineEmailRecognizer(),
            LongPhoneRecognizer(),
            IpRecognizer(),
            CryptoRecognizer(),
            *secret_recognizers(),
            *stated_recognizers(),
        ):
            registry.add_recognizer(recognizer)
        engine = _loaded(BlankEnglish())
        self._nlp: Any = engine.nlp["en"]  # type: ignore[index]  # a dict once loaded
        self._analyzer = AnalyzerEngine(
            registry=registry, nlp_engine=engine, context_aware_enhancer=IndexedContextEnhancer()
        )
        self._anonymizer = AnonymizerEngine()  # type: ignore[no-untyped-call]

    def find(self, text: str, entities: frozenset[str], threshold: float) -> list[Finding]:
        # spaCy adds every word it has not seen to its vocabulary, for the life of the
        # process: users' words (names, numbers, ids) kept after they are forgotten, and a
        # heap that grows with every new one (~0.3 KiB each). A memory zone frees the words
        # the text added when it closes; only plain values leave it.
        with self._nlp.memory_zone():
            results = self._analyzer.analyze(
                text, language="en", entities=sorted(entities), score_threshold=threshold
            )
            return [Finding(r.entity_type, r.start, r.end, r.score) for r in results]

    @property
    def words_known(self) -> int:
        """Strings held by the tokenizer's vocabulary: what it shipped with, whatever was
        screened (see :meth:`find`)."""
        return len(self._nlp.vocab.strings)

    def redact(self, text: str, findings: list[Finding]) -> tuple[str, list[str]]:
        """The text with each finding replaced by ``<ENTITY_TYPE>``, and the entity types
        replaced (overlapping findings resolved by Presidio: one span, one type)."""
        results = [RecognizerResult(f.entity, f.start, f.end, f.score) for f in findings]
        done = self._anonymizer.anonymize(
            text,
            results,
            operators={"DEFAULT": OperatorConfig("replace")},
            conflict_resolution=ConflictResolutionStrategy.REMOVE_INTERSECTIONS,
        )
        return done.text, [item.entity_type for item in done.items]


def _loaded(engine: BlankEnglish) -> BlankEnglish:
    engine.load()
    return engine
