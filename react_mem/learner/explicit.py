"""Memories the user asked for in so many words, found without the LLM.

"Please remember that I am allergic to peanuts" yields "The user is allergic to peanuts",
and "I'm Ada" yields "The user's name is Ada", whatever a small model makes of them (or
whether it answers at all). Facts are rewritten in the third person, so they read well out
of context. They always say "the user", never a name: a name is its own fact, and no other
fact depends on it being right.

Only requests at the start of a sentence or clause count ("I can't remember", "do you
remember the film?" do not), and a question counts only as a polite request ("could you
remember that ...?").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from react_mem.learner.extract import fact_key

#: Before the request: the start of a sentence or of a clause, then small talk.
_LEAD = r"(?:^|[,;:]\s*|\b(?:and|so|but|also)\s+)(?:(?:oh|ok|okay|hey|also|so|now|just)\b,?\s+)*"
_ASK = r"(?P<ask>(?:can|could|would|will)\s+you\s+)?(?:please\s+)?"
_VERB = r"(?:remember|(?:don't|do\s+not|never)\s+forget|(?:keep|bear)\s+in\s+mind)"
#: ``note`` needs ``that`` or a colon: "note the time" asks for nothing to be kept.
_REQUEST = re.compile(
    _LEAD
    + _ASK
    + r"(?:"
    + _VERB
    + r"(?:\s+(?:this|the\s+following))?(?:\s*[:,]\s*|\s+that\s+|\s+(?P<bare>))"
    + r"|(?:make\s+a\s+|take\s+)?note(?:\s+of\s+this)?(?:\s*:\s*|\s+that\s+))"
    + r"(?P<fact>\S.*)$",
    re.IGNORECASE,
)
#: What follows a request verb that is not a statement: "remember to ...", "remember when ...".
_NOT_A_STATEMENT = re.compile(
    r"(?:to|when|what|where|who|whom|why|how|if|whether|me)\b", re.IGNORECASE
)
#: Without ``that``, the rest must read as a statement: a first-person subject or a verb.
_STATEMENT = re.compile(
    r"^(?:i|i'm|i've|i'd|i'll)\b|\b(?:is|are|was|were|am|has|have|had|will|can|must)\b",
    re.IGNORECASE,
)
_TRAILER = re.compile(r"[\s,]*\b(?:please|thanks|thank\s+you|ok|okay)\W*$", re.IGNORECASE)
#: Sentence ends, but not after a title ("Dr. Smith").
_SENTENCES = re.compile(
    r"(?<=[.!?])" + "".join(rf"(?<!\b{t}\.)" for t in ("Dr", "Mr", "Ms", "Mrs", "St")) + r"\s+|\n+"
)

_NAME = r"[A-ZÀ-Þ][a-zß-ÿ]*(?:[-'][A-ZÀ-Þ][a-zß-ÿ]+)?"
_INTRO = re.compile(
    r"(?<![\w'])(?:(?i:my\s+name\s+is|my\s+name's)\s+(?P<full>"
    + _NAME
    + r"(?:\s+"
    + _NAME
    + r"){0,2})|(?i:i'm|i\s+am|call\s+me)\s+(?P<single>"
    + _NAME
    + r"))(?=\s*(?:$|[.,!?;:)]|\s(?i:and|but)\b))"
)
#: Capitalised words that follow "I'm" without being names.
_NOT_NAMES_WORDS = """
    a an the not so very just also still really here there back home from in at on by
    fine good great ok okay sorry sure happy sad tired hungry ready done new well glad
    busy free alone afraid bored curious lost confused late early right wrong sick ill
    married single retired pregnant vegan vegetarian allergic interested excited going
    trying looking planning thinking working living staying
    english british american canadian australian irish scottish welsh french german
    spanish italian portuguese dutch belgian swiss austrian swedish norwegian danish
    finnish polish czech russian ukrainian greek turkish chinese japanese korean indian
    pakistani mexican brazilian argentinian african european asian arab jewish muslim
    christian catholic protestant hindu buddhist atheist
"""

#: After "I": words that stay as they are (modals, past forms, negated auxiliaries).
_KEEP_WORDS = """
    will would can could should must may might shall was were had did used
    won't wouldn't can't cannot couldn't shouldn't mustn't mightn't wasn't weren't hadn't
    didn't went got made said saw took came knew thought bought brought taught caught ran
    ate drank left met lost found gave told felt became began wrote grew kept slept sent
    spent built heard held stood understood sat won paid fell flew drove rode broke spoke
    chose forgot wore sold sang swam threw fought hid led meant dealt learnt burnt
"""
_NOT_NAMES = frozenset(_NOT_NAMES_WORDS.split())
_KEEP = frozenset(_KEEP_WORDS.split())
_IRREGULAR = {
    "am": "is",
    "have": "has",
    "don't": "doesn't",
    "haven't": "hasn't",
}
#: Words after "I" that are not its verb: "I and my wife ...", "I too ...".
_NOT_VERBS = frozenset(("and", "or", "nor", "but", "too", "alone", "personally", "myself"))
#: Adverbs allowed between "I" and its verb: "I really like tea".
_ADVERB_WORDS = """
    really also always never usually often only just still sometimes rarely seldom
    definitely absolutely actually totally already mostly generally strongly truly
    certainly even normally mainly
