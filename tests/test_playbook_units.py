"""The playbook's arithmetic and its delta / grow-and-refine logic, without a store or bus:
values are checked against numbers worked out by hand from the seeds' formulas."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from memory_services.playbook import bullets, deltas, refine, seeds
from memory_services.playbook.playbook import Playbook, active_fields, as_vector
from memory_services.playbook.records import PlaybookPolicy, ScopeKey, bullet_id, normalise
from memory_services.playbook.retrieve import Query, rank
from memory_services.playbook.scoring import (
    PRESETS,
    DecayRates,
    combined,
    decay_score,
    decay_scores,
    infer_memory_type,
    jaccard,
    resolve_weights,
    words,
)
from memory_services.playbook.versions import decode, encode
from react_mem.errors import BadRequest, ConfigurationError
from react_mem.schema.playbook import Bullet, Delta, DeltaOperation, MemoryType, Weights

RATES = DecayRates()
KEY = ScopeKey("ws", "c", "ctx")
#: The seeds' own model, which these tests work out by hand: no relevance floor, fixed
#: strength, no auto-pruning (the shipped defaults: tests/test_ace_playbook_units.py).
SEEDS_MODEL: dict[str, object] = {
    "min_relevance": 0.0,
    "reinforcement_gain": 0.0,
    "harmful_margin": 0,
}
SEEDS_POLICY = PlaybookPolicy(**SEEDS_MODEL)  # type: ignore[arg-type]


def bullet(
    id: str,
    content: str = "x",
    memory_type: MemoryType = "semantic",
    *,
    index: int = 0,
    strength: float = 1.0,
    **fields: object,
) -> Bullet:
    return Bullet(id=id, content=content, **active_fields(memory_type, strength, index), **fields)  # type: ignore[arg-type]


def test_decay_follows_the_seed_formula_per_memory_type() -> None:
    semantic = bullet("a", "x", "semantic", index=3)
    episodic = bullet("b", "x", "episodic", index=0)
    procedural = bullet("c", "x", "procedural", index=5, strength=0.5)
    assert decay_score(semantic, 10, RATES) == pytest.approx(0.99**7)
    assert decay_score(episodic, 20, RATES) == pytest.approx(0.95**20)
    assert decay_score(procedural, 5, RATES) == pytest.approx(0.5)
    assert decay_score(procedural, 505, RATES) == pytest.approx(0.5 * 0.998**500)
    # An index ahead of the clock counts as t = 0; inactive types contribute nothing.
    assert decay_score(semantic, 1, RATES) == pytest.approx(1.0)
    mixed = semantic.model_copy(update={"episodic_strength": 0.0, "procedural_strength": 0.0})
    assert decay_score(mixed, 10, RATES) == pytest.approx(0.99**7)

    rows = [semantic, episodic, procedural]
    strength = np.array(
        [[b.semantic_strength, b.episodic_strength, b.procedural_strength] for b in rows]
    )
    index = np.array(
        [
            [b.semantic_access_index, b.episodic_access_index, b.procedural_access_index]
            for b in rows
        ]
    )
    vectorised = decay_scores(strength, index, 20, RATES)
    assert vectorised.tolist() == pytest.approx([0.99**17, 0.95**20, 0.5 * 0.998**15])


def test_rates_are_configurable_and_clamped_to_the_unit_interval() -> None:
    rates = DecayRates(semantic=-0.5, episodic=2.0, procedural=0.1)
    assert (rates.semantic, rates.episodic, rates.procedural) == (0.0, 1.0, 0.1)
    assert decay_score(bullet("a", "x", "semantic"), 50, rates) == 1.0  # never decays
    assert decay_score(bullet("b", "x", "episodic"), 0, rates) == 1.0
    assert decay_score(bullet("b", "x", "episodic"), 1, rates) == 0.0  # gone after one access
    assert decay_score(bullet("c", "x", "procedural"), 2, rates) == pytest.approx(0.81)


def test_combined_score_presets_and_explicit_weights() -> None:
    default, dominant = PRESETS["default"], PRESETS["relevance-dominant"]
    assert (default.relevance, default.strength, default.type) == (0.25, 0.55, 0.20)
    assert (dominant.relevance, dominant.strength, dominant.type) == (0.55, 0.25, 0.20)
    assert resolve_weights("relevance-dominant") is dominant
    explicit = Weights(relevance=1.0, strength=0.0, type=0.0)
    assert resolve_weights(explicit) is explicit
    with pytest.raises(BadRequest):
        resolve_weights("strength-only")

    assert combined(default, 0.5, 0.99**7, "procedural", 0.1) == pytest.approx(
        0.25 * 0.5 + 0.55 * 0.99**7 + 0.20 * 1.0 + 0.1
    )
    assert combined(dominant, 0.5, 0.99**7, "episodic", 0.0) == pytest.approx(
        0.55 * 0.5 + 0.25 * 0.99**7 + 0.20 * 0.7
    )
    assert combined(explicit, 0.3, 1.0, "semantic", 0.2) == pytest.approx(0.3 + 0.2)


def test_jaccard_and_memory_type_inference() -> None:
    a = words("Check the user's facts, first!")
    assert a == {"check", "the", "user", "s", "facts", "first"}
    assert jaccard(a, words("check facts")) == pytest.approx(2 / 6)
    assert jaccard(words(""), words("")) == 0.0
    assert infer_memory_type("First list the directory, then delete the file.") == "procedural"
    assert infer_memory_type("Always quote the rule.") == "procedural"
    assert infer_memory_type("Last time the API timed out after 30 s.") == "episodic"
    assert infer_memory_type("What happened when the cache was cold: slow replies.") == "episodic"
    assert infer_memory_type("Paris is the capital of France.") == "semantic"


def unit(*values: float) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    return (v / np.linalg.norm(v)).tolist()


def playbook(*rows: tuple[Bullet, list[float]], clock: int = 0) -> Playbook:
    pb = Playbook(KEY, len(rows[0][1]) if rows else 3, clock=clock)
    for b, v in rows:
        pb.bullets[b.id], pb.vectors[b.id] = b, as_vector(v)
    return pb


def test_rank_combines_cosine_strength_type_and_boosts_exactly() -> None:
    a = bullet("a", "use metric units", "procedural", index=0, user="ann", topic="Travel")
    b = bullet("b", "paris is in france", "semantic", index=4)
    c = bullet("c", "last time it rained", "episodic", index=2)
    pb = playbook((a, unit(1, 0, 0)), (b, unit(1, 1, 0)), (c, unit(0, 0, 1)), clock=4)
    q = as_vector(unit(1, 0, 0))
    policy = SEEDS_POLICY
    found = rank(pb, Query(vector=q, weights=PRESETS["default"], top_k=3), RATES, policy, 0.0)
    expected = {
        "a": 0.25 * 1.0 + 0.55 * 0.998**4 + 0.20 * 1.0,
        "b": 0.25 * math.sqrt(0.5) + 0.55 * 1.0 + 0.20 * 0.4,
        "c": 0.25 * 0.0 + 0.55 * 0.95**2 + 0.20 * 0.7,
    }
    assert [x.id for x in found] == sorted(expected, key=lambda i: -expected[i])
    for x in found:
        assert x.score == pytest.approx(expected[x.id], abs=1e-6)
    assert found[0].relevance == pytest.approx(1.0) and found[0].decay_score == pytest.approx(
        0.998**4
    )
    assert found[0].strength == found[0].decay_score  # baseline 1.0

    boosted = rank(
        pb,
        Query(vector=q, weights=PRESETS["relevance-dominant"], top_k=1, user="ann", topic="travel"),
        RATES,
        policy,
        0.0,
    )
    assert boosted[0].id == "a"
    assert boosted[0].score == pytest.approx(0.55 + 0.25 * 0.998**4 + 0.20 + 0.1 + 0.1, abs=1e-6)

    jac = rank(
        pb,
        Query(text="Metric units, please", weights=PRESETS["default"], top_k=3),
        RATES,
        policy,
        0.0,
    )
    by_id = {x.id: x for x in jac}
    assert by_id["a"].relevance == pytest.approx(
        2 / 4
    )  # {use, metric, units} vs {metric, units, please}
    assert by_id["a"].score == pytest.approx(0.25 * 0.5 + 0.55 * 0.998**4 + 0.20, abs=1e-9)
    assert by_id["b"].relevance == 0.0


def test_rank_skips_expired_bullets_and_breaks_ties_by_id() -> None:
    old = bullet("a", "x", ttl_days=1.0, created_at=0.0)
    twin_b, twin_c = bullet("c", "y"), bullet("b", "z")
    pb = playbook((old, unit(1, 0)), (twin_b, unit(0, 1)), (twin_c, unit(0, 1)))
    q = Query(vector=as_vector(unit(1, 0)), weights=PRESETS["default"], top_k=5)
    assert [x.id for x in rank(pb, q, RATES, SEEDS_POLICY, 86399.0)] == ["a", "b", "c"]
    assert [x.id for x in rank(pb, q, RATES, SEEDS_POLICY, 86400.0)] == ["b", "c"]


def work_on(pb: Playbook, **policy: object) -> deltas.Work:
    return deltas.Work(pb.copy(), 100.0, PlaybookPolicy(**(SEEDS_MODEL | policy)))  # type: ignore[arg-type]


def add(content: str, **fields: object) -> DeltaOperation:
    return DeltaOperation(type="ADD", content=content, **fields)  # type: ignore[arg-type]


def test_add_reinforces_repeats_and_near_duplicates_instead_of_cloning() -> None:
    pb = playbook()
    pb.dim = 2
    work = work_on(pb)
    vectors = {
        "Use metric units.": as_vector(unit(1, 0)),
        "use  METRIC units": as_vector(unit(0.2, 1)),  # a repeat by normalised content
        "Use the metric unit!": as_vector(unit(1, 0.3)),  # cos 0.958: a near duplicate
        "Use imperial units.": as_vector(unit(1, 0.3)),  # as alike, but another lesson
        "Cite sources": as_vector(unit(0, 1)),
    }
    delta = Delta(
        delta_id="d1",
        operations=[
            add("Use metric units.", helpful=1, tags=["units"]),
            add("use  METRIC units", helpful=2, tags=["style"], metadata={"k": "v"}),
            add("Use the metric unit!", harmful=1),
            add("Use imperial units."),
            add("Cite sources"),
        ],
    )
    deltas.apply(work, delta, vectors, user="ann")
    first = bullet_id(KEY, normalise("Use metric units."), {})
    assert [(c.change, c.into) for c in work.changes] == [
        ("added", None),
        ("reinforced", first),
        ("reinforced", first),
        ("added", None),
        ("added", None),
    ]
    merged = work.pb.bullets[first]
    assert (merged.helpful, merged.harmful) == (3, 1)
    assert merged.tags == ["units", "style"] and merged.metadata == {"k": "v"}
    assert merged.user == "ann" and merged.content == "Use metric units."
    assert merged.aliases == ["Use the metric unit!"]  # the repeat adds no wording
    assert len(work.pb.bullets) == 3


def test_grow_and_refine_merges_into_the_canonical_bullet_and_prunes_by_score() -> None:
    old = bullet(
        "a", "Use metric units.", index=0, helpful=1, harmful=0, created_at=1.0, tags=["x"]
    )
    keeper = bullet("b", "Quote the rule.", "procedural", index=0, helpful=5, created_at=2.0)
    stale = bullet("c", "Stale idea.", "episodic", index=0, created_at=3.0)
    pb = playbook((old, unit(1, 0, 0)), (keeper, unit(0, 1, 0)), (stale, unit(0, 0, 1)), clock=10)
    work = work_on(pb, max_bullets=2)
    close = {"Use the metric unit!": as_vector(unit(1, 0.5, 0))}  # cos 0.894 to "a"
    delta = Delta(delta_id="d", operations=[add("Use the metric unit!", helpful=3, tags=["y"])])
    deltas.apply(work, delta, close, user=None)
    refine.refine(work, RATES)
    new_id = next(c.bullet_id for c in work.changes if c.change == "added")
    # The newcomer has the better helpful - harmful (3 > 1): it survives, "a" merges into it.
    assert ("merged", "a", new_id) in [(c.change, c.bullet_id, c.into) for c in work.changes]
    survivor = work.pb.bullets[new_id]
    assert (survivor.helpful, survivor.tags) == (4, ["y", "x"])
    assert survivor.aliases == ["Use metric units."]  # the merged wording stays readable
    # Three left for two places: the episodic bullet has decayed most (0.95^10) and goes.
    assert ("pruned", "c") in [(c.change, c.bullet_id) for c in work.changes]
    assert sorted(work.pb.bullets) == sorted([new_id, "b"])
    assert work.pb.bullets.keys() == work.pb.vectors.keys()


def test_grow_and_refine_never_merges_alike_bullets_that_teach_different_lessons() -> None:
    """Issue 11: embedding similarity alone must not merge a lesson into its opposite."""
    old = "Retry the rate API 3 times."
    pb = playbook((bullet("a", old, index=0), unit(1, 0)))
    work = work_on(pb)
    texts = ["Do not retry the rate API 3 times.", "Retry the rate API 5 times."]
    texts.append("Retry the rate-API 3 times")  # a restatement
    # Each new text: cos 0.894 to the old bullet (below ADD's 0.9, above refine's 0.85),
    # 1.0 to the others (ADD compares them, and refuses).
    vectors = {text: as_vector(unit(1, 0.5)) for text in texts}
    deltas.apply(work, Delta(delta_id="d", operations=[add(t) for t in texts]), vectors, None)
    refine.refine(work, RATES)
    assert [c.change for c in work.changes] == ["added"] * 3 + ["merged"]
    survivor = work.pb.bullets[work.changes[-1].into or ""]
    assert {survivor.content, *survivor.aliases} == {old, texts[2]}
    assert sorted(b.content for b in work.pb.bullets.values()) == sorted(texts)


def test_pruning_breaks_decay_ties_by_helpful_count() -> None:
    rows = [bullet(i, i, helpful=h, created_at=0.0) for i, h in (("a", 0), ("b", 3), ("c", 1))]
    pb = playbook(*[(b, np.eye(3)[n].tolist()) for n, b in enumerate(rows)], clock=5)
    work = work_on(pb, max_bullets=2)
    refine.prune(work, RATES)
    assert sorted(work.pb.bullets) == ["b", "c"]


def test_update_tag_remove_and_checks() -> None:
    a = bullet("5d0b3d2e-6b0a-4d9c-8a36-3a8f0d7e9b11", "Use metric units.", helpful=1)
    pb = playbook((a, unit(1, 0)), clock=3)
    work = work_on(pb)
    ops = [
        DeltaOperation(type="TAG", bullet_id=a.id, helpful=2, neutral=1),
        DeltaOperation(
            type="UPDATE", bullet_id=a.id, content="Use SI units.", memory_type="procedural"
        ),
        DeltaOperation(type="TAG", bullet_id="00000000-0000-0000-0000-000000000000", harmful=1),
    ]
    deltas.apply(
        work, Delta(delta_id="d", operations=ops), {"Use SI units.": as_vector(unit(0, 1))}, None
    )
    b = work.pb.bullets[a.id]
    assert (b.helpful, b.neutral, b.content, b.memory_type) == (3, 1, "Use SI units.", "procedural")
    assert (b.semantic_strength, b.procedural_strength, b.procedural_access_index) == (0.0, 1.0, 3)
    assert [c.change for c in work.changes] == ["tagged", "updated"]  # the unknown id is skipped
    assert work.fresh == {a.id}
    deltas.apply(
        work,
        Delta(delta_id="e", operations=[DeltaOperation(type="REMOVE", bullet_id=a.id)]),
        {},
        None,
    )
    assert work.pb.bullets == {} and work.pb.vectors == {}

    policy = PlaybookPolicy(max_content_chars=20, max_operations=2)
    bad = [
        None,
        Delta(delta_id="", operations=[add("x")]),
        Delta(delta_id="d", operations=[]),
        Delta(delta_id="d", operations=[add("x")] * 3),
        Delta(delta_id="d", operations=[add("  ")]),
        Delta(delta_id="d", operations=[DeltaOperation(type="ADD")]),
        Delta(delta_id="d", operations=[add("y" * 21)]),
        Delta(delta_id="d", operations=[DeltaOperation(type="TAG", helpful=1)]),
        Delta(delta_id="d", operations=[DeltaOperation(type="REMOVE", bullet_id="nope")]),
        Delta(delta_id="d", operations=[DeltaOperation(type="TAG", bullet_id=a.id)]),
        Delta(delta_id="d", operations=[DeltaOperation(type="UPDATE", bullet_id=a.id)]),
    ]
    for delta in bad:
        with pytest.raises(BadRequest):
            deltas.check(delta, policy)


def test_snapshots_round_trip_exactly_and_seed_files_are_checked(tmp_path: Path) -> None:
    b = bullet("a", "x", "episodic", index=7, helpful=2, last_used=1.5, tags=["t"], user=None)
    [back] = decode(encode([b.model_copy(update={"score": 0.3})]))
    assert back == b  # retrieval fields are not part of a version

    good = tmp_path / "seed.yaml"
    good.write_text(
        "- content: Check facts first.\n  section: Memory\n  memory_type: procedural\n- Be brief.\n"
    )
    ops = seeds.load(good)
    assert [(o.type, o.content, o.section, o.memory_type) for o in ops] == [
        ("ADD", "Check facts first.", "Memory", "procedural"),
        ("ADD", "Be brief.", None, None),
    ]
    for text in (
        "{}",
        "- section: x\n",
        "- content: x\n  colour: red\n",
        "- content: x\n  memory_type: odd\n",
    ):
        (tmp_path / "bad.yaml").write_text(text)
        with pytest.raises(ConfigurationError, match="seed_bullets"):
            seeds.load(tmp_path / "bad.yaml")
    delta = seeds.seed_delta(KEY, ops)
    assert (
        delta.delta_id
        == seeds.seed_delta(KEY, ops).delta_id
        != seeds.seed_delta(ScopeKey("ws", "c"), ops).delta_id
    )


def test_reinforcement_gain_ties_strength_to_counters_when_enabled() -> None:
    proven = bullet("a", "x", helpful=5, harmful=1, index=0)  # semantic, unused for 40
    fresh = bullet("b", "y", index=40)
    pb = playbook((proven, [1.0, 0.0]), (fresh, [0.0, 1.0]), clock=40)

    plain = work_on(pb, max_bullets=1, reinforcement_gain=0.0)  # the seeds: recency decides
    refine.refine(plain, RATES)
    assert [(c.change, c.bullet_id) for c in plain.changes] == [("pruned", "a")]

    work = work_on(pb, max_bullets=1, reinforcement_gain=0.25)
    refine.refine(work, RATES)  # strength 1 + 0.25 * (5 - 1) = 2: 2 * 0.99^40 = 1.34 > 1.0
    assert work.pb.bullets["a"].semantic_strength == 2.0
    assert [(c.change, c.bullet_id) for c in work.changes] == [("pruned", "b")]
    q = Query(vector=as_vector([1.0, 0.0]), weights=Weights(relevance=0, strength=1, type=0))
    [found] = rank(work.pb, q, RATES, SEEDS_POLICY, 0.0)
    assert found.decay_score == pytest.approx(2 * 0.99**40)
    assert found.strength == found.score == 1.0  # normalised strength is capped at 1

    capped = PlaybookPolicy(reinforcement_gain=1.0, max_strength=3.0)
    assert bullets.strengthened(proven, capped).semantic_strength == 3.0
    harmful = proven.model_copy(update={"helpful": 0, "harmful": 9})
    assert bullets.strengthened(harmful, capped).semantic_strength == 0.1


def test_hybrid_relevance_adds_the_query_terms_a_bullet_holds() -> None:
    a = bullet("a", "retry the VX-9 deploy twice", "procedural", index=0)
    b = bullet("b", "deploys need a review", "procedural", index=0)
    pb = playbook((a, unit(0, 1, 0)), (b, unit(1, 1, 0)))
    q, weights = as_vector(unit(1, 0, 0)), PRESETS["relevance-dominant"]
    dense = rank(pb, Query(vector=q, text="the VX-9 deploy", weights=weights, top_k=2), RATES,
                 SEEDS_POLICY, 0.0)  # fmt: skip
    assert [x.id for x in dense] == ["b", "a"]
    query = Query(vector=q, text="the VX-9 deploy", weights=weights, top_k=2, hybrid=True)
    found = rank(pb, query, RATES, SEEDS_POLICY, 0.0)
    assert [x.id for x in found] == ["a", "b"]  # the rare id outweighs the cosine
    by_id = {x.id: x.relevance for x in found}
    assert by_id["a"] == pytest.approx(0.5)  # (cosine 0 + all the terms) / 2
    assert math.sqrt(0.5) / 2 < by_id["b"] < 0.5  # (cosine 0.71 + "deploy" alone) / 2
