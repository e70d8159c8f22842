"""Shared wire primitives (TrustGraph ``schema/core/primitives.py``)."""

from __future__ import annotations

from react_mem.schema.base import WireModel


class Error(WireModel):
    type: str = ""
    message: str = ""


class Term(WireModel):
    """An RDF term: IRI (``i``), blank node (``b``), literal (``l``) or quoted triple (``t``)."""

    type: str = ""
    iri: str = ""
    id: str = ""
    value: str = ""
    datatype: str = ""
    language: str = ""
    triple: Triple | None = None


class Triple(WireModel):
    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    g: str | None = None


Term.model_rebuild()

__all__ = ["Error", "Term", "Triple"]
