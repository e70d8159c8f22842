"""Could embedding similarity tell which slot a fact no rule reads belongs to? Measured: no.

For facts worded so that no slot rule reads them, the cosine similarity (the service's
embedding model, all-MiniLM-L6-v2) to the stored fact of the slot they do update ("Lisbon is
where I'm at these days" against "I live in Berlin.") is set beside the similarity of facts
that update nothing to their nearest slotted fact ("My sister lives in Paris.", "I work in
Berlin."). Also with the names masked (capitalised words after the first: "someone"), so that
the value weighs less than the predicate. A threshold could only be used if every true pair
scored above every false one.

    python benchmarks/slot_similarity.py
"""

from __future__ import annotations

import numpy as np
from sentence_transformers import SentenceTransformer

from react_mem.embedding.sentence import model_path

SLOTTED = [
    "I live in Berlin.",
    "I work at Acme.",
    "I am vegetarian.",
    "I am allergic to peanuts.",
    "I have a dog named Rex.",
    "My partner is Anna.",
]
#: (fact, the index in SLOTTED of the slot it updates)
UPDATES = [
    ("Lisbon is where I'm at these days.", 0),
    ("I'm a Globex employee now.", 1),
    ("Meat is off the menu for me.", 2),
    ("Peanuts don't bother me anymore.", 3),
    ("There's a cat named Tom in my life now.", 4),
    ("Ben and I are a couple now.", 5),
]
UNRELATED = [
    "I enjoy hiking on weekends.",
    "My sister lives in Paris.",
    "My colleague Sam works at Globex.",
    "I play the piano.",
    "I'm learning Spanish.",
    "I work in Berlin.",
    "My neighbour has a cat named Tom.",
    "I love jazz.",
    "I drive a blue car.",
]


def masked(text: str) -> str:
    first, *rest = text.split()
    return " ".join([first, *("someone" if w[0].isupper() and w != "I" else w for w in rest)])


def main() -> None:
    model = SentenceTransformer(str(model_path("all-MiniLM-L6-v2")), device="cpu")
    for name, form in (("as told", str), ("names masked", masked)):
        slotted = model.encode([form(s) for s in SLOTTED], normalize_embeddings=True)
        true = model.encode([form(t) for t, _ in UPDATES], normalize_embeddings=True) @ slotted.T
        false = model.encode([form(t) for t in UNRELATED], normalize_embeddings=True) @ slotted.T
        own = [float(true[i, slot]) for i, (_, slot) in enumerate(UPDATES)]
        right = sum(int(np.argmax(true[i])) == slot for i, (_, slot) in enumerate(UPDATES))
        nearest = [float(row.max()) for row in false]
        print(
            f"{name}: updates to their own slot {min(own):.2f}-{max(own):.2f} "
            f"(nearest slot right {right}/{len(UPDATES)}); unrelated facts to their nearest "
            f"slot {min(nearest):.2f}-{max(nearest):.2f}; separable: {min(own) > max(nearest)}"
        )


if __name__ == "__main__":
    main()
