"""fact-memory's recall source: the agent's "Long-term Facts" section (named by ``kind.py``)."""

from __future__ import annotations

from react_mem.agent.items import Item, fact_items
from react_mem.agent.sources import Ask, MemorySource
from react_mem.clients.facts import FACT_MEMORY, FactClient


async def _facts(ask: Ask) -> list[Item]:
    facts = await FactClient.of(ask.flow).retrieve(
        ask.owner,
        ask.question,  # also beside the vector: hybrid ranking reads its words
        vector=ask.vector,
        top_k=ask.top_k,
        min_score=ask.min_score,
        retrieval=ask.cfg.retrieval(),
    )
    return fact_items(facts)


FACTS = MemorySource(
    name="facts",
    service=FACT_MEMORY,
    title="Long-term Facts:",
    share=0.4,
    section=10,
    fetch=_facts,
    top_k="fact-retrieval-top-k",
    min_score="fact-min-score",
    embeds=lambda cfg: True,
)
