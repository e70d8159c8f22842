"""Recognizers for personal data said in words, which Presidio's patterns miss.

Each takes a value only where the text says what it is: "born on 3 May 1990", "date of
birth: 1990-05-03", "passport number X1234567", "my PIN is 4921", "SSN 536228741" (nine
bare digits: Presidio scores those too low to count), and e-mail addresses spelled out to
dodge filters ("ada at example dot com", "ada [at] example [dot] com"). Only the value is
reported (and so replaced), not the words naming it. They read text after
:func:`react_mem.text.fold`, so full-width digits and zero-width characters do not hide it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?:[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]\d\d|20\d\d)"
#: A full date, its year included: 1990-05-03, 03/05/1990, 3 May 1990, May 3rd, 1990.
_DATE = (
    rf"(?:{_YEAR}[-/.][01]?\d[-/.][0-3]?\d|[0-3]?\d[-/.][01]?\d[-/.](?:{_YEAR}|\d\d)"
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}|{_MONTH}\s+{_DAY},?\s+{_YEAR})"
)
#: Words that may stand between a name and its value: "is", ":", "number", "was", "#".
_LINK = r"(?:\s*(?:(?:is|was|number|no|num|code)\b\.?|[:=#-]))*\s*"


@dataclass(frozen=True)
class Stated:
    entity: str
    pattern: re.Pattern[str]
    score: float
    #: Whether the value (the ``value`` group) is one; None: every match is.
    valid: Callable[[str], bool] | None = None


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


#: Words that are no one's mailbox or domain: "look at the dot com bubble" says none.
_NOT_ADDRESS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "my",
        "your",
        "his",
        "her",
        "our",
        "their",
        "its",
        "it",
        "me",
        "you",
        "him",
        "them",
        "us",
        "look",
        "looked",
        "looking",
        "at",
        "is",
        "was",
        "be",
        "been",
        "being",
        "and",
        "or",
        "but",
        "of",
        "in",
        "on",
        "to",
        "for",
        "with",
        "by",
    ]
)


def _address(value: str) -> bool:
    words = re.split(r"\s*(?:\[at\]|\(at\)|\{at\}|<at>|\s+at\s+)\s*", value.lower(), maxsplit=1)
    if len(words) != 2:
        return False
    user, domain = words[0].strip(), re.split(r"[\s.\[({<]", words[1].strip())[0]
    return user not in _NOT_ADDRESS and domain not in _NOT_ADDRESS


STATED = (
    Stated(
        "DATE_OF_BIRTH",
        re.compile(
            rf"(?i)\b(?:born(?:\s+on)?|date\s+of\s+birth|d\.?o\.?b\.?|birth\s*date|"
            rf"birthday){_LINK}(?:on\s+)?(?P<value>{_DATE})"
        ),
        0.85,
    ),
    Stated(
        "PASSPORT",
        re.compile(
            r"(?i)\bpassport(?:\s+(?:id|number|no\.?|num))?"
            + _LINK
            + r"(?P<value>[A-Z0-9]{6,10})\b"
        ),
        0.85,
        _has_digit,
    ),
    Stated(
        "PIN",
        re.compile(
            r"(?i)\b(?:pin(?:\s+(?:code|number))?|passcode|pass\s+code|security\s+code|cvv2?|cvc)"
            + _LINK
            + r"(?P<value>\d{3,8})\b"
        ),
        0.85,
    ),
    Stated(
        "US_SSN",
        re.compile(
            r"(?i)\b(?:ssn|social\s+security(?:\s+(?:number|no\.?|#))?)"
            + _LINK
            + r"(?P<value>\d{3}[\s.-]?\d{2}[\s.-]?\d{4})\b"
        ),
        0.85,
    ),
    Stated(
        "EMAIL_ADDRESS",
        re.compile(
            r"(?i)(?<![\w.])(?P<value>[a-z0-9][\w.+-]{0,63}"
            r"\s*(?:\[at\]|\(at\)|\{at\}|<at>|\s+at\s+)\s*"
            r"[a-z0-9][\w-]{0,62}"
            r"(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|<dot>|\s+dot\s+|\.)\s*[a-z0-9][\w-]{0,62})*"
            r"\s*(?:\[dot\]|\(dot\)|\{dot\}|<dot>|\s+dot\s+)\s*"
            r"(?:com|org|net|edu|gov|io|co|uk|de|fr|info|me|us|ca|au|nl|es|it|ch|se|jp))\b"
        ),
        0.75,
        _address,
    ),
)


class StatedRecognizer(LocalRecognizer):
    """One :class:`Stated` value kind."""

    def __init__(self, stated: Stated) -> None:
        self.stated = stated
        super().__init__(
            supported_entities=[stated.entity], name=f"Stated{stated.entity.title()}Recognizer"
        )

    def load(self) -> None:
        """Nothing to load: one compiled expression."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        found = []
        check = self.stated.valid
        for match in self.stated.pattern.finditer(text):
            value = match.group("value")
            if check is None or check(value):
                start, end = match.span("value")
                found.append(RecognizerResult(self.stated.entity, start, end, self.stated.score))
        return found


def stated_recognizers() -> list[LocalRecognizer]:
    return [StatedRecognizer(s) for s in STATED]
