"""WordNet's taxonomy on LoCoMo's lexical side, side by side with the default ranking.

List questions name a category ("What activities does Melanie partake in?") whose members
their evidence turns name ("pottery", "camping", "swimming"): no shared word, little shared
meaning in MiniLM's space. ``memory_services.store.taxonomy`` reads WordNet 3.0 (Debian's
``wordnet-base``) with nltk; two ways to use it are measured here, alone and together, in the
same in-process rebuild of the store's ranking as ``locomo_multihop.py`` (whose variants this
extends; vectors from its ``--cache``):

- query side, ``Q ...``: a question's category nouns (plural ones, or all its nouns; a
  two-word compound first: "board games", "martial arts") add the lemma names of their kinds
  (hyponyms and instances, transitively; ``s N``: the noun's first N senses; ``cap M``: a
  sense with more than M kinds skipped) to the lexical query at weight ``w``;
- document side, ``D L f``: each record's nouns (first sense) add their hypernyms' lemma names,
  ``L`` levels up, to its lexical terms at weight ``f`` (a term's BM25 weight in a text of
  average length is 1), IDF over the expanded records.

Every variant has the default's dense side (sentence max over the candidates of all lists)
and fusion (``Retrieval()``: neighbours, priors), so it differs from ``default`` only in its
lexical list; ``--categories`` prints @10 per category and split, to check none falls below
``dense``.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from locomo_multihop import EXTRA, dense, extra, idf_table, sentence_max, side
from locomo_variants import Conversation, Variant, main
from wordnet_taxonomy import Taxonomy

from memory_services.store import lexical, ties
from memory_services.store.base import Retrieval

NOW = Retrieval()
_TAXONOMIES: dict[tuple[Any, ...], Taxonomy] = {}
_QUERIES: dict[tuple[Any, ...], dict[int, float]] = {}


def taxonomy(**options: Any) -> Taxonomy:
    key = tuple(sorted(options.items()))
    if key not in _TAXONOMIES:
        _TAXONOMIES[key] = Taxonomy(**options)
    return _TAXONOMIES[key]


class Weighted:
    """BM25 with weighted query terms over ``docs`` (term -> weight), IDF given."""

    def __init__(self, docs: list[dict[int, float]], idf: dict[int, float]) -> None:
        self.idf = idf
        self.postings: dict[int, list[tuple[int, float]]] = defaultdict(list)
        self.size = len(docs)
        for n, doc in enumerate(docs):
            for term, weight in doc.items():
                self.postings[term].append((n, weight))

    def scores(self, terms: dict[int, float]) -> np.ndarray:
        out = np.zeros(self.size)
        for term, q in terms.items():
            idf = self.idf.get(term, 0.0)
            for n, weight in self.postings.get(term, ()):
                out[n] += q * weight * idf
        return out


def expanded_docs(conversations: list[Conversation], levels: int, weight: float) -> None:
    """Each conversation's records with their nouns' hypernyms (IDF over the records
    stored so far, as ``locomo_variants.load``), kept in ``EXTRA`` under ``("D", L, f)``."""
    tx = taxonomy(multiword=True)
    df: dict[int, int] = defaultdict(int)
    stored = 0
    for c in conversations:
        docs = []
        for i, doc in enumerate(c.docs):
            text = c.texts[i].split("): ", 1)[-1]
            out = dict(doc)
            for term in lexical.query(tx.broader(text, levels))[0]:
                out.setdefault(term, weight)
            docs.append(out)
        for doc in docs:
            for term in doc:
                df[term] += 1
        stored += len(docs)
        extra(c)["D", levels, weight] = Weighted(docs, idf_table(df, stored))
        extra(c).setdefault("plain", Weighted(c.docs, c.idf))


def query_terms(question: str, q: dict[str, Any] | None) -> dict[int, float]:
    if q is None:
        indices, values = lexical.query(question)
        return dict(zip(indices, values, strict=True))
    key = (question, tuple(sorted(q.items())))
    if key not in _QUERIES:
        options = {k: v for k, v in q.items() if k != "weight"}
        indices, values = taxonomy(**options).expand(question, q["weight"])
        _QUERIES[key] = dict(zip(indices, values, strict=True))
    return _QUERIES[key]


def variant(q: dict[str, Any] | None = None, d: tuple[int, float] | None = None) -> Variant:
    """The default ranking with the lexical side expanded by ``q`` (query) / ``d`` (docs)."""

    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        x = extra(c)
        lex = x[("D", *d)] if d else x["plain"]
        words = lex.scores(query_terms(question, q))
        cosine = c.vectors @ vector
        masks = [np.ones(len(c.texts), bool)]
        if (boosted := c.boost(question, now)) is not None:
            masks.append(boosted)
        depth = NOW.candidates(k)

        def lists(dense_scores: np.ndarray) -> list[list[Any]]:
            out = []
            for mask in masks:
                out.append(side(c, np.where(mask, dense_scores, -9.0), "dense", depth))
                out[-1] = [p for p in out[-1] if mask[int(p.id)]]
                out.append(side(c, np.where(mask, words, 0.0), "lexical", depth))
            return out

        pool = sorted({int(p.id) for found in lists(cosine) for p in found})
        rescored = cosine.copy()
        rescored[pool] = sentence_max(c, x, vector)[pool]
        kinds: list[ties.Side] = ["dense", "lexical"] * len(masks)
        return [int(p.id) for p in ties.fuse(lists(rescored), kinds, NOW, k)]

    return rank


def q(weight: float, **options: Any) -> dict[str, Any]:
    return {"weight": weight} | options


VARIANTS: dict[str, Variant] = {
    "default (sentences + priors)": variant(),
    "dense": dense,
    "Q plural s1 w.3": variant(q(0.3)),
    "Q plural s1 w.5": variant(q(0.5)),
    "Q plural s1 w.2": variant(q(0.2)),
    "Q plural s1 w1": variant(q(1.0)),
    "Q plural s2 w.3": variant(q(0.3, senses=2)),
    "Q plural all w.3": variant(q(0.3, senses=99)),
    "Q plural all cap500 w.3": variant(q(0.3, senses=99, most=500)),
    "Q plural s1 cap500 w.3": variant(q(0.3, most=500)),
    "Q plural s1 single w.3": variant(q(0.3, multiword=False)),
    "Q plural s1 depth2 w.3": variant(q(0.3, depth=2)),
    "Q nouns s1 w.3": variant(q(0.3, plural_only=False)),
    "Q nouns s1 cap500 w.3": variant(q(0.3, plural_only=False, most=500)),
    "D 1 .5": variant(d=(1, 0.5)),
    "D 2 .5": variant(d=(2, 0.5)),
    "D 3 .5": variant(d=(3, 0.5)),
    "D 4 .5": variant(d=(4, 0.5)),
    "D 2 1": variant(d=(2, 1.0)),
    "D 3 .3": variant(d=(3, 0.3)),
    "Q plural s1 w.3 + D 2 .5": variant(q(0.3), (2, 0.5)),
    "Q plural s1 w.3 + D 3 .5": variant(q(0.3), (3, 0.5)),
}
#: Around the query side's best: senses, the cap on a sense's kinds, the weight.
GRID: dict[str, Variant] = {
    f"Q {which} s{senses} cap{cap} w{weight:g}".replace("w0.", "w."): variant(
        q(weight, senses=senses, most=cap, plural_only=which == "plural")
    )
    for which in ("plural", "nouns")
    for senses in (1, 99)
    for cap in (200, 500, 1000, 2000)
    for weight in (0.2, 0.3, 0.5)
}
#: The document sides the variants above use (built at load when one of them is chosen).
DOC_SIDES = [(1, 0.5), (2, 0.5), (3, 0.5), (4, 0.5), (2, 1.0), (3, 0.3)]


def chosen_variants(argv: list[str]) -> str:
    """The ``--variants`` argument (empty: all), read before ``main`` parses it."""
    for n, arg in enumerate(argv):
        if arg.startswith("--variants="):
            return arg.split("=", 1)[1]
        if arg == "--variants" and n + 1 < len(argv):
            return argv[n + 1]
    return ""


if __name__ == "__main__":
    import importlib.util

    import locomo_multihop
    import locomo_variants
    import wordnet_taxonomy

    absent = wordnet_taxonomy.missing(wordnet_taxonomy.DEFAULT_ROOT)
    if absent or importlib.util.find_spec("nltk") is None:
        print(
            "WordNet or nltk missing: apt-get install -y --no-install-recommends wordnet-base; "
            "pip install 'react-mem[wordnet]'"
        )
        sys.exit(1)
    original = locomo_variants.load

    async def load(data: list[dict[str, Any]], saved: Any, cache: Path | None) -> Any:
        conversations = await original(data, saved, cache)
        await locomo_multihop.prepare(conversations, cache)
        chosen = chosen_variants(sys.argv)
        for levels, weight in DOC_SIDES:
            if not chosen or f"D {levels} {weight:g}".replace("0.", ".") in chosen:
                expanded_docs(conversations, levels, weight)
        for c in conversations:
            EXTRA[id(c)].setdefault("plain", Weighted(c.docs, c.idf))
        return conversations

    locomo_variants.load = load  # type: ignore[assignment]
    main(VARIANTS | GRID, __doc__)
