"""A request's :class:`~react_mem.schema.retrieval.RetrievalOptions` over a service's default
:class:`~memory_services.store.base.Retrieval`."""

from __future__ import annotations

import dataclasses

from memory_services.store.base import DEFAULT_RETRIEVAL, Retrieval
from react_mem.errors import BadRequest
from react_mem.schema.retrieval import RetrievalOptions


def time_boost(options: RetrievalOptions | None) -> bool:
    """Whether a request's time expressions may boost records of that time (default: yes)."""
    return options is None or options.time_boost is None or options.time_boost


def resolve(options: RetrievalOptions | None, default: Retrieval = DEFAULT_RETRIEVAL) -> Retrieval:
    """The retrieval a request asks for, or a BadRequest if it makes no sense."""
    if options is None:
        return default
    dense, terms = default.weights
    try:
        return dataclasses.replace(
            default,
            mode=options.mode or default.mode,
            fusion=options.fusion or default.fusion,
            weights=(
                dense if options.dense_weight is None else options.dense_weight,
                terms if options.lexical_weight is None else options.lexical_weight,
            ),
            neighbour_lift=(
                default.neighbour_lift if options.neighbour_lift is None else options.neighbour_lift
            ),
            ask_discount=default.ask_discount if options.priors in (None, True) else 0.0,
            length_prior=default.length_prior if options.priors in (None, True) else 0.0,
            sentence_max=(default.sentence_max if options.sentences is None else options.sentences),
        )
    except ValueError as exc:
        raise BadRequest(f"retrieval: {exc}") from None
