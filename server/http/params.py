"""Query-string parameters read the same way by every blueprint: IRIs and bounded integers."""
from __future__ import annotations

from flask import request
from pyoxigraph import NamedNode

from server.errors import BadRequest

MAX_IRI = 4096  # characters of an IRI parameter: /resource repeats it in its Link headers, one per format


def bounded_iri_text(name: str, value: str) -> str:
    """``value`` of IRI parameter ``name``; 400 past ``MAX_IRI`` characters, before anything repeats it."""
    if len(value) > MAX_IRI:
        raise BadRequest(f"'{name}' is {len(value):,} characters long; an IRI parameter may have at most "
                         f"{MAX_IRI:,}")
    return value


def iri_parameter(name: str) -> NamedNode:
    """The required parameter ``name`` as an IRI; 400 when it is missing or not an IRI."""
    value = request.args.get(name)
    if not value:
        raise BadRequest(f"missing parameter '{name}' (an IRI)")
    bounded_iri_text(name, value)
    try:
        return NamedNode(value)
    except ValueError as error:
        raise BadRequest(f"'{name}' is not an IRI: {error}") from None


def int_parameter(name: str, default: int, low: int, high: int) -> int:
    """The optional parameter ``name`` as an integer from ``low`` to ``high``; 400 otherwise."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"'{name}' must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"'{name}' must be between {low} and {high}, got {value}")
    return value
