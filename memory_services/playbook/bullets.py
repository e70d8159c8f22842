"""What delta operations and grow-and-refine do to one bullet (pure: new copies returned).

- A new bullet's active memory type starts at strength 1.0, every access index at the
  scope's clock.
- Reinforcement (an ADD that repeats a bullet) and any helpful increment refresh the active
  access index, as seed 000's ``_touch_bullet`` does on retrieval or reinforcement.
- A reinforcement or merge keeps the other wording in ``aliases`` (up to ``MAX_ALIASES``).
- A merge (seed 000's canonical dedup) keeps the survivor's content, section, type and id;
  counters are summed; tags are united; metadata, user, topic and concept are the
  survivor's where it has them; the active strength is the larger and the access index the
  later of the two; the TTL is the longer (none if either has none).
- With a ``reinforcement_gain`` g > 0 (an option; the seeds keep strength at 1.0), the
  active strength follows the counters: 1 + g * (helpful - harmful), within
  [0.1, ``max_strength``], so decay-ordered pruning keeps proven bullets through longer
  gaps between uses; see :func:`strengthened`.
"""

from __future__ import annotations

from typing import Any

from memory_services.playbook.playbook import active_fields, active_strength, touched
from memory_services.playbook.records import (
    INITIAL_STRENGTH,
    MIN_STRENGTH,
    PlaybookPolicy,
    content_hash,
    normalise,
)
from memory_services.playbook.scoring import infer_memory_type
from react_mem.schema.playbook import Bullet, DeltaOperation

DEFAULT_SECTION = "general"
#: Wordings a bullet keeps besides its content (only restatements merge; see ``aliases``).
MAX_ALIASES = 16


def created(
    id: str,
    op: DeltaOperation,
    *,
    collection: str,
    context: str,
    user: str | None,
    clock: int,
    now: float,
    topic: str | None = None,
) -> Bullet:
    """A new bullet; its topic is the operation's, else ``topic`` (the delta's), else its
    section unless that is the default one (seed 000 sets a topic on every bullet)."""
    content = (op.content or "").strip()
    memory_type = op.memory_type or infer_memory_type(content)
    named = section(op.section)
    return Bullet(
        id=id,
        content=content,
        section=named or DEFAULT_SECTION,
        tags=united([], op.tags),
        helpful=op.helpful,
        harmful=op.harmful,
        neutral=op.neutral,
        topic=(op.topic or topic or ("" if named == DEFAULT_SECTION else named)).strip(),
        concept=op.concept or "",
        user=user or op.user,  # who asked: a caller cannot name another author
        collection=collection,
        context_scope_id=context,
        ttl_days=op.ttl_days,
        content_hash=content_hash(normalise(content)),
        created_at=now,
        updated_at=now,
        metadata=dict(op.metadata),
        **active_fields(memory_type, INITIAL_STRENGTH, clock),
    )


def reinforced(bullet: Bullet, op: DeltaOperation, *, clock: int, now: float) -> Bullet:
    """An ADD of content the bullet already holds: counters added, tags and metadata
    merged (the bullet's own values win), blanks filled, the access index refreshed."""
    return touched(
        bullet,
        clock,
        helpful=bullet.helpful + op.helpful,
        harmful=bullet.harmful + op.harmful,
        neutral=bullet.neutral + op.neutral,
        tags=united(bullet.tags, op.tags),
        metadata=op.metadata | bullet.metadata,
        user=bullet.user or op.user,
        topic=bullet.topic or op.topic or "",
        concept=bullet.concept or op.concept or "",
        ttl_days=longer_ttl(bullet.ttl_days, op.ttl_days),
        aliases=aliased(bullet, (op.content or "").strip()),
        updated_at=now,
    )


