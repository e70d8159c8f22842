"""The wordings of the generated update chains (``update_chains.py``), in splits.

- ``dev``: the wordings the rules in ``memory_services/facts/slots.py`` were first written
  against.
- ``heldout``: written apart, looked at after its first runs (its misses guided the second
  version of the rules): a tuning set now, not a blind one.
- ``heldout2`` and ``fresh``: written together before the second version of the rules, run
  once before and once after it (the blind figures); then ``heldout2``'s misses were looked
  at (a tuning set since), ``fresh``'s were not.
- ``fresh2``: written after that blind run and before anything was changed on it: blind.
- ``fresh3``: written before the third version of the rules, before any failure of the
  other splits was looked at for it, as people type to an assistant (contractions, "any
  more", "as of last month", passive and inverted forms, updates naming the old value):
  run once, after the rules were changed. Its distractors add first-person statements that
  change nothing (a wish, a plan, a visit, an interview).

Per attribute: the first statement's templates and an update's; ``{v}`` is the value,
``{o}`` (in an update) the value it replaces. An
allergy's values alternate: allergic (``{v}`` the allergen, ``yes``) and no longer (``no``).
Distractors are other people's facts in the same split's wordings and first-person facts of
no tracked attribute: none of them may change what the user's chains say, nor be changed.
"""

from __future__ import annotations

Forms = dict[str, list[str]]

