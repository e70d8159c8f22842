"""playbook-memory's recall source: the agent's playbook section, first in the memory part
of the prompt (named by ``kind.py``)."""

from __future__ import annotations

from react_mem.agent.items import Item, bullet_items
from react_mem.agent.sources import Ask, MemorySource
from react_mem.clients.playbook import PLAYBOOK_MEMORY, Playbook, PlaybookClient


async def _playbook(ask: Ask) -> list[Item]:
    cfg, scope = ask.cfg, ask.scope
    which = Playbook(
        collection=scope.collection, context=cfg.playbook_context_scope, user=scope.user
    )
    bullets = await PlaybookClient.of(ask.flow).retrieve(
        which,
        ask.question,  # also when a vector is given: Jaccard relevance needs the text
        vector=ask.vector,
        top_k=ask.top_k,
        relevance=cfg.playbook_relevance,
        weights=cfg.playbook_weights,
    )
    return bullet_items(bullets)


PLAYBOOK = MemorySource(
    name="playbook",
    service=PLAYBOOK_MEMORY,
    title="Playbook (strategies learned from past tasks):",
    share=0.25,
    section=0,
    share_key="playbook-token-share",
    fetch=_playbook,
    top_k="playbook-top-k",
    embeds=lambda cfg: cfg.playbook_relevance != "jaccard",
)