def updated(
    bullet: Bullet, op: DeltaOperation, *, content: str | None, clock: int, now: float
) -> Bullet:
    """UPDATE: new content (``content``, already checked), section, tags (replaced when
    given), memory type, topic, concept, user, TTL; counters added; metadata merged (the
    operation's values win)."""
    changes: dict[str, Any] = {
        "helpful": bullet.helpful + op.helpful,
        "harmful": bullet.harmful + op.harmful,
        "neutral": bullet.neutral + op.neutral,
        "metadata": bullet.metadata | op.metadata,
        "updated_at": now,
    }
    if content is not None:
        changes |= {"content": content, "content_hash": content_hash(normalise(content))}
    if section(op.section):
        changes["section"] = section(op.section)
    if op.tags:
        changes["tags"] = united([], op.tags)
    for name in ("topic", "concept", "user", "ttl_days"):
        if getattr(op, name) is not None:
            changes[name] = getattr(op, name)
    if op.memory_type is not None and op.memory_type != bullet.memory_type:
        changes |= active_fields(op.memory_type, active_strength(bullet), clock)
    result = bullet.model_copy(update=changes)
    return touched(result, clock) if op.helpful > 0 else result


def tagged(bullet: Bullet, op: DeltaOperation, *, clock: int, now: float) -> Bullet:
    """TAG: counters added, tags and metadata merged."""
    result = bullet.model_copy(
        update={
            "helpful": bullet.helpful + op.helpful,
            "harmful": bullet.harmful + op.harmful,
            "neutral": bullet.neutral + op.neutral,
            "tags": united(bullet.tags, op.tags),
            "metadata": bullet.metadata | op.metadata,
            "updated_at": now,
        }
    )
    return touched(result, clock) if op.helpful > 0 else result


def canonical(a: Bullet, b: Bullet) -> tuple[Bullet, Bullet]:
    """(survivor, merged): higher helpful - harmful, then newer, then the larger id."""
    rank_a = (a.helpful - a.harmful, a.created_at, a.id)
    rank_b = (b.helpful - b.harmful, b.created_at, b.id)
    return (a, b) if rank_a > rank_b else (b, a)


def merged(keep: Bullet, drop: Bullet, *, now: float) -> Bullet:
    kind = keep.memory_type
    strength = max(active_strength(keep), getattr(drop, f"{drop.memory_type}_strength"))
    index = max(
        getattr(keep, f"{kind}_access_index"), getattr(drop, f"{drop.memory_type}_access_index")
    )
    last_used = [t for t in (keep.last_used, drop.last_used) if t is not None]
    return keep.model_copy(
        update={
            "helpful": keep.helpful + drop.helpful,
            "harmful": keep.harmful + drop.harmful,
            "neutral": keep.neutral + drop.neutral,
            "tags": united(keep.tags, drop.tags),
            "metadata": drop.metadata | keep.metadata,
            "user": keep.user or drop.user,
            "topic": keep.topic or drop.topic,
            "concept": keep.concept or drop.concept,
            "ttl_days": longer_ttl(keep.ttl_days, drop.ttl_days),
            f"{kind}_strength": strength,
            f"{kind}_access_index": index,
            "last_used": max(last_used) if last_used else None,
            "aliases": aliased(keep, drop.content, *drop.aliases),
            "updated_at": now,
        }
    )


def strengthened(bullet: Bullet, policy: PlaybookPolicy) -> Bullet:
    """``bullet`` with its active strength set from its counters (a no-op at gain 0)."""
    gain = policy.reinforcement_gain
    if gain <= 0:
        return bullet
    net = bullet.helpful - bullet.harmful
    strength = min(policy.max_strength, max(MIN_STRENGTH, INITIAL_STRENGTH + gain * net))
    name = f"{bullet.memory_type}_strength"
    if getattr(bullet, name) == strength:
        return bullet
    return bullet.model_copy(update={name: strength})


def aliased(bullet: Bullet, *texts: str) -> list[str]:
    """``bullet``'s aliases plus each of ``texts`` it does not hold yet (by normalised text)."""
    aliases = list(bullet.aliases)
    held = {normalise(text) for text in (bullet.content, *aliases)}
    for text in texts:
        if (key := normalise(text)) and key not in held and len(aliases) < MAX_ALIASES:
            held.add(key)
            aliases.append(text)
    return aliases


def longer_ttl(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(a, b)


def united(tags: list[str], more: list[str]) -> list[str]:
    return list(dict.fromkeys([*tags, *(t.strip() for t in more if t.strip())]))


def section(value: str | None) -> str:
    return (value or "").strip()