"""
_ADVERBS = frozenset(_ADVERB_WORDS.split())
_TOKENS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|\s+|\S")


class _Unsure(Exception):
    """A first-person form the rewrite does not know how to turn into the third person."""


def explicit_facts(texts: Iterable[str], *, limit: int = 10, max_chars: int = 400) -> list[str]:
    """The facts asked to be remembered, and names given, in ``texts``; distinct, in order."""
    found: dict[str, str] = {}
    for text in texts:
        text = text.replace("\u2019", "'")
        for fact in [*_names(text), *_requests(text)]:
            if len(fact) <= max_chars:
                found.setdefault(fact_key(fact), fact)
    return list(found.values())[:limit]


def about_user(statement: str) -> str:
    """``statement``, said by the user, in the third person: "my dog is Rex" -> "The user's
    dog is Rex"; "The user said: ..." where a form is not understood."""
    statement = " ".join(statement.replace("\u2019", "'").split())
    try:
        text = _third_person(statement)
    except _Unsure:
        text = "The user said: " + statement
    return text[:1].upper() + text[1:] + ("" if text[-1:] in ".!?" else ".")


def _names(text: str) -> list[str]:
    names = []
    for m in _INTRO.finditer(text):
        name = m["full"] or m["single"]
        if len(name) > 1 and name.split()[0].casefold() not in _NOT_NAMES:
            names.append(f"The user's name is {name}.")
    return names


def _requests(text: str) -> list[str]:
    facts = []
    for sentence in _SENTENCES.split(text):
        sentence = sentence.strip()
        m = _REQUEST.search(sentence.rstrip(".!"))
        if m is None or (sentence.endswith("?") and not m["ask"]):
            continue
        while m is not None:
            said = m["fact"]
            # "remember that X and don't forget that Y": X, then Y.
            following = _REQUEST.search(said, 1)
            if following is not None:
                said = said[: following.start()]
            if fact := _statement(said, bare=m["bare"] is not None):
                facts.append(fact)
            m = following
    return facts


def _statement(said: str, *, bare: bool) -> str | None:
    said = _TRAILER.sub("", said).strip().rstrip(".!?,;").strip().strip("\"'")
    if (
        len(said.split()) < 2
        or _NOT_A_STATEMENT.match(said)
        or (bare and not _STATEMENT.search(said))
        or _INTRO.fullmatch(said)  # "remember that I'm Ada": the name fact says it
    ):
        return None
    return about_user(said)


def _third_person(text: str) -> str:
    tokens = _TOKENS.findall(text)
    words = [i for i, tok in enumerate(tokens) if not tok.isspace()]
    out = list(tokens)
    clause_start = 0
    for n, i in enumerate(words):
        word = tokens[i].casefold()
        if not tokens[i][0].isalpha():
            if word in ",;:":
                clause_start = n + 1
            continue
        if word in ("my", "mine"):
            out[i] = "the user's"
        elif word == "me":
            out[i] = "the user"
        elif word == "myself":
            out[i] = "themselves"
        elif word in ("i'm", "i've", "i'll"):
            out[i] = "the user " + {"i'm": "is", "i've": "has", "i'll": "will"}[word]
        elif word == "i'd":
            following = _word_at(tokens, words, n + 1)
            had = following == "been" or following.endswith("ed")
            out[i] = "the user " + ("had" if had else "would")
        elif word == "i" and tokens[i + 1 : i + 2] != ["."]:  # not "i.e."
            out[i] = "the user"
            if not _compound_subject(tokens, words, clause_start, n):
                _conjugate(tokens, words, n + 1, out)
        elif word.startswith("i'"):
            raise _Unsure(word)
    return "".join(out)


def _compound_subject(tokens: list[str], words: list[int], start: int, n: int) -> bool:
    """ "My wife and I live ...": the verb agrees with both, so it stays as it is."""
    before = [tokens[i].casefold() for i in words[start:n]]
    return (
        len(before) in (2, 3, 4)
        and before[-1] in ("and", "or")
        and not {"i", "i'm", "we", "you", "he", "she", "they"} & set(before)
    )


def _conjugate(tokens: list[str], words: list[int], n: int, out: list[str]) -> None:
    """The verb after "I" (past any adverbs) in the third person singular."""
    while _word_at(tokens, words, n) in _ADVERBS:
        n += 1
    if n >= len(words):
        return  # "taller than I"
    i = words[n]
    verb = tokens[i].casefold()
    if verb in _NOT_VERBS or (not verb.isalpha() and verb not in _IRREGULAR and verb not in _KEEP):
        raise _Unsure(tokens[i])
    if verb in _KEEP or verb.endswith("ed"):
        return
    if verb in _IRREGULAR:
        out[i] = _IRREGULAR[verb]
    elif verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        out[i] = verb + "es"
    elif len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        out[i] = verb[:-1] + "ies"
    else:
        out[i] = verb + "s"


def _word_at(tokens: list[str], words: list[int], n: int) -> str:
    return tokens[words[n]].casefold() if n < len(words) else ""
