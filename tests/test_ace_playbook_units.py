"""The playbook's learning rules as shipped (issue: ACE that learns by default), without a
store or bus: harmful marks demote and prune, proven bullets outlast fresh ones, unrelated
bullets stay out of a retrieval, topics are set and boost, merges keep to one memory type,
seed 003's delta JSON applies, and confidence follows the evidence (seed 002)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memory_services.playbook import deltas, refine
from memory_services.playbook.playbook import ALWAYS, Playbook, as_vector
from memory_services.playbook.records import PlaybookPolicy
from memory_services.playbook.retrieve import Query, rank
from memory_services.playbook.scoring import DecayRates, evidence_confidence
from react_mem.schema.playbook import Delta, DeltaOperation, Weights
from tests.test_playbook_units import KEY, bullet, playbook, unit

RATES = DecayRates()
#: Relevance only, so that a score is its relevance plus the boosts.
RELEVANCE = Weights(relevance=1, strength=0, type=0)


def work_on(pb: Playbook, **policy: object) -> deltas.Work:
    return deltas.Work(pb.copy(), 100.0, PlaybookPolicy(**policy))  # type: ignore[arg-type]


def test_by_default_a_proven_bullet_outlasts_fresh_ones_and_harmful_marks_demote() -> None:
    """Shipped defaults: 5 helpful marks, unused for 100 accesses, beat a fresh bullet (the
    seeds' fixed strength prunes it: 0.99^100 < 1), and one harmful mark too many prunes."""
    proven = bullet("a", "x", helpful=5, index=0)
    fresh = bullet("b", "y", helpful=1, index=100)
    doubted = bullet("c", "z", helpful=2, harmful=1, index=100)
    pb = playbook((proven, [1.0, 0.0]), (fresh, [0.0, 1.0]), (doubted, [0.6, 0.8]), clock=100)
    work = work_on(pb, max_bullets=2)
    refine.refine(work, RATES)
    assert [(c.change, c.bullet_id) for c in work.changes] == [("pruned", "c")]
    assert work.pb.bullets["a"].semantic_strength == 1 + 1.0 * 5  # the default gain, 1.0

    seeds_model = work_on(pb, max_bullets=2, reinforcement_gain=0.0)
    refine.refine(seeds_model, RATES)
    assert ("pruned", "a") in [(c.change, c.bullet_id) for c in seeds_model.changes]

    harmful = bullet("d", "w", helpful=1, harmful=2, index=100)
    work = work_on(playbook((harmful, [1.0, 0.0]), (fresh, [0.0, 1.0]), clock=100))
    refine.refine(work, RATES)  # room for both: seed 003's auto-pruning removes it anyway
    assert [(c.change, c.bullet_id) for c in work.changes] == [("pruned", "d")]
    kept = work_on(playbook((harmful, [1.0, 0.0])), harmful_margin=0)
    refine.refine(kept, RATES)
    assert kept.changes == [] and kept.pb.bullets["d"].semantic_strength == 0.1


def test_unrelated_bullets_stay_out_and_general_ones_take_few_places() -> None:
    related = bullet("r", "about the task", index=0)
    unrelated = [bullet(f"u{n}", f"other {n}", index=0) for n in range(3)]
    general = [bullet(f"g{n}", f"meta {n}", "procedural", tags=[ALWAYS]) for n in range(3)]
    pb = playbook(
        (related, unit(1, 0.2)),  # cosine 0.98
        *((b, unit(0.1, 1)) for b in unrelated),  # cosine 0.1: below the floor, 0.2
        *((b, unit(0, 1)) for b in general),  # cosine 0
    )
    q = Query(vector=as_vector(unit(1, 0)), weights=Weights(), top_k=8)
    policy = PlaybookPolicy()
    found = [b.id for b in rank(pb, q, RATES, policy, 0.0)]
    assert found[0] == "r" and set(found) == {"r", "g0", "g1"}  # two general places
    no_floor = Query(vector=q.vector, weights=Weights(), top_k=8, min_relevance=0.0)
    assert len(rank(pb, no_floor, RATES, policy, 0.0)) == 7


def test_a_bullet_gets_its_topic_from_the_delta_or_its_section_and_a_query_naming_it_boosts() -> (
    None
):
    pb = playbook()
    pb.dim = 2
    work = work_on(pb)
    texts = {
        "Quote VAT on the net price.": as_vector(unit(1, 0)),
        "Retry after a 429.": as_vector(unit(0, 1)),
    }
    delta = Delta(
        delta_id="d",
        topic="VAT",
        operations=[
            DeltaOperation(content="Quote VAT on the net price."),
            DeltaOperation(content="Retry after a 429.", section="HTTP errors", topic=None),
        ],
    )
    deltas.apply(work, Delta(delta_id="d", operations=delta.operations[1:]), texts, None)
    deltas.apply(work, delta.model_copy(update={"operations": delta.operations[:1]}), texts, None)
    topics = sorted(b.topic for b in work.pb.bullets.values())
    assert topics == ["HTTP errors", "VAT"]

    vat = next(b for b in work.pb.bullets.values() if b.topic == "VAT")
    asked = Query(vector=as_vector(unit(1, 0)), text="How much VAT is in 120?", weights=RELEVANCE)
    [scored] = [b for b in rank(work.pb, asked, RATES, PlaybookPolicy(), 0.0) if b.id == vat.id]
    assert scored.score == pytest.approx(1.0 + 0.1)  # relevance 1 + the topic boost
    other = Query(vector=asked.vector, text="How much tax is in 120?", weights=RELEVANCE)
    [plain] = [b for b in rank(work.pb, other, RATES, PlaybookPolicy(), 0.0) if b.id == vat.id]
    assert plain.score == pytest.approx(1.0)


def test_alike_bullets_of_two_memory_types_never_merge() -> None:
    procedure = bullet("p", "Check the invoice total first", "procedural", index=0)
    fact = bullet("f", "Check the invoice totals first.", "semantic", index=0)
    pb = playbook((procedure, unit(1, 0)), (fact, unit(1, 0.01)))
    work = work_on(pb)
    work.fresh = {"f"}
    refine.deduplicate(work)
    assert set(work.pb.bullets) == {"p", "f"} and work.changes == []
    same_type = work_on(playbook((procedure, unit(1, 0)), (fact.model_copy(
        update={"memory_type": "procedural", "procedural_strength": 1.0,
                "semantic_strength": 0.0}), unit(1, 0.01))))  # fmt: skip
    same_type.fresh = {"f"}
    refine.deduplicate(same_type)
    assert [c.change for c in same_type.changes] == ["merged"]

    # An ADD as alike as a reinforcement (0.9) of another type is a bullet of its own.
    adding = work_on(playbook((procedure, unit(1, 0))))
    text = "Check the invoice totals first!"
    add = DeltaOperation(content=text, memory_type="semantic")
    deltas.apply(adding, Delta(delta_id="a", operations=[add]),
                 {text: as_vector(unit(1, 0.01))}, None)  # fmt: skip
    assert [c.change for c in adding.changes] == ["added"]


def test_seed_003_delta_json_with_counters_in_metadata_applies() -> None:
    raw = """{"delta_id": "s3", "operations": [
        {"type": "ADD", "section": "Error Handling",
         "content": "When file not found, check parent directory first",
         "metadata": {"helpful": 1}},
        {"type": "ADD", "content": "Use absolute paths", "metadata": {"helpful": "3", "harmful": "1",
         "origin": "swe"}}]}"""
    delta = Delta.model_validate_json(raw)
    assert [(o.helpful, o.harmful, o.metadata) for o in delta.operations] == [
        (1, 0, {}),
        (3, 1, {"origin": "swe"}),
    ]
    pb = playbook()
    pb.dim = 2
    work = work_on(pb)
    texts = {o.content or "": as_vector(unit(1, n)) for n, o in enumerate(delta.operations)}
    deltas.apply(work, deltas.check(delta, work.policy), texts, None)
    assert sorted(b.helpful for b in work.pb.bullets.values()) == [1, 3]

    for bad in ('"lots"', "-1", "1.5", "true"):
        with pytest.raises(ValidationError, match=r"metadata\.helpful must be a whole number"):
            DeltaOperation.model_validate_json(
                f'{{"type": "TAG", "metadata": {{"helpful": {bad}}}}}'
            )
    with pytest.raises(ValidationError, match="give it once"):
        DeltaOperation.model_validate({"helpful": 2, "metadata": {"helpful": "3"}})


def test_confidence_follows_seed_002_from_the_evidence_and_fades_with_disuse() -> None:
    assert evidence_confidence(0, 0) == 0.5
    assert evidence_confidence(1, 0) == 1.0
    assert evidence_confidence(3, 1) == pytest.approx(0.75 + 0.04)
    assert evidence_confidence(10, 30) == pytest.approx(0.25 + 0.2)  # the boost's cap
    b = bullet("a", "x", helpful=3, harmful=1, index=0)
    work = work_on(playbook((b, unit(1, 0)), clock=10))
    refine.refine(work, RATES)
    assert work.pb.bullets["a"].confidence == pytest.approx(0.79)  # stored
    q = Query(vector=as_vector(unit(1, 0)), weights=Weights())
    [found] = rank(work.pb, q, RATES, PlaybookPolicy(), 0.0)
    assert found.confidence == pytest.approx(0.79 * 0.99**10)  # seed 002's recency factor


def test_scope_key_context_is_what_a_request_names() -> None:
    """Seed 001's context scopes: two contexts of one collection are two playbooks."""
    assert KEY.context == "ctx" and KEY.of(None).context_key == "c:ctx"
