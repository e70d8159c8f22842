"""What a fact says about whom: its subject, attribute and value (a "slot"), read by rule.

"I live in Berlin", "The user now lives in Paris" and "I don't live in Paris any more" fill
one slot (the user's residence) with Berlin, Paris and not-Paris: a later one updates the
earlier (:mod:`.changes`). The rules are a closed list of the attributes personal memory
holds most (where one lives, works, what one eats or is allergic to, partner, pet, name,
"my X is Y", favourites), in first or third person; a fact they do not read has no slot and
is never superseded by rule (an LLM may still say it is: the learner asks one). Past and
habitual statements ("I used to live in Rome", "I lived in Rome in 2019") fill no slot: they
describe history, not the current value. Measured on generated update chains
(``benchmarks/update_chains.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Attributes that may hold several values at once (two pets): only a fact with an update
#: cue ("now", "any more", ...) replaces another value there.
MULTI = frozenset({"pet"})

#: Words that say a value changed; removed before the rules read the text.
_CUES = re.compile(
    r"\b(now|currently|nowadays|these days|recently|since then|again|instead|"
    r"any ?more|at the moment|at present|as of (?:today|now))\b"
)
_CHANGE_VERBS = re.compile(r"\b(moved|relocated|switched|changed|joined|started|became|new)\b")
_PAST = re.compile(r"\b(used to|previously|formerly|back then|once|lived|worked|was|were|had)\b")
#: Negations, folded into one flag: "don't live" reads as "live", negative.
_NEGATIONS = [
    (re.compile(r"\b(?:do|does|did)(?:n't| not)\s+"), ""),
    (re.compile(r"\b(am|is|are)(?:n't| not)\b"), r"\1"),
    (re.compile(r"\b(?:i'm|i am) not\b"), "i am"),
    (re.compile(r"\bno longer\s+"), ""),
    (re.compile(r"\bnot\s+"), ""),
]
_SUBJECT = r"(?P<s>i|the user|user|[a-z][a-z-]+)"
_POSSESSOR = r"(?P<s>my|the user's|user's|[a-z][a-z-]+'s)"
_BE = r"(?:'m|am|is|'s|are)"
_PETS = "dog|cat|puppy|kitten|parrot|rabbit|hamster|fish|turtle|horse|snake|bird|guinea pig"
_PARTNERS = "partner|wife|husband|girlfriend|boyfriend|spouse|fiance|fiancee|fiancé|fiancée"
_COUPLED = "dating|seeing|married to|engaged to"
_KIND = "[a-z]+(?: [a-z]+)?"
_DIETS = (
    "vegetarian|vegan|pescatarian|carnivore|omnivore|flexitarian|keto|paleo|"
    "gluten-free|lactose-free|dairy-free|halal|kosher"
)
#: "My X is Y" with one Y at a time ("my sister is ..." may name another sister: not here).
_SINGLE = (
    "phone number|phone|mobile number|email address|email|address|age|birthday|car|username|"
    "nickname|job title|title|role|salary|team|manager|boss|doctor|dentist|school|university|"
    "major|gym|bank|time ?zone|religion|landlord|zip code|postcode"
)
#: (attribute, pattern): the first that matches wins; ``v`` is the value, ``a`` a part of
#: the attribute (the allergen, the favourite's kind).
_RULES: list[tuple[str, re.Pattern[str]]] = [
    (r"allergy:{a}", re.compile(rf"^{_SUBJECT} {_BE} allergic to (?P<a>.+)$")),
    (r"allergy:{a}", re.compile(rf"^{_SUBJECT} (?:has|have) an? (?P<a>.+?) allergy$")),
    ("residence", re.compile(rf"^{_SUBJECT} (?:live|lives|living) in (?P<v>.+)$")),
    ("residence", re.compile(rf"^{_SUBJECT} (?:{_BE} )?(?:moved|relocated) to (?P<v>.+)$")),
    ("residence", re.compile(rf"^{_SUBJECT} {_BE} based in (?P<v>.+)$")),
    ("residence", re.compile(rf"^{_POSSESSOR} (?:home|city|hometown) is (?:in )?(?P<v>.+)$")),
    ("employer", re.compile(rf"^{_SUBJECT} (?:work|works|working) (?:at|for) (?P<v>.+)$")),
    ("employer", re.compile(rf"^{_SUBJECT} {_BE} employed (?:at|by) (?P<v>.+)$")),
    ("employer", re.compile(rf"^{_SUBJECT} (?:joined|started (?:working )?at) (?P<v>.+)$")),
    ("employer", re.compile(rf"^{_POSSESSOR} (?:employer|company) is (?P<v>.+)$")),
    ("job", re.compile(rf"^{_SUBJECT} (?:work|works|working) as an? (?P<v>.+)$")),
    ("job", re.compile(rf"^{_POSSESSOR} (?:job|occupation|profession) is (?:an? )?(?P<v>.+)$")),
    ("diet", re.compile(rf"^{_SUBJECT} {_BE} (?:an? )?(?:strict )?(?P<v>{_DIETS})\b.*$")),
    ("diet", re.compile(rf"^{_SUBJECT} (?:follow|follows|eat|eats|on) an? (?P<v>.+?) diet$")),
    ("diet", re.compile(rf"^{_SUBJECT} (?:switched|changed|moved) to an? (?P<v>.+?) diet$")),
    ("diet", re.compile(rf"^{_POSSESSOR} diet is (?:an? )?(?P<v>.+?)(?: diet)?$")),
    ("eats:{a}", re.compile(rf"^{_SUBJECT} (?:eat|eats) (?P<a>meat|fish|dairy|eggs|pork|beef)$")),
    ("partner", re.compile(rf"^{_POSSESSOR} (?:{_PARTNERS}) is (?P<v>.+)$")),
    ("partner", re.compile(rf"^{_SUBJECT} {_BE} (?:{_COUPLED}) (?P<v>.+)$")),
    ("partner", re.compile(rf"^{_SUBJECT} {_BE} (?P<v>single)$")),
    ("pet", re.compile(rf"^{_SUBJECT} (?:has|have|got|adopted) an? (?P<v>(?:{_PETS})\b.*)$")),
    ("pet", re.compile(rf"^{_POSSESSOR} pet is (?:an? )?(?P<v>.+)$")),
    ("name", re.compile(rf"^{_POSSESSOR} name is (?P<v>.+)$")),
    ("name", re.compile(r"^(?P<s>i) (?:am|'m) called (?P<v>.+)$")),
    ("favourite:{a}", re.compile(rf"^{_POSSESSOR} favou?rite (?P<a>{_KIND}) is (?P<v>.+)$")),
    ("{a}", re.compile(rf"^{_POSSESSOR} (?P<a>{_SINGLE}) (?:is|are) (?P<v>.+)$")),
]  # fmt: skip
#: Where a value ends: what follows is circumstance, not the value.
_VALUE_END = re.compile(
    r"\s*(?:,|;|\bwith\b|\bsince\b|\bfor\b|\bbecause\b|\bbut\b|\bas of\b|\bfrom\b|"
    r"\buntil\b|\bin (?:19|20)\d\d\b|\bin (?:january|february|march|april|may|june|july|"
    r"august|september|october|november|december)\b).*$"
)
_CONTRACTIONS = [
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"\b(i|we|you|they)'ve\b"), r"\1 have"),
    (re.compile(r"\b(we|you|they)'re\b"), r"\1 are"),
    (re.compile(r"\b(do|does|did|is|are|was|were|have|has|had)n't\b"), r"\1 not"),
]
_ARTICLES = re.compile(r"^(?:the|a|an)\s+")
_SPACE = re.compile(r"\s+")
#: Words no subject is ("it is", "there is"): a rule matching them reads nothing.
_NOT_SUBJECTS = frozenset(
    ["it", "this", "that", "there", "he", "she", "they", "we", "you", "who", "what", "which"]
)
_SELF = frozenset({"i", "my", "the user", "user", "the user's", "user's"})


@dataclass(frozen=True, slots=True)
class Slot:
    subject: str
    attribute: str
    #: Normalised value ("" where the attribute is the whole claim: an allergy).
    value: str
    negative: bool
    #: The text says it changed ("now", "any more", "moved to").
    cue: bool

    @property
    def key(self) -> str:
        return f"{self.subject}|{self.attribute}"

    @property
    def multi(self) -> bool:
        return self.attribute in MULTI


def _folded(text: str) -> str:
    """Case-folded, one space between words, contractions spelled out ("i'm": "i am")."""
    text = _SPACE.sub(" ", text.casefold().replace("\u2019", "'")).strip()
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


@lru_cache(maxsize=2048)  # a fact batch reads its texts before its write lock (ingest)
def read(content: str) -> Slot | None:
    """The slot ``content`` fills, or None if no rule reads it."""
    text = _folded(content).rstrip(".!")
    if not text or len(text) > 300 or "?" in text:
        return None
    cue = bool(_CUES.search(text) or _CHANGE_VERBS.search(text))
    if _PAST.search(_CUES.sub("", text)) and not _CHANGE_VERBS.search(text):
        return None  # history ("used to", "lived"), not the current value
    text = _SPACE.sub(" ", _CUES.sub("", text)).strip(" ,")
    negative = False
    for pattern, replacement in _NEGATIONS:
        text, n = pattern.subn(replacement, text)
        negative = negative or n > 0
    text = _SPACE.sub(" ", text).strip(" ,")
    for attribute, rule in _RULES:
        if (match := rule.match(text)) is None:
            continue
        found = match.groupdict()
        subject = found["s"]
        if subject in _NOT_SUBJECTS:
            return None
        subject = "self" if subject in _SELF else subject.removesuffix("'s")
        part = _value(found.get("a") or "")
        value = _value(found.get("v") or "")
        if (found.get("a") is not None and not part) or (found.get("v") is not None and not value):
            return None
        return Slot(subject, attribute.format(a=part), value, negative, cue)
    return None


def _value(raw: str) -> str:
    value = _VALUE_END.sub("", raw).strip(" .,")
    value = _ARTICLES.sub("", value)
    # A plural is the same value ("peanuts", "peanut"); values are only compared.
    return (
        value[:-1] if len(value) > 3 and value.endswith("s") and not value.endswith("ss") else value
    )


def replaces(new: Slot, old: Slot) -> bool | None:
    """Whether ``new`` (the later) changes what ``old`` says: True (it does), False (both
    hold: a restatement, or another value of a many-valued attribute), None (not the same
    slot)."""
    if new.key != old.key:
        return None
    if new.value == old.value:
        return new.negative != old.negative  # "not any more", or back again
    if new.negative:
        return False  # "not in Paris" says nothing of Berlin
    return new.cue or not new.multi


#: Questions about a slot: (attribute, pattern); ``s`` the subject, ``a`` part of the
#: attribute. Read after the same folding as statements (cues and negations dropped).
_WHO, _DO = r"(?P<s>i|the user|[a-z]+)", r"(?:do|did|does)"
_ASKED: list[tuple[str, re.Pattern[str]]] = [
    ("residence", re.compile(rf"\bwhere {_DO} {_WHO} (?:live|reside)\b")),
    ("residence", re.compile(rf"\b(?:which|what) city {_DO} {_WHO} live\b")),
    ("residence", re.compile(rf"\bwhere (?:am|was|is) {_WHO} based\b")),
    ("employer", re.compile(rf"\bwho {_DO} {_WHO} work for\b")),
    ("employer", re.compile(rf"\bwhere {_DO} {_WHO} work\b")),
    ("employer", re.compile(rf"\b(?:which|what) company {_DO} {_WHO} work\b")),
    ("job", re.compile(rf"\bwhat (?:is|was|'s) {_POSSESSOR} (?:job|occupation|profession)\b")),
    ("diet", re.compile(rf"\bwhat (?:is|was|'s) {_POSSESSOR} diet\b")),
    ("allergy:{a}", re.compile(rf"\b(?:am|was|is|were) {_WHO} allergic to (?P<a>[a-z ]+)$")),
    ("pet", re.compile(rf"\bwhat (?:kind of )?pets? {_DO} {_WHO} (?:have|own)\b")),
    ("pet", re.compile(rf"\bwhat (?:is|was|'s) {_POSSESSOR} pet\b")),
    ("partner", re.compile(rf"\bwho (?:is|was|'s) {_POSSESSOR} (?:{_PARTNERS})\b")),
    ("partner", re.compile(rf"\bwho (?:am|was|is) {_WHO} (?:{_COUPLED})\b")),
    ("name", re.compile(rf"\bwhat (?:is|was|'s) {_POSSESSOR} name\b")),
    ("favourite:{a}", re.compile(rf"\bwhat (?:is|was|'s) {_POSSESSOR} favou?rite (?P<a>{_KIND})$")),
    ("{a}", re.compile(rf"\bwhat (?:is|was|'s|are|were) {_POSSESSOR} (?P<a>{_SINGLE})$")),
]  # fmt: skip
_YEAR_END = re.compile(r"\s+(?:in|during|back in|as of) (?:(?:19|20)\d\d|[a-z]+ (?:19|20)\d\d)$")


def asked(question: str) -> str | None:
    """The slot key a question asks about ("Where do I live?": the user's residence), or
    None."""
    text = _folded(question).rstrip("?.! ")
    text = _YEAR_END.sub("", _SPACE.sub(" ", _CUES.sub("", text)).strip())
    for attribute, rule in _ASKED:
        if (match := rule.search(text)) is None:
            continue
        found = match.groupdict()
        subject = found["s"]
        if subject in _NOT_SUBJECTS:
            return None
        subject = "self" if subject in _SELF else subject.removesuffix("'s")
        part = _value(found.get("a") or "")
        return f"{subject}|{attribute.format(a=part)}"
    return None