TEMPLATES: dict[str, dict[str, Forms]] = {
    "dev": {
        "city": {
            "first": ["I live in {v}.", "The user lives in {v}."],
            "update": ["I moved to {v}.", "I live in {v} now.", "The user now lives in {v}."],
        },
        "employer": {
            "first": ["I work at {v}.", "The user works for {v}."],
            "update": ["I joined {v}.", "I work at {v} now.", "I started at {v}."],
        },
        "diet": {
            "first": ["I am {v}.", "The user is {v}."],
            "update": ["I am {v} now.", "I switched to a {v} diet."],
        },
        "allergy": {
            "first": ["I am allergic to {v}."],
            "yes": ["I am allergic to {v} again.", "I am now allergic to {v}."],
            "no": ["I am not allergic to {v} any more.", "I am no longer allergic to {v}."],
        },
        "pet": {
            "first": ["I have a {v}."],
            "update": ["I now have a {v}.", "I adopted a {v} recently."],
        },
        "partner": {
            "first": ["My partner is {v}.", "I am dating {v}."],
            "update": ["My partner is {v} now.", "I am now married to {v}."],
        },
    },
    "heldout": {
        "city": {
            "first": ["I'm based in {v}.", "My home is in {v}."],
            "update": [
                "I relocated to {v}.", "These days I live in {v}.", "Home is {v} these days.",
            ],
        },
        "employer": {
            "first": ["I'm employed by {v}.", "My employer is {v}."],
            "update": [
                "I work for {v} these days.", "My company is {v} now.", "I took a job with {v}.",
            ],
        },
        "diet": {
            "first": ["My diet is {v}.", "I follow a {v} diet."],
            "update": ["Currently I'm {v}.", "I went {v}."],
        },
        "allergy": {
            "first": ["The user is allergic to {v}."],
            "yes": ["The user is allergic to {v} again."],
            "no": ["The user isn't allergic to {v} anymore.", "My {v} allergy is gone."],
        },
        "pet": {
            "first": ["My pet is a {v}."],
            "update": ["Now I have a {v}.", "We got a {v}."],
        },
        "partner": {
            "first": ["I'm seeing {v}.", "My girlfriend is {v}."],
            "update": ["I'm engaged to {v} now.", "My boyfriend is {v} these days."],
        },
    },
    "heldout2": {
        "city": {
            "first": [
                "Home for me is {v}.", "I reside in {v}.", "The user resides in {v}.",
                "I've been living in {v} for a while.", "We live in {v}.",
            ],
            "update": [
                "We just moved to {v}.", "I've relocated to {v}.", "I'm living in {v} now.",
                "Just settled in {v}.", "My new home is {v}.", "I moved house to {v} last month.",
                "The user has moved to {v}.", "{v} is home now.",
            ],
        },
        "employer": {
            "first": [
                "I'm working at {v}.", "The user is employed at {v}.", "I have a job at {v}.",
                "I'm an engineer at {v}.",
            ],
            "update": [
                "I got a job at {v}.", "I've joined {v}.", "I now work for {v}.",
                "I was hired by {v}.", "Started a new job at {v}.",
                "I changed jobs, I'm at {v} now.", "The user now works at {v}.",
                "My new employer is {v}.",
            ],
        },
        "diet": {
            "first": [
                "I eat a {v} diet.", "I'm {v}.", "The user follows a {v} diet.",
                "I'm on a {v} diet.",
            ],
            "update": [
                "I've gone {v}.", "I became {v} this year.", "I turned {v}.",
                "These days I eat {v}.", "Now I'm on a {v} diet.", "I've switched to being {v}.",
                "I'm {v} these days.",
            ],
        },
        "allergy": {
            "first": [
                "I have an allergy to {v}.", "I'm allergic to {v}.", "The user has a {v} allergy.",
            ],
            "yes": [
                "My {v} allergy is back.", "I'm allergic to {v} again.",
                "I've become allergic to {v} again.",
            ],
            "no": [
                "I outgrew my {v} allergy.", "I'm no longer allergic to {v}.",
                "My {v} allergy went away.", "I don't have a {v} allergy anymore.",
                "The user is not allergic to {v} these days.",
            ],
        },
        "pet": {
            "first": ["I own a {v}.", "The user has a {v}.", "I've got a {v}."],
            "update": [
                "My pet now is a {v}.", "Now we have a {v}.", "The user now has a {v}.",
                "These days my pet is a {v}.", "I have a {v} now.", "I got a new pet, a {v}.",
            ],
        },
        "partner": {
            "first": [
                "I'm in a relationship with {v}.", "My partner's name is {v}.",
                "{v} is my girlfriend.", "I'm with {v}.",
            ],
            "update": [
                "I'm now dating {v}.", "{v} and I got married.", "I married {v}.",
                "My new partner is {v}.", "I've been seeing {v} lately.",
                "{v} is my boyfriend now.",
            ],
        },
    },
    "fresh": {
        "city": {
            "first": ["I am living in {v}.", "My city is {v}.", "I stay in {v}."],
            "update": [
                "I recently moved to {v}.", "I'm now based in {v}.", "Now living in {v}.",
                "I packed up and moved to {v}.", "The user relocated to {v} this year.",
                "I call {v} home now.",
            ],
        },
        "employer": {
            "first": ["I am employed by {v}.", "My workplace is {v}.", "I work for {v}."],
            "update": [
                "I accepted an offer from {v}.", "I'm working for {v} now.", "I switched to {v}.",
                "I left my job and joined {v}.", "My current employer is {v}.",
                "The user started working at {v}.",
            ],
        },
        "diet": {
            "first": ["I'm a strict {v}.", "My diet is {v}.", "I eat {v}."],
            "update": [
                "I decided to go {v}.", "I'm trying a {v} diet now.", "I've been {v} since spring.",
                "I became a {v}.", "I now follow a {v} diet.",
            ],
        },
        "allergy": {
            "first": ["I am allergic to {v}.", "I have a {v} allergy."],
            "yes": ["The allergy to {v} came back.", "I developed an allergy to {v} again."],
            "no": [
                "My allergy to {v} is over.", "I am not allergic to {v} anymore.",
                "I got over my {v} allergy.",
            ],
        },
        "pet": {
            "first": ["I have a {v}.", "My pet is a {v}."],
            "update": [
                "I now own a {v}.", "Our pet these days is a {v}.", "We adopted a {v} recently.",
                "Currently I have a {v}.",
            ],
        },
        "partner": {
            "first": ["My husband is {v}.", "I am married to {v}.", "My partner is called {v}."],
            "update": [
                "I'm with {v} now.", "My partner now is {v}.", "I got engaged to {v}.",
                "{v} is my new partner.", "I started dating {v}.",
            ],
        },
    },
    "fresh2": {
        "city": {
            "first": [
                "The user lives in {v}.", "I'm from {v} and live there.", "I rent a flat in {v}.",
            ],
            "update": [
                "The user moved to {v} recently.", "We relocated to {v} this spring.",
                "I now live in {v}.", "I'm settling into my new place in {v}.",
                "My address changed, I live in {v} now.", "After the move I'm in {v}.",
            ],
        },
        "employer": {
            "first": ["The user works at {v}.", "I'm on the payroll at {v}.", "I work at {v}."],
            "update": [
                "The user joined {v} this year.", "I quit and went to {v}.",
                "I've been at {v} since the summer.", "My job is now at {v}.",
                "Just signed with {v}.", "I work for {v} nowadays.",
            ],
        },
        "diet": {
            "first": ["The user is {v}.", "I'm a {v}.", "I stick to a {v} diet."],
            "update": [
                "The user went {v}.", "I've become {v}.", "I switched to {v}.",
                "I'm eating {v} now.", "Recently I started a {v} diet.",
            ],
        },
        "allergy": {
            "first": ["The user is allergic to {v}.", "I react badly to {v}, I'm allergic."],
            "yes": ["The user's {v} allergy returned.", "I'm allergic to {v} once more."],
            "no": [
                "The user no longer has a {v} allergy.", "I'm not allergic to {v} now.",
                "{v} don't affect me anymore.",
            ],
        },
        "pet": {
            "first": ["The user has a {v}.", "I take care of my {v}."],
            "update": [
                "The user adopted a {v}.", "We now have a {v}.", "I got a {v} this year.",
                "My current pet is a {v}.",
            ],
        },
        "partner": {
            "first": ["The user's partner is {v}.", "I live with my partner {v}.", "I date {v}."],
            "update": [
                "The user is now with {v}.", "I'm engaged to {v}.", "My fiancée is {v}.",
                "{v} and I are together now.", "I found a new partner, {v}.",
            ],
        },
    },
    "fresh3": {
        "city": {
            "first": [
                "I'm living in {v} at the moment.", "I've lived in {v} for a few years.",
                "My home's in {v}.", "Our flat is in {v}.", "The user is living in {v}.",
            ],
            "update": [
                "We moved from {o} to {v}.", "I'm not in {o} anymore, I moved to {v}.",
                "I left {o} and I live in {v} now.", "Moved to {v} last month.",
                "As of last month I live in {v}.", "I've moved to {v}.",
                "I no longer live in {o}; I'm in {v} now.", "{v} is where I live now.",
                "I ended up moving to {v}.", "Living in {v} these days.",
                "We've relocated to {v}.", "The user moved from {o} to {v}.",
            ],
        },
        "employer": {
            "first": [
                "I work as a developer at {v}.", "I'm a software engineer at {v}.",
                "I've worked for {v} for three years.", "My job is at {v}.",
                "The user is a designer at {v}.",
            ],
            "update": [
                "I left {o} and now I work at {v}.", "I don't work at {o} anymore, I'm at {v} now.",
                "I got hired at {v}.", "I'm now working at {v}.",
                "As of last month I work for {v}.", "{v} hired me.", "I've been hired by {v}.",
                "I switched jobs and now work at {v}.",
                "I no longer work for {o}; I joined {v}.", "I've taken a position at {v}.",
                "The user left {o} and works for {v} now.",
            ],
        },
        "diet": {
            "first": [
                "I've been {v} for years.", "I eat {v}.", "I follow a {v} diet.",
                "The user eats {v}.",
            ],
            "update": [
                "I'm not {o} anymore, I'm {v} now.", "I stopped being {o} and went {v}.",
                "I switched from {o} to {v}.", "These days I eat {v}.",
                "I've been eating {v} since last month.", "I'm no longer {o}; I'm {v}.",
                "As of this year I'm {v}.", "I decided to become {v}.",
                "I changed my diet to {v}.", "The user has switched from {o} to {v}.",
            ],
        },
        "allergy": {
            "first": [
                "I've got an allergy to {v}.", "I can't have {v}, I'm allergic.",
                "I'm allergic to {v}.", "The user has an allergy to {v}.",
            ],
            "yes": [
                "My {v} allergy came back.", "The {v} allergy has returned.",
                "Turns out I'm allergic to {v} again.", "I'm allergic to {v} once again.",
                "The user's allergy to {v} is back.",
            ],
            "no": [
                "I'm not allergic to {v} anymore.", "My allergy to {v} is gone.",
                "I don't have the {v} allergy any more.", "I've outgrown my {v} allergy.",
                "The {v} allergy cleared up.", "As of last month I'm no longer allergic to {v}.",
                "The user isn't allergic to {v} any longer.",
            ],
        },
        "pet": {
            "first": [
                "I've got a {v}.", "We have a {v}.", "My pet's a {v}.", "The user owns a {v}.",
            ],
            "update": [
                "We got a {v} last month.", "I have a {v} now.", "Our new pet is a {v}.",
                "We rehomed the {o}; we have a {v} now.", "I don't have the {o} anymore, now "
                "I have a {v}.", "These days I've got a {v}.", "I just adopted a {v}.",
                "The user has a {v} now.",
            ],
        },
        "partner": {
            "first": [
                "My girlfriend's name is {v}.", "I'm married to {v}.",
                "{v} and I have been together for two years.", "My boyfriend is {v}.",
                "The user is dating {v}.",
            ],
            "update": [
                "{o} and I broke up. I'm seeing {v} now.", "I'm not with {o} anymore; I'm "
                "dating {v}.", "I split up with {o} and I'm in a relationship with {v} now.",
                "I've been dating {v} since last month.", "I got married to {v}.",
                "{v} is my partner now.", "I'm going out with {v} these days.",
                "My new girlfriend is {v}.", "I'm no longer with {o}, my partner is {v}.",
                "The user broke up with {o} and is now dating {v}.",
            ],
        },
    },
}  # fmt: skip

