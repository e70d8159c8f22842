"""The consolidation report that fact- and episode-memory responses carry."""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel


class ConsolidationCluster(WireModel):
    """One merge: the absorbed memories and the one they merged into."""

    #: The survivor: the cluster's best member, kept with its id and content.
    into: str = ""
    #: The members merged into it; kept as history, restored by ``unconsolidate``.
    absorbed: list[str] = Field(default_factory=list)
    #: The lowest cosine similarity of an absorbed member to the survivor.
    similarity: float = 0.0


class ConsolidationReport(WireModel):
    """What a ``consolidate`` pass did (or, with ``dry_run``, would do), or what an
    ``unconsolidate`` restored. A repeated request with the same id gets the stored report."""

    consolidation_id: str = ""
    #: ``planned`` (a dry run: nothing written), ``applied``, or ``undone``.
    state: str = ""
    dry_run: bool = False
    similarity_threshold: float = 0.0
    importance_threshold: float = 0.0
    #: Only memories below this were merged into another (seed 002's ``min_importance``);
    #: those from it up to ``importance_threshold`` could only take others in.
    min_importance: float | None = None
    #: Memories below the importance threshold that the pass compared.
    candidates: int = 0
    #: Memories at or above the importance threshold: never merged, never changed.
    preserved: int = 0
    #: Memories absorbed into another (the sum of ``len(absorbed)`` over the clusters).
    merged: int = 0
    clusters: list[ConsolidationCluster] = Field(default_factory=list)
    #: How much smaller the live memory became: the bytes of the absorbed memories' content
    #: less what their survivors gained (see each service's schema for what is counted).
    bytes_saved: int = 0
    #: False when the pass stopped at the service's candidate limit; run it again.
    complete: bool = True
    #: ``unconsolidate``: absorbed memories made live again (a deleted or expired one is not).
    restored: int = 0
