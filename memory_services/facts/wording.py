"""How a statement is worded, folded before the slot rules (:mod:`.slots`) read it.

A statement is case-folded and its contractions spelled out, then cut into its clauses
("I'm not in Paris any more; I moved to Berlin": two), each read on its own with its own
negation, and its cues of change ("now", "any more", "as of last month") set aside. Tense
and aspect are folded into the present ("I've been living in", "I'm living in": "i live
in"), a dropped "I" put back, catenatives dropped ("I ended up moving to": "i moved to").
Grammar, not the words of a test: each fold names a form of English, and a clause says only
what its own words say (what another clause says of work or home decides how "I'm at X" and
"I'm in X" read, below).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_SPACE = re.compile(r"\s+")
_CONTRACTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"\b(i|we|you|they)'ve\b"), r"\1 have"),
    (re.compile(r"\b(we|you|they)'re\b"), r"\1 are"),
    (re.compile(r"\b(?:can't|cannot)\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\b([a-z]+)n't\b"), r"\1 not"),
    # "'s" where no possessed noun follows is "is"/"has": "my home's in X", "Anna's my
    # girlfriend", "she's been"; "my girlfriend's name" stays a possessive.
    (re.compile(r"\b([a-z]+)'s (?=(?:been|got|gone|had)\b)"), r"\1 has "),
    (re.compile(r"\b([a-z]+)'s (?=(?:in|at|from|on|with|not|no|now|a|an|the|my|our|your|his|"
                r"her|their|back|over|gone|allergic|married|engaged|dating|seeing)\b)"),
     r"\1 is "),
]  # fmt: skip

#: Words that say a value changed; set aside before the rules read the text. Time phrases
#: relative to now ("as of last month", "since this spring", "two weeks ago") are cues too.
_UNITS = r"(?:year|month|week|spring|summer|autumn|fall|winter|weekend)"
_CUES = re.compile(
    r"\b(now|currently|current|nowadays|these days|recently|lately|just|since then|again|"
    r"once (?:more|again)|instead|any ?more|any longer|at the moment|at present|of late|"
    rf"from now on|for good|as of (?:today|now|late|(?:this|last) {_UNITS})|"
    rf"since (?:this|last) {_UNITS}|(?:this|last) {_UNITS}|"
    rf"(?:a|one|two|three|four|five|six|a few|a couple of|several) {_UNITS}s? ago)\b"
)
#: Verbs that say a value changed: a cue, and a past tense that is no history ("I joined").
_CHANGE_VERBS = re.compile(
    r"\b(moved|relocated|switched|changed|joined|started|became|new|hired|rehomed|"
    r"broke up|split up)\b"
)
_MORE_CUES = re.compile(
    r"\b(become|settled|turned|gone|went|adopted|married|engaged|outgrew|outgrown|developed|"
    r"back|returned|ended up|decided|stopped|no longer)\b"
)
_PAST = re.compile(r"\b(used to|previously|formerly|back then|once|lived|worked|was|were|had)\b")
#: A present perfect that still holds ("I've lived here for years"): not history.
_CONTINUING = re.compile(
    r"\b(?:have|has) (lived|worked|resided)\b(?=.*\b(?:for|since) (?:a|an|one|two|three|four|"
    r"five|six|seven|eight|nine|ten|many|several|some|the|ages|years|months|(?:19|20)\d\d))"
)
_TRAILING_TIME = re.compile(
    r"\s+(?:for (?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|many|several|some)? ?"
    r"(?:few |couple of )?(?:years?|months?|weeks?|days?|while|ages|decades?|long)|"
    r"since (?:(?:19|20)\d\d|then|forever))$"
)
_FILLERS = re.compile(
    r"^(?:so|well|oh|also|and|but|yes|ok|okay|hey|hi|actually|anyway|btw|fyi|by the way|"
    r"just so you know|heads up|guess what|update|quick update|news|(?:it )?turns out|"
    r"(?:after|following|since) (?:the|my|our) [a-z]+)[,:!]? "
)
#: "Stopped being X" says "am not X" (a negation, below).
_STOPPED = re.compile(r"\b(?:stopped|quit|gave up|am done) being\b")
#: Negations, folded into one flag: "don't live" reads as "live", negative.
_NEGATIONS = [
    (re.compile(r"\b(?:do|does|did) not\s+"), ""),
    (re.compile(r"\b(am|is|are) not\b"), r"\1"),
    (re.compile(r"\bno longer\s+"), ""),
    (re.compile(r"\bnot\s+"), ""),
]
_BASE = {
    "living": "live", "residing": "reside", "working": "work", "eating": "eat",
    "following": "follow", "trying": "try", "renting": "rent", "settling": "settle",
    "doing": "do",
}  # fmt: skip
_PAST_OF = {
    "moving": "moved", "relocating": "relocated", "joining": "joined", "going": "went",
    "getting": "got", "taking": "took", "switching": "switched", "living": "live",
    "working": "work", "taken": "took", "gotten": "got", "begun": "began",
    "broken up": "broke up",
}  # fmt: skip


def _by(table: dict[str, str], group: int = 1) -> Callable[[re.Match[str]], str]:
    return lambda m: table.get(m[group], m[group])


#: Forms folded into one before the rules: the tense and aspect of a present state ("I've
#: been living", "I'm living": "i live"), auxiliaries before a change verb ("I have moved"),
#: catenatives ("ended up moving", "decided to"), where one moved "from" (the old value,
#: said elsewhere), and a dropped "I" ("Just settled in Oslo", "Now living in Oslo").
_FOLDS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"\b(a|my|our|the user's) new\b"), r"\1"),
    (re.compile(r"\b(i|we|you|they) have got\b"), r"\1 have"),
    (re.compile(r"\bhas got\b"), "has"),
    (re.compile(r"\b(?:have|has|am|is|are) been (living|residing|working|staying|eating|"
                r"following|renting)\b"), _by(_BASE)),
    (re.compile(r"\b(?:am|is|are) (living|residing|working|eating|following|trying|renting|"
                r"settling|doing)\b"), _by(_BASE)),
    (re.compile(r"\b(i|we|the user) (?:have|has) been\b"), r"\1 am"),
    (re.compile(r"\b(?:has|have) been\b"), "is"),
    (re.compile(r"\bended up (moving|relocating|joining|going|getting|taking|switching|"
                r"living|working)\b"), _by(_PAST_OF)),
    (re.compile(r"\b(?:have|has) (taken|gotten|begun|broken up)\b"), _by(_PAST_OF)),
    (re.compile(r"\b(?:have|has) (moved|relocated|settled|joined|gone|become|switched|started|"
                r"adopted|married|outgrown|developed|turned|decided|accepted|changed|returned|"
                r"landed|found|quit|left|divorced|separated|rehomed|split up|"
                r"cleared up|disappeared)\b"), r"\1"),
    (re.compile(r"\b(?:decided|chose|started|began) to (?!go\b)"), ""),
    (re.compile(r"\b(moved|relocated|switched|changed|went|transferred) from [a-z' -]+? to\b"),
     r"\1 to"),
    (re.compile(r"\bliving\b"), "live"),
    (re.compile(r"\bresiding\b"), "reside"),
    (re.compile(r"\bworking\b"), "work"),
    (re.compile(r"^(?=(?:moved|relocated|settled|live|reside|work|joined|started|took|got|"
                r"switched|went|became|adopted|married|accepted|rented|found|broke|split|"
                r"left|quit) )"), "i "),
    # Not "seeing": "Seeing the sun set made me ..." is a gerund, no dropped "I".
    (re.compile(r"^(?=(?:dating|engaged|based|allergic) )"), "i am "),
]  # fmt: skip

#: Where one clause ends and the next begins: a sentence's end, a semicolon or a comma, a
#: dash, and "and"/"but"/"so" before a new subject ("I left Acme and I work at Globex").
_CLAUSES = re.compile(
    r"(?:[.!;]\s+|,\s+|\s+[-\u2013\u2014]\s+|,?\s+(?:and|but|so)\s+(?=(?:i|we|the user)\s))"
)
_SUBJECT_FIRST = re.compile(r"^(?:i|we|the user)\s")
#: "I packed up and moved to Oslo": the second verb read with the first one's subject.
_COORDINATED = re.compile(r"^(?P<s>i|we|the user) [a-z ,']+? and (?P<rest>[a-z].*)$")
#: What another clause says decides what "I'm at X" and "I'm in X" say: work ("I changed
#: jobs, I'm at X") or home ("I no longer live in Paris; I'm in Berlin"). A visit, a trip or
#: today's whereabouts say no home.
_AT_WORK = re.compile(
    r"\b(?:jobs?|employers?|work|works|worked|career|hired|quit|offer|position|role|payroll|"
    r"company|boss)\b"
)
#: Only a name: "at the gym", "in a meeting", "in my car" say where one is, not for whom one
#: works or where one lives.
_AT = re.compile(r"^(i|we|the user) (?:am|is|are) at (?!(?:the|a|an|my|our|home|work)\b)")
_AT_HOME = re.compile(
    r"\b(?:live|lives|lived|living|moved|move|moving|relocated|home|flat|apartment|house|"
    r"address|reside|resides)\b"
)
#: "I've been at X since the summer": being at a named place for a while is working there.
_BEEN_AT = re.compile(
    r"^(i|we|the user) (?:have|has) been at (?!(?:the|a|an|my|our|home|work)\b)"
    r"(?=[a-z][a-z -]*? (?:for|since) )"
)
_IN = re.compile(r"^(i|we|the user) (?:am|is|are) in (?!(?:the|a|an|my|our|bed|town)\b)")
_VISIT = re.compile(
    r"\b(?:right now|at the moment|for now|for the moment|today|tonight|week|weekend|trip|"
    r"visit|visiting|holiday|vacation|conference|"
    r"interview|meeting|event|party|appointment|for (?:work|business|a few days))\b"
)


@dataclass(frozen=True, slots=True)
class Clause:
    """One clause as the rules read it: folded, its cues and negation set aside."""

    text: str
    negative: bool


def folded(text: str) -> str:
    """Case-folded, one space between words, contractions spelled out ("i'm": "i am")."""
    text = _SPACE.sub(" ", text.casefold().replace("\u2019", "'")).strip()
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


def says_change(text: str) -> bool:
    """Whether ``text`` (folded) says a value changed ("now", "moved", "any more")."""
    return any(p.search(text) for p in (_CUES, _CHANGE_VERBS, _MORE_CUES))


def without_cues(text: str) -> str:
    return _SPACE.sub(" ", _CUES.sub("", text)).strip(" ,")


def clauses(text: str) -> list[Clause]:
    """``text`` (folded) as the rules read it: each clause, first to last, then with the
    first verb's subject given to a coordinated second; the whole text last (its negation
    from anywhere in it). A clause that tells of history ("used to", "lived") is left out."""
    parts = [p.strip(" ,") for p in _CLAUSES.split(text) if p.strip(" ,")]
    context = (_AT_WORK.search(text) is not None, _AT_HOME.search(text) is not None)
    found: list[Clause] = []
    for part in parts if len(parts) > 1 else []:
        found += _read_clause(part, context)
    return found + _read_clause(text, context)


def _read_clause(text: str, context: tuple[bool, bool]) -> list[Clause]:
    out = []
    if (clause := _clause(text, context)) is not None:
        out.append(clause)
    if (m := _COORDINATED.match(text)) is not None:
        rest = m["rest"] if _SUBJECT_FIRST.match(m["rest"]) else f"{m['s']} {m['rest']}"
        if (clause := _clause(rest, context)) is not None:
            out.append(clause)
    return out


def _clause(text: str, context: tuple[bool, bool]) -> Clause | None:
    text = _CONTINUING.sub(lambda m: {"lived": "live", "worked": "work"}.get(m[1], "reside"), text)
    text = _BEEN_AT.sub(r"\1 work at ", text)
    visit = _VISIT.search(text)
    text = without_cues(text)
    while (stripped := _FILLERS.sub("", text)) != text:
        text = stripped
    if not visit:  # "I'm at X" / "I'm in X" where the text speaks of work / home
        text = _AT.sub(r"\1 work at ", text) if context[0] else text
        text = _IN.sub(r"\1 live in ", text) if context[1] else text
    if _PAST.search(text) and not _CHANGE_VERBS.search(text):
        return None  # history ("used to", "lived"), not the current value
    text = _STOPPED.sub("am not", text)
    negative = False
    for pattern, replacement in _NEGATIONS:
        text, n = pattern.subn(replacement, text)
        negative = negative or n > 0
    text = _TRAILING_TIME.sub("", _SPACE.sub(" ", text).strip(" ,"))
    for fold, by in _FOLDS:  # spaces made even again only where a fold changed the text
        text, n = fold.subn(by, text)
        text = _SPACE.sub(" ", text).strip(" ,") if n else text
    return Clause(text, negative) if text else None