#: ``{c}`` a city, ``{e}`` an employer, ``{d}`` a diet, ``{p}`` a pet, ``{a}`` an allergen,
#: ``{n}`` a partner's name.
DISTRACTORS: dict[str, list[str]] = {
    "dev": [
        "My sister lives in {c}.",
        "My colleague Sam works at {e}.",
        "I enjoy hiking on weekends.",
        "My brother is {d}.",
        "I play the piano.",
        "My neighbour has a {p}.",
    ],
    "heldout2": [
        "My sister just moved to {c}.",
        "My colleague Sam got a job at {e}.",
        "My brother has gone {d}.",
        "My neighbour adopted a {p}.",
        "My friend Lea is allergic to {a}.",
        "I enjoy hiking on weekends.",
        "My manager lives in {c} now.",
        "My cousin is dating {n}.",
    ],
    "fresh": [
        "My parents live in {c}.",
        "My friend Omar works for {e} now.",
        "My mom is {d}.",
        "My roommate has a {p}.",
        "I love jazz.",
        "I'm learning Spanish.",
        "My son is allergic to {a}.",
        "My best friend married {n}.",
    ],
}
DISTRACTORS["heldout"] = DISTRACTORS["dev"]
DISTRACTORS["fresh2"] = [
    "The user's brother lives in {c}.",
    "My dad moved to {c} now.",
    "My wife's friend works at {e}.",
    "My daughter went {d}.",
    "Our neighbours got a {p}.",
    "My aunt is allergic to {a}.",
    "I like cooking pasta.",
    "My sister is engaged to {n}.",
]

DISTRACTORS["fresh3"] = [
    "My brother moved to {c} last month.",
    "My friend Priya got hired at {e}.",
    "My dad's {d} these days.",
    "My sister's got a {p} now.",
    "My kid isn't allergic to {a} anymore.",
    "My best friend is dating {n} now.",
    "I'd love to live in {c} someday.",
    "I had an interview at {e} today.",
    "I'm thinking about getting a {p}.",
    "I visited {c} last week.",
]

QUESTIONS = {
    "city": ("Where do I live?", "Where did I live in {y}?"),
    "employer": ("Who do I work for?", "Where did I work in {y}?"),
    "diet": ("What is my diet?", "What was my diet in {y}?"),
    "allergy": ("Am I allergic to {a}?", "Was I allergic to {a} in {y}?"),
    "pet": ("What pet do I have?", "What pet did I have in {y}?"),
    "partner": ("Who is my partner?", "Who was my partner in {y}?"),
}
