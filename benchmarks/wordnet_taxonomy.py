"""WordNet's noun taxonomy for the lexical side, as measured by ``locomo_wordnet.py``.

A list question names a category ("What activities does Melanie partake in?") and its
evidence names members of it ("pottery", "camping", "swimming"), words BM25 cannot match and
a small sentence embedder barely relates. WordNet 3.0 says which nouns are kinds of which
(hyponyms, and instances: "Paris" of "city"), so a query can carry a category's members as
extra terms at a lower weight (:meth:`Taxonomy.expand`), and a record its nouns' broader
kinds (:meth:`Taxonomy.broader`). The database is Debian's ``wordnet-base`` package
(``apt-get install -y --no-install-recommends wordnet-base``), read with nltk's
``WordNetCorpusReader`` (``pip install 'react-mem[wordnet]'``); nothing is downloaded.
Measured, not kept in the service (docs/benchmarks.md): a benchmark's module.
"""

from __future__ import annotations

import functools
import io
import re
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memory_services.store import lexical

#: Where Debian's ``wordnet-base`` puts the WordNet 3.0 database.
DEFAULT_ROOT = Path("/usr/share/wordnet")
#: Files the reader needs (Debian leaves out ``lexnames``; :data:`_LEXNAMES` stands in).
FILES = tuple(f"{k}.{pos}" for k in ("index", "data") for pos in ("noun", "verb", "adj", "adv"))
#: WordNet 3.0's lexicographer files, in number order (lexnames(5WN)).
_LEXNAMES_TEXT = """
adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body
noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location
noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process
noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body
verb.change verb.cognition verb.communication verb.competition verb.consumption verb.contact
verb.creation verb.emotion verb.motion verb.perception verb.possession verb.social
verb.stative verb.weather adj.ppl
"""
_LEXNAMES = _LEXNAMES_TEXT.split()
_WORD = re.compile(r"[A-Za-z]+")
_LOCK = threading.Lock()


class WordNetMissing(RuntimeError):
    """The WordNet database is not where it was looked for."""


def missing(root: Path) -> list[str]:
    """The database files absent from ``root`` (empty: it can be read)."""
    return [name for name in FILES if not (root / name).is_file()]


@functools.cache
def reader(root: Path = DEFAULT_ROOT) -> Any:
    """nltk's reader over ``root`` (once per process: reading the indexes takes seconds)."""
    if absent := missing(root):
        raise WordNetMissing(
            f"WordNet 3.0 is not in {root} (missing {', '.join(absent)}): install Debian's "
            "wordnet-base package, or turn the taxonomy off"
        )
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class Reader(WordNetCorpusReader):  # type: ignore[misc]
        def open(self, fileid: str) -> Any:
            if fileid == "lexnames":
                return io.StringIO("".join(f"{i:02d}\t{n}\t0\n" for i, n in enumerate(_LEXNAMES)))
            return super().open(fileid)

        def map_wn(self, version: str = "wordnet") -> None:
            return None  # a mapping to other WordNet versions, for multilingual data only

    with _LOCK:
        if str(root) not in nltk.data.path:  # nltk reads only under its data paths
            nltk.data.path.append(str(root))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available"
            return Reader(str(root), None)


def _closure_down(synset: Any, depth: int | None, most: int | None = None) -> list[Any] | None:
    """``synset``'s hyponyms and instances, to ``depth`` levels (None: all); None when
    they are more than ``most``."""
    seen: dict[str, Any] = {}
    level, frontier = 0, [synset]
    while frontier and (depth is None or level < depth):
        level += 1
        nxt = []
        for s in frontier:
            for h in s.hyponyms() + s.instance_hyponyms():
                if h.name() not in seen:
                    seen[h.name()] = h
                    nxt.append(h)
        if most is not None and len(seen) > most:
            return None
        frontier = nxt
    return list(seen.values())


