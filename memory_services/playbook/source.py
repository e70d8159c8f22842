"""playbook-memory's recall source: the agent's playbook section, first in the memory part
of the prompt (named by ``kind.py``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from react_mem.agent.config import AgentMemConfig, Key
from react_mem.agent.items import Item, bullet_items
from react_mem.agent.sources import Ask, MemorySource, setting
from react_mem.clients.playbook import PLAYBOOK_MEMORY, PlaybookClient, PlaybookRef
from react_mem.schema.playbook import Weights


async def _playbook(ask: Ask) -> list[Item]:
    cfg, scope = ask.cfg, ask.scope
    which = PlaybookRef(
        collection=scope.collection, context=cfg.playbook_context_scope, user=scope.user
    )
    bullets = await PlaybookClient.of(ask.flow).retrieve(
        which,
        ask.question,  # also when a vector is given: Jaccard relevance needs the text
        vector=ask.vector,
        top_k=ask.top_k,
        relevance=setting(cfg, "playbook-relevance"),
        weights=setting(cfg, "playbook-weights"),
    )
    return bullet_items(bullets)


def _embeds(cfg: AgentMemConfig) -> bool:
    return bool(setting(cfg, "playbook-relevance") != "jaccard")


PLAYBOOK = MemorySource(
    name="playbook",
    service=PLAYBOOK_MEMORY,
    title="Playbook (strategies learned from past tasks):",
    share=0.25,
    section=0,
    share_key="playbook-token-share",
    fetch=_playbook,
    top_k="playbook-top-k",
    embeds=_embeds,
    keys=(
        # Bullets (ACE strategies) recalled per invocation; 0 turns the playbook off.
        Key("playbook-top-k", Annotated[int, Field(ge=0, le=200)], 8),
        # Retrieval weights: a preset (``default``, ``relevance-dominant``) or JSON weights.
        Key("playbook-weights", Literal["default", "relevance-dominant"] | Weights, "default"),
        Key("playbook-relevance", Literal["embedding", "jaccard", "hybrid"], "embedding"),
    ),
)
