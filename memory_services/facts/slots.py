"""What a fact says about whom: its subject, attribute and value (a "slot"), read by rule.

"I live in Berlin", "The user now lives in Paris" and "I don't live in Paris any more" fill
one slot (the user's residence) with Berlin, Paris and not-Paris: a later one updates the
earlier (:mod:`.changes`). The rules are a closed list of the attributes personal memory
holds most (where one lives, works, what one eats or is allergic to, partner, pet, name,
"my X is Y", favourites), in first or third person; a fact they do not read has no slot and
is never superseded by rule (an LLM may still say it is: the learner asks one). Past and
habitual statements ("I used to live in Rome", "I lived in Rome in 2019") fill no slot: they
describe history, not the current value. Before the rules, the wording is folded and cut
into clauses (:mod:`.wording`: tense and aspect, a dropped "I", cues such as "these days"
set aside, each clause its own negation), and each clause read as told and the other way
round ("Lisbon is my home"). Only a one-word subject is read, so other people's news ("my
sister just moved to Paris") fills none of the user's slots. Measured on generated update
chains in six wording splits, each blind to one version of the rules
(``benchmarks/update_chains.py``, ``docs/memory-updates.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memory_services.facts import wording

#: The rules' version, kept with each fact they read (``slot_rules``): a fact that an
#: older version could not read is read again when a service opens the store. 1: the first
#: rules; 2: tense and aspect folded, subject-less and inverted wordings, more verbs; 3:
#: clauses read apart (each its own negation), "'s" and "n't" spelled out, relative time
#: phrases as cues, catenatives, break-ups, dwellings, "X hired me", "X is where I live".
RULES_VERSION = 3

#: Attributes that may hold several values at once (two pets): only a fact with an update
#: cue ("now", "any more", ...) replaces another value there.
MULTI = frozenset({"pet"})

_SUBJECT = r"(?P<s>i|we|the user|user|[a-z][a-z-]+)"
_POSSESSOR = r"(?P<s>my|our|the user's|user's|[a-z][a-z-]+'s)"
_BE = r"(?:'m|am|is|'s|are)"
_PETS = "dog|cat|puppy|kitten|parrot|rabbit|hamster|fish|turtle|horse|snake|bird|guinea pig"
_PARTNERS = "partner|wife|husband|girlfriend|boyfriend|spouse|fiance|fiancee|fiancé|fiancée"
_COUPLED = "dating|seeing|married to|engaged to|in a relationship with|going out with"
_KIND = "[a-z]+(?: [a-z]+)?"
_DIETS = (
    "vegetarian|vegan|pescatarian|carnivore|omnivore|flexitarian|keto|paleo|"
    "gluten-free|lactose-free|dairy-free|halal|kosher"
)
_BECOME = "went|gone|go|turned|became|become|switched to being|switched to|decided to go"
_HOMES = "home|city|hometown|town|place|base"
_EMPLOYERS = "employer|company|workplace|firm"
_JOB_AT = r"(?:a (?:new )?job|work|working|a (?:new )?position|a (?:new )?role)"
_ENDED = "is gone|has gone|went away|is over|ended|disappeared|cleared up|cleared|faded"
_BACK = "is back|came back|returned|has returned"
#: What one lives in: "I rent a flat in X", "our apartment is in X".
_DWELLINGS = "flat|apartment|house|place|home|condo|room"
#: "My X is Y" with one Y at a time ("my sister is ..." may name another sister: not here).
_SINGLE = (
    "phone number|phone|mobile number|email address|email|address|age|birthday|car|username|"
    "nickname|job title|title|role|salary|team|manager|boss|doctor|dentist|school|university|"
    "major|gym|bank|time ?zone|religion|landlord|zip code|postcode"
)


@dataclass(frozen=True, slots=True)
class _Rule:
    attribute: str
    pattern: re.Pattern[str]
    #: What the wording itself says: that the value no longer holds ("my X allergy is gone"),
    #: or that it changed ("... is back").
    negative: bool = False
    cue: bool = False


def _r(attribute: str, pattern: str, *, negative: bool = False, cue: bool = False) -> _Rule:
    return _Rule(attribute, re.compile(pattern), negative, cue)


#: The first that matches wins; ``v`` is the value, ``a`` a part of the attribute (the
#: allergen, the favourite's kind). Verbs per attribute are the common English ones for it.
_RULES: list[_Rule] = [
    _r("allergy:{a}", rf"^{_SUBJECT} {_BE} allergic to (?P<a>.+)$"),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:has|have) (?:an?|the|my|our) (?P<a>.+?) allergy$"),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:has|have) an allergy to (?P<a>.+)$"),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:developed|got) an allergy to (?P<a>.+)$", cue=True),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:developed|got) an? (?P<a>.+?) allergy$", cue=True),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:became|become) allergic to (?P<a>.+)$", cue=True),
    _r("allergy:{a}", rf"^(?:{_POSSESSOR}|the) (?P<a>.+?) allergy (?:{_ENDED})$", negative=True),
    _r("allergy:{a}", rf"^(?:{_POSSESSOR}|the) allergy to (?P<a>.+?) (?:{_ENDED})$",
       negative=True),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:outgrew|outgrown|got over|grew out of) "
       rf"(?:my|our|his|her|their|the) (?P<a>.+?) allergy$", negative=True),
    _r("allergy:{a}", rf"^{_SUBJECT} (?:outgrew|outgrown|got over|grew out of) "
       rf"(?:my|our|his|her|their|the) allergy to (?P<a>.+)$", negative=True),
    _r("allergy:{a}", rf"^(?:{_POSSESSOR}|the) (?P<a>.+?) allergy (?:{_BACK})$", cue=True),
    _r("allergy:{a}", rf"^(?:{_POSSESSOR}|the) allergy to (?P<a>.+?) (?:{_BACK})$", cue=True),
    _r("residence", rf"^{_SUBJECT} (?:live|lives|reside|resides) in (?P<v>.+)$"),
    _r("residence", rf"^{_SUBJECT} (?:{_BE} )?(?:moved|relocated)(?: house| back| over)? to "
       rf"(?P<v>.+)$"),
    _r("residence", rf"^{_SUBJECT} (?:{_BE} )?settled in (?P<v>.+)$"),
    _r("residence", rf"^{_SUBJECT} {_BE} based in (?P<v>.+)$"),
    _r("residence", rf"^{_SUBJECT} (?:call|calls) (?P<v>.+?) home$"),
    _r("residence", rf"^{_SUBJECT} (?:rent|rents|rented|found|got|bought|moved into|settled into|"
       rf"settle into) (?:an?|my|our) (?:{_DWELLINGS}) in (?P<v>.+)$", cue=True),
    _r("residence", rf"^{_POSSESSOR} (?:{_DWELLINGS}) is in (?P<v>.+)$"),
    _r("residence", rf"^(?:{_POSSESSOR} )?(?:{_HOMES})(?: for me)? is (?:in )?(?P<v>.+)$"),
    _r("employer", rf"^{_SUBJECT} (?:work|works) (?:as an? [a-z -]+? )?(?:at|for) (?P<v>.+)$"),
    _r("employer", rf"^{_POSSESSOR} (?:job|work|position|role) is (?:at|with|for) (?P<v>.+)$"),
    _r("employer", rf"^{_SUBJECT} {_BE} employed (?:at|by) (?P<v>.+)$"),
    _r("employer", rf"^{_SUBJECT} (?:was|were|got|{_BE}) hired (?:at|by) (?P<v>.+)$", cue=True),
    # "Joined a program / a club" is no employer: one joins a named company.
    _r("employer", rf"^{_SUBJECT} (?:joined (?!an? )|started (?:{_JOB_AT} )?(?:at|for|with) )"
       rf"(?P<v>.+)$"),
    _r("employer", rf"^{_SUBJECT} (?:took|got|have|has|landed|accepted|found) {_JOB_AT} "
       rf"(?:at|with|for) (?P<v>.+)$"),
    _r("employer", rf"^{_SUBJECT} accepted (?:an offer|a job offer) from (?P<v>.+)$", cue=True),
    _r("employer", rf"^{_POSSESSOR} (?:{_EMPLOYERS}) is (?P<v>.+)$"),
    _r("employer", rf"^{_SUBJECT} {_BE} an? (?!regular|member|customer|guest|student)"
       rf"[a-z-]+(?: [a-z-]+)? at (?P<v>.+)$"),
    _r("job", rf"^{_SUBJECT} (?:work|works) as an? (?P<v>.+)$"),
    _r("job", rf"^{_POSSESSOR} (?:job|occupation|profession) is (?:an? )?(?P<v>.+)$"),
    _r("diet", rf"^{_SUBJECT} {_BE} (?:an? )?(?:strict )?(?P<v>{_DIETS})\b.*$"),
    _r("diet", rf"^{_SUBJECT} (?:{_BECOME}) (?:an? )?(?:strict )?(?P<v>{_DIETS})\b.*$"),
    _r("diet", rf"^{_SUBJECT} (?:eat|eats) (?P<v>{_DIETS})$"),
    _r("diet", rf"^{_SUBJECT} {_BE} on (?P<v>{_DIETS})$"),
    _r("diet", rf"^{_SUBJECT} (?:follow|follows|eat|eats|{_BE} on|try|tries|started|stick to|"
       rf"sticks to|keep to|keeps to|do|does) an? (?P<v>.+?) diet$"),
    _r("diet", rf"^{_SUBJECT} (?:switched|changed|moved) to an? (?P<v>.+?) diet$"),
    _r("diet", rf"^{_SUBJECT} (?:switched|changed) (?:my|our|the) diet to (?:an? )?"
       rf"(?P<v>.+?)(?: diet)?$", cue=True),
    _r("diet", rf"^{_POSSESSOR} diet is (?:an? )?(?P<v>.+?)(?: diet)?$"),
    _r("eats:{a}", rf"^{_SUBJECT} (?:eat|eats) (?P<a>meat|fish|dairy|eggs|pork|beef)$"),
    _r("partner", rf"^{_POSSESSOR} (?:{_PARTNERS})(?:'s name)? is (?:called |named )?(?P<v>.+)$"),
    _r("partner", rf"^{_SUBJECT} {_BE} (?:{_COUPLED}) (?P<v>.+)$"),
    _r("partner", rf"^{_SUBJECT} (?:date|dates) (?P<v>.+)$"),
    _r("partner", rf"^{_SUBJECT} (?:broke up|split up|separated|split) (?:with|from) (?P<v>.+)$",
       negative=True),
    _r("partner", rf"^{_SUBJECT} divorced (?P<v>[a-z][a-z-]*)$", negative=True),
    _r("partner", r"^(?P<v>[a-z][a-z-]*) and (?P<s>i|we) (?:broke up|split up|separated|split|"
       r"divorced|are over|are done)$", negative=True),
    _r("partner", rf"^{_SUBJECT} (?:have|has|found|met|got) an? (?:{_PARTNERS})"
       rf"(?:,| named| called)? (?P<v>[a-z][a-z-]*)$", cue=True),
    _r("partner", rf"^{_SUBJECT} (?:live|lives|moved in) with (?:my|our|his|her) "
       rf"(?:{_PARTNERS}),? (?P<v>[a-z][a-z-]*)$"),
    _r("partner", rf"^{_SUBJECT} (?:married|got married to|got engaged to|started dating|"
       rf"started seeing) (?P<v>.+)$", cue=True),
    _r("partner", r"^(?P<v>[a-z][a-z-]*) and (?P<s>i) (?:got married|are married|got engaged|"
       r"are engaged|are dating|are together|am married|am engaged|am dating|am together)$"),
    _r("partner", rf"^{_SUBJECT} {_BE} (?P<v>single)$"),
    _r("pet", rf"^{_SUBJECT} (?:has|have|got|adopted|own|owns|bought) an? (?:pet,? an? )?"
       rf"(?P<v>(?:{_PETS})\b.*)$"),
    _r("pet", rf"^{_POSSESSOR} pet is (?:an? )?(?P<v>.+)$"),
    _r("name", rf"^{_POSSESSOR} name is (?P<v>.+)$"),
    _r("name", r"^(?P<s>i) (?:am|'m) called (?P<v>.+)$"),
    _r("favourite:{a}", rf"^{_POSSESSOR} favou?rite (?P<a>{_KIND}) is (?P<v>.+)$"),
    _r("{a}", rf"^{_POSSESSOR} (?P<a>{_SINGLE}) (?:is|are) (?P<v>.+)$"),
]  # fmt: skip
#: What no value is: "it is my birthday", "the company hired me".
_NO_VALUE = r"(?!(?:it|this|that|there|here|he|she|they|what|who|which|the|a|an|his|her|their)\b)"
#: "Lisbon is my home", "Anna is my girlfriend": read as "my home is Lisbon".
_INVERTED = re.compile(
    rf"^{_NO_VALUE}(?P<v>[a-z][a-z' -]*?) (?:is|are) (?P<p>my|our|the user's) (?P<n>(?:{_HOMES}|"
    rf"{_EMPLOYERS}|{_PARTNERS}|pet|diet|job|{_SINGLE}))$"
)
_HOME_INVERTED = re.compile(rf"^{_NO_VALUE}(?P<v>[a-z][a-z' -]*?) is (?:my |our )?home$")
_WHERE_INVERTED = re.compile(
    rf"^{_NO_VALUE}(?P<v>[a-z][a-z' -]*?) is where (?P<s>i|we|the user) "
    r"(?P<verb>live|lives|work|works)$"
)
_HIRED_INVERTED = re.compile(
    rf"^{_NO_VALUE}(?P<v>[a-z][a-z' -]*?) (?:hired|employs|took on|has hired|offered a job to) "
    r"(?:me|us|the user)$"
)
#: "I can't eat shellfish, I'm allergic": what one avoids is what one is allergic to.
_ALLERGIC_BECAUSE = re.compile(
    r"^(?P<s>i|we|the user) (?:(?:can|do|does|must|should) not |can )?(?:eat|have|take|drink|"
    r"touch|tolerate|"
    r"be around|react badly to|react to) (?P<a>[a-z][a-z -]*?),? (?:i|we|the user) "
    r"(?:am|is|are) allergic(?: to (?:it|them))?$"
)
#: Where a value ends: what follows is circumstance, not the value.
_VALUE_END = re.compile(
    r"\s*(?:,|;|\bwith\b|\bsince\b|\bfor\b|\bbecause\b|\bbut\b|\bas of\b|\bfrom\b|"
    r"\buntil\b|\bas an?\b|\bin (?:19|20)\d\d\b|\bin (?:january|february|march|april|may|june|"
    r"july|august|september|october|november|december|spring|summer|autumn|fall|winter)\b).*$"
)
_ARTICLES = re.compile(r"^(?:the|a|an)\s+")
_SPACE = re.compile(r"\s+")
#: Words no subject is ("it is", "there is"): a rule matching them reads nothing.
_NOT_SUBJECTS = frozenset(
    ["it", "this", "that", "there", "here", "he", "she", "they", "you", "who", "what", "which"]
)
#: Words that end a phrase but name nothing: no value.
_NO_VALUES = frozenset(["in", "up", "it", "them", "us", "there", "here", "over", "back", "on"])
#: How a description starts, never a name: a degree word or a likeness.
_NOT_A_NAME = re.compile(
    r"^(?:like|so|very|super|really|such|quite|pretty|too|always|never|still|also|kind of|"
    r"sort of|a bit|a little|more|less|much|totally|truly|definitely)\b"
)
_SELF = frozenset({"i", "we", "my", "our", "the user", "user", "the user's", "user's"})


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


@lru_cache(maxsize=2048)  # a fact batch reads its texts before its write lock (ingest)
def read(content: str) -> Slot | None:
    """The slot ``content`` fills, or None if no rule reads it. Each clause is read on its
    own (:func:`.wording.clauses`); the first reading wins, except that a negation gives way
    to a clause saying what holds instead ("I'm not in Paris any more, I moved to Berlin")."""
    text = wording.folded(content).rstrip(".!")
    if not text or len(text) > 300 or "?" in text:
        return None
    cue = wording.says_change(text)
    if m := _ALLERGIC_BECAUSE.match(wording.without_cues(text)):  # its "not" is the reason's
        return _match(f"{m['s']} am allergic to {m['a']}", False, cue)
    found: list[Slot] = []
    for clause in wording.clauses(text):
        for candidate in _readings(clause.text):
            if (slot := _match(candidate, clause.negative, cue)) is not None:
                found.append(slot)
                break
    if not found:
        return None
    first = found[0]
    if first.negative:
        return next((s for s in found if s.key == first.key and not s.negative), first)
    return first


def _readings(text: str) -> list[str]:
    """The text, then the same said the other way round ("Lisbon is my home", "X hired
    me", "X is where I live")."""
    readings = [text]
    if m := _INVERTED.match(text):
        readings.append(f"{m['p']} {m['n']} is {m['v']}")
    if m := _HOME_INVERTED.match(text):
        readings.append(f"home is {m['v']}")
    if m := _WHERE_INVERTED.match(text):
        at = "in" if m["verb"].startswith("l") else "at"
        readings.append(f"{m['s']} {m['verb']} {at} {m['v']}")
    if m := _HIRED_INVERTED.match(text):
        readings.append(f"i was hired by {m['v']}")
    return readings


def _match(text: str, negative: bool, cue: bool) -> Slot | None:
    for rule in _RULES:
        if (match := rule.pattern.match(text)) is None:
            continue
        found = match.groupdict()
        subject = found.get("s") or "my"
        if subject in _NOT_SUBJECTS:
            return None
        subject = "self" if subject in _SELF else subject.removesuffix("'s")
        part = _value(found.get("a") or "")
        value = _value(found.get("v") or "")
        if (found.get("a") is not None and not part) or (found.get("v") is not None and not value):
            return None
        if value in _NO_VALUES or part in _NO_VALUES or _NOT_A_NAME.match(value):
            return None  # "I joined in", "my team is like a family", "... super kind"
        return Slot(
            subject,
            rule.attribute.format(a=part),
            value,
            negative != rule.negative,
            cue or rule.cue,
        )
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
    text = wording.folded(question).rstrip("?.! ")
    text = _YEAR_END.sub("", wording.without_cues(text))
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