def _closure_up(synset: Any, levels: int) -> list[Any]:
    seen: dict[str, Any] = {}
    frontier = [synset]
    for _ in range(levels):
        frontier = [h for s in frontier for h in s.hypernyms() + s.instance_hypernyms()]
        for h in frontier:
            seen.setdefault(h.name(), h)
    return list(seen.values())


def _names(synsets: Iterable[Any], multiword: bool) -> set[str]:
    out = set()
    for s in synsets:
        for name in s.lemma_names():
            if multiword or "_" not in name:
                out.add(name.replace("_", " ").lower())
    return out


class Taxonomy:
    """Expansions of a text's nouns through WordNet (``senses``: a noun's most frequent
    senses used; ``most``: a sense whose closure holds more synsets is skipped)."""

    def __init__(
        self,
        root: Path = DEFAULT_ROOT,
        *,
        senses: int = 1,
        most: int | None = None,
        depth: int | None = None,
        plural_only: bool = True,
        multiword: bool = True,
    ) -> None:
        self.wn = reader(root)
        self.senses, self.most, self.depth = senses, most, depth
        self.plural_only, self.multiword = plural_only, multiword
        self._down: dict[str, frozenset[str]] = {}
        self._up: dict[tuple[str, int], frozenset[str]] = {}

    def nouns(self, text: str, plural_only: bool) -> list[str]:
        """The WordNet nouns ``text`` names: a two-word compound first ("board games"),
        else single words, past stopwords and capitalised words inside a sentence
        (names), each as its base form."""
        words = [(m.group(), m.start()) for m in _WORD.finditer(text)]
        out: list[str] = []
        skip = False
        for n, (word, start) in enumerate(words):
            if skip:
                skip = False
                continue
            if n + 1 < len(words):
                pair = f"{word}_{words[n + 1][0]}".lower()
                base = self.wn.morphy(pair, "n")
                if base and "_" in base and (not plural_only or base != pair):
                    out.append(base)
                    skip = True
                    continue
            lower = word.lower()
            inside = start > 0 and not text[:start].rstrip().endswith((".", "?", "!"))
            if word[0].isupper() and inside:
                continue  # a name
            if not lexical.query(lower)[0]:
                continue  # a stopword ("does": not the deer)
            base = self.wn.morphy(lower, "n")
            if base is None or (plural_only and base == lower):
                continue
            out.append(base)
        return out

    def kinds(self, noun: str) -> frozenset[str]:
        """The lemma names of the kinds of ``noun`` (its chosen senses' closures)."""
        if noun not in self._down:
            names: set[str] = set()
            for synset in self.wn.synsets(noun, "n")[: self.senses]:
                below = _closure_down(synset, self.depth, self.most)
                if below is not None:
                    names |= _names(below, self.multiword)
            self._down[noun] = frozenset(names)
        return self._down[noun]

    def broader_of(self, noun: str, levels: int) -> frozenset[str]:
        """The lemma names of ``noun``'s first sense's hypernyms, ``levels`` up."""
        key = (noun, levels)
        if key not in self._up:
            found = self.wn.synsets(noun, "n")[:1]
            above = _closure_up(found[0], levels) if found else []
            self._up[key] = frozenset(_names(above, self.multiword))
        return self._up[key]

    def expand(self, question: str, weight: float) -> lexical.Sparse:
        """``question``'s lexical query with its category nouns' kinds at ``weight``."""
        indices, values = lexical.query(question)
        terms = dict(zip(indices, values, strict=True))
        extra: set[str] = set()
        for noun in self.nouns(question, self.plural_only):
            extra |= self.kinds(noun)
        if extra:
            for term in lexical.query("\n".join(sorted(extra)))[0]:
                terms.setdefault(term, weight)
        return list(terms), list(terms.values())

    def broader(self, text: str, levels: int) -> str:
        """The broader kinds of ``text``'s nouns, as words (one per line)."""
        out: set[str] = set()
        for noun in self.nouns(text, plural_only=False):
            out |= self.broader_of(noun, levels)
        return "\n".join(sorted(out))
