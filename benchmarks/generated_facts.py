"""Generated facts with known answers, for recall at any size (``vs_mem0.py``).

Each fact is one attribute of one person ("Ava Okafor drives a blue van."); no two facts share
a person and an attribute, so each question ("What car does Ava Okafor drive?") has exactly
one answer among the facts, while the other attributes of that person and the same attribute
of everyone else are the distractors. 100 first names x 100 family names x 12 attributes
give room for 120,000 facts. The same ``(count, seed)`` always gives the same facts and the
same questions.

By default facts come as whole people: every attribute of ``count / 12`` people, so the
person's name in a question does not single out the answer (eleven other facts share it, and
namesakes share the first name). Spread over all 10,000 people instead (``whole_people=False``),
most people get one fact and naming them is nearly the whole answer: recall saturates.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FIRST = _names(
    "Ava Ben Chloe Dev Elena Farid Grace Hiro Isla Jonas Kemi Liam Maya Nico Olga Priya Quinn "
    "Rosa Sami Tess Umar Vera Wen Xavi Yara Zane Aiko Bruno Carmen Dara Emil Fatima Gus Hana "
    "Ivan Jade Kofi Lena Mateo Nadia Oscar Pia Rafael Sofia Tomas Uma Viktor Willa Yusuf Zoe "
    "Anil Bea Cyrus Dina Ezra Flora Gideon Helga Idris June Kai Leila Milo Nell Omar Paloma "
    "Reza Selma Theo Ursula Vikram Wanda Yosef Zara Amara Boris Celine Dmitri Esme Felix Greta "
    "Hugo Ines Jasper Karin Lars Mira Nils Orla Pavel Rhea Stellan Tove Ulla Vito Wim Xenia "
    "Yuki Zeno Alma"
)
LAST = _names(
    "Okafor Lindqvist Moreau Tanaka Novak Haddad Silva Brennan Kowalski Mensah Ferreira Ito "
    "Larsen Dubois Kapoor Reyes Schmidt Nakamura Osei Petrov Andersen Costa Yilmaz Walsh "
    "Horvat Bauer Chen Duarte Eriksen Fischer Garcia Hansen Ibrahim Jensen Keller Lopez Marsh "
    "Nguyen Olsen Park Quist Rossi Sato Torres Ueda Vargas Weber Xu Young Zimmer Abbott "
    "Bishop Carver Dalton Ellis Foster Grant Hughes Irving Jacobs Kerr Lowe Murphy Nash "
    "Oakley Pryce Quinlan Rhodes Stone Turner Upton Vance Wells York Ziegler Amadi Banerjee "
    "Castillo Delgado Eze Fontaine Gallo Hale Iqbal Jovanovic Kim Lindgren Mbeki Nowak "
    "Ortega Pereira Ramos Sandoval Tran Umeh Volkov Wagner Yamada Zapata Adler"
)
#: Attribute: (fact template, question template, value choices). ``{n}``: the person.
ATTRIBUTES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("{n} drives a {v}.", "What car does {n} drive?",
     ("blue van", "silver hatchback", "white pickup truck", "black estate car", "red scooter")),
    ("{n} works as a {v}.", "What is {n}'s job?",
     ("nurse", "carpenter", "data analyst", "pastry chef", "bus driver", "translator")),
    ("{n} grew up in {v}.", "Where did {n} grow up?",
     ("Lisbon", "Osaka", "Nairobi", "Montreal", "Krakow", "Cape Town", "Bergen")),
    ("{n} plays the {v} in a band.", "Which instrument does {n} play?",
     ("cello", "drums", "bass guitar", "trumpet", "violin", "accordion")),
    ("{n} is allergic to {v}.", "What is {n} allergic to?",
     ("peanuts", "cats", "penicillin", "pollen", "shellfish", "dust mites")),
    ("{n} keeps {v} as pets.", "What pets does {n} have?",
     ("two cats", "a parrot", "three goldfish", "a greyhound", "chickens", "a tortoise")),
    ("{n}'s favourite food is {v}.", "What does {n} like to eat most?",
     ("ramen", "paella", "dumplings", "lasagne", "jollof rice", "pierogi")),
    ("{n} spends weekends {v}.", "How does {n} spend the weekend?",
     ("climbing", "gardening", "sailing", "baking bread", "running trails", "painting")),
    ("{n} studied {v} at university.", "What did {n} study?",
     ("chemistry", "law", "music", "architecture", "economics", "linguistics")),
    ("{n} speaks {v} at home.", "Which language does {n} speak at home?",
     ("Portuguese", "Japanese", "Swahili", "Polish", "Turkish", "Tagalog")),
    ("{n} is saving up for {v}.", "What is {n} saving money for?",
     ("a trip to Peru", "a new roof", "a sailing boat", "a piano", "a wedding", "a camper")),
    ("{n} was born in {v}.", "In which month was {n} born?",
     ("January", "March", "May", "July", "September", "November")),
)  # fmt: skip
CAPACITY = len(FIRST) * len(LAST) * len(ATTRIBUTES)


@dataclass(frozen=True)
class Fact:
    key: str  # "f<index>": what a hit is counted by
    text: str


@dataclass(frozen=True)
class Question:
    text: str
    answer: str  # the key of the one fact that answers it


def generate(
    count: int, questions: int, seed: int = 7, *, whole_people: bool = True
) -> tuple[list[Fact], list[Question]]:
    """``count`` facts and ``questions`` questions (each about a different fact)."""
    if not 0 < count <= CAPACITY:
        raise ValueError(f"count must be in 1..{CAPACITY}, not {count}")
    rng = random.Random(seed)
    # (person, attribute) slots in a seeded order: the first ``count`` are the facts.
    if whole_people:
        attributes = len(ATTRIBUTES)
        people = rng.sample(range(CAPACITY // attributes), -(-count // attributes))
        slots = [p * attributes + a for p in people for a in range(attributes)][:count]
        rng.shuffle(slots)
    else:
        slots = rng.sample(range(CAPACITY), count)
    facts, asked = [], []
    for index, slot in enumerate(slots):
        person, attribute = divmod(slot, len(ATTRIBUTES))
        first, last = divmod(person, len(LAST))
        name = f"{FIRST[first]} {LAST[last]}"
        template, question, values = ATTRIBUTES[attribute]
        facts.append(Fact(f"f{index}", template.format(n=name, v=rng.choice(values))))
        asked.append(question.format(n=name))
    picked = rng.sample(range(count), min(questions, count))
    return facts, [Question(asked[i], facts[i].key) for i in picked]
