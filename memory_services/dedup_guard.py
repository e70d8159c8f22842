"""Whether two texts that embed alike may merge into one memory.

Embedding similarity finds merge candidates but cannot tell facts apart: with MiniLM,
"Alice is allergic to penicillin." and "Alice is not allergic to penicillin." are 0.96
alike, "The meeting is on Tuesday" and "… on Wednesday" 0.98, "Alice is taller than Bob"
and "Bob is taller than Alice" 0.98. So a merge also needs this guard's consent, which it
gives only when both texts carry the same meaning-bearing words in the same order, after
case folding, dropping punctuation and a closed list of filler words (articles, present
copulas, do-support, four light prepositions, "and", "that", "which"), and undoing plural,
possessive and "-ing" endings and British spellings ("colour", "centre", "organise").
Everything else keeps two texts apart: a negation, a number, a code, a name, a date, a
symbol, or any other content word. A refusal costs a duplicate record; a wrong merge loses
a fact, so the guard errs towards refusing (synonyms such as "called"/"named" do not merge).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from functools import lru_cache

#: Words (letters, digits, inner apostrophes), a minus sign, single symbols (currency, maths,
#: %#@&; other punctuation is dropped).
_TOKEN = re.compile(r"(?P<word>[^\W_]+(?:'[^\W_]+)*)|(?P<minus>(?<!\w)-(?=\d))|[^\w\s]")
_SYMBOLS = frozenset("%#@&")
_LETTERS_DIGITS = re.compile(r"\d+|[^\W\d_]+")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|s|am|pm|[kmg]b?|kg|km|cm|mm|m|h|min)?")


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


FILLER = _set("a an the is are am be do does in on at of to and that which")
NEGATIONS = _set("not no never none nobody nothing nowhere neither nor without cannot non")
_NUMBER_WORDS = _set(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion trillion first second third fourth fifth sixth
    seventh eighth ninth tenth once twice half dozen"""
)
_DATE_WORDS = _set(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday mon tue tues wed thu thur thurs fri sat sun today tomorrow yesterday
    tonight"""
)
#: Contractions: "n't" becomes "not" (its stem mapped where irregular); the others expand.
_NOT_STEMS = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}
_CLITICS = {"s": None, "re": None, "m": None, "ve": "have", "ll": "will", "d": "would"}


def may_merge(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` state the same thing in other filler (see the module)."""
    return _key(a) == _key(b)


def read(text: str) -> None:
    """Read ``text`` now (kept, by text): a writer reads a batch's texts before it takes
    its write lock, so the :func:`may_merge` calls under the lock cost next to nothing."""
    _key(text)


def readings() -> int:
    """How many texts and words the guard keeps read (users' words: see :func:`forget_readings`)."""
    return sum(f.cache_info().currsize for f in (_key, _skeleton, _canonical))


def forget_readings() -> None:
    """Drop every kept reading: they hold users' words, which a forget must not leave in the
    process (the caches are shared by every owner, so all go; they refill as texts come)."""
    for cached in (_key, _skeleton, _canonical):
        cached.cache_clear()


@lru_cache(maxsize=2048)
def _key(text: str) -> tuple[str, ...]:
    """The canonical words of :func:`_skeleton`, kept: a batch of 256 facts that all embed
    alike compares each with every other (32,000 pairs), and two kept tuples differ at
    their first differing word, where lists rebuilt for each pair cost ~50 µs."""
    return tuple(word for word, _ in _skeleton(text))


def why_distinct(a: str, b: str) -> str | None:
    """None when ``a`` and ``b`` may merge; otherwise why not, e.g. "negation: 'not'" or
    "number: '1' vs '0'" (the first difference, by the kind that matters most)."""
    left, right = _skeleton(a), _skeleton(b)
    if [w for w, _ in left] == [w for w, _ in right]:
        return None
    matcher = difflib.SequenceMatcher(a=[w for w, _ in left], b=[w for w, _ in right])
    found: list[tuple[int, str]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        ours = list(dict.fromkeys(raw for _, raw in left[i1:i2]))  # "10am" is two words
        theirs = list(dict.fromkeys(raw for _, raw in right[j1:j2]))
        rank, kind = min(_kind(raw) for raw in ours + theirs)
        shown = " vs ".join(repr(" ".join(side)) for side in (ours, theirs) if side)
        found.append((rank, f"{kind}: {shown}"))
    return min(found)[1]


# Most important first: the reason names the strongest kind of difference.
_KINDS = ("negation", "number", "date", "code", "name", "symbol", "word")


def _kind(raw: str) -> tuple[int, str]:
    word = raw.casefold()
    digits = any(c.isdigit() for c in raw)
    if word in NEGATIONS or word.endswith("n't"):
        kind = "negation"
    elif digits and any(c.isalpha() for c in raw) and not _ORDINAL.fullmatch(word):
        kind = "code"
    elif digits or word in _NUMBER_WORDS or raw == "-":  # "-" was kept as a minus sign
        kind = "number"
    elif word in _DATE_WORDS:
        kind = "date"
    elif len(raw) > 1 and raw.isupper():
        kind = "code"
    elif raw[:1].isupper():
        kind = "name"
    elif not raw[:1].isalnum():
        kind = "symbol"
    else:
        kind = "word"
    return _KINDS.index(kind), kind


@lru_cache(maxsize=2048)
def _skeleton(text: str) -> tuple[tuple[str, str], ...]:
    """The meaning-bearing words of ``text``: (canonical form, as written) pairs. Cached:
    a batch compares each new fact with several candidates, and a 4,000-character text
    takes ~10 ms to read (a batch of 256 such facts held the event loop for ~45 s)."""
    out: list[tuple[str, str]] = []
    typed = unicodedata.normalize("NFKC", text).replace("\u2019", "'")  # a typographic apostrophe
    found = list(_TOKEN.finditer(typed))
    for match in found:
        raw = match[0]
        if match["word"]:
            out += [(word, raw) for word in _words(raw.casefold())]
        elif match["minus"] or raw in _SYMBOLS or unicodedata.category(raw) in ("Sc", "Sm"):
            out.append((raw, raw))
    if not out:  # nothing but filler: compare the filler itself
        return tuple((m[0].casefold(), m[0]) for m in found if m["word"])
    return tuple(out)


def _words(token: str) -> list[str]:
    base, _, clitic = token.partition("'")
    if clitic == "t" and base.endswith("n"):  # isn't, can't, won't
        stem = base[:-1]
        return [*_words(_NOT_STEMS.get(stem, stem)), "not"]
    if token == "cannot":
        return ["can", "not"]
    words = [base] if clitic in ("", *_CLITICS) else [base + clitic]
    if (extra := _CLITICS.get(clitic)) is not None:
        words.append(extra)
    out = []
    for word in words:
        for part in _LETTERS_DIGITS.findall(word):  # "10am" is "10 am"
            canonical = _canonical(part)
            if canonical not in FILLER:
                out.append(canonical)
    return out


@lru_cache(maxsize=65536)
def _canonical(word: str) -> str:
    """One form for inflections and British spellings of ``word`` (already case folded)."""
    if word.isdigit() or word in NEGATIONS or word in _NUMBER_WORDS or word in _DATE_WORDS:
        return word
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes", "zes")):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 6 and word.endswith("ing"):
        word = word[:-3]
    if len(word) >= 6 and "our" in word[1:]:
        word = word[0] + word[1:].replace("our", "or")  # colour, favourite, behaviour
    if len(word) >= 5 and word.endswith("tre"):
        word = word[:-3] + "ter"  # centre, metre
    return re.sub(r"(?<=\w{3})is(e|ed|ation)$", r"iz\1", word)  # organise, realised
