"""LlamaIndex ``MetadataFilters`` in the filter language of :mod:`qrag_integrations.core.filters`,
and the one normalisation a search applies to the filter it is given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.filters import parse_filter

#: LlamaIndex operators with a counterpart of the same meaning.
_SAME = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$contains",
}
_MAPPED = [*_SAME, FilterOperator.ANY, FilterOperator.ALL, FilterOperator.IS_EMPTY]


def _values(f: MetadataFilter) -> list[Any]:
    if not isinstance(f.value, list):
        raise QRAGError(
            f"LlamaIndex filter on {f.key!r}: {f.operator.name} takes a list, got {f.value!r}"
        )
    return list(f.value)


def _one(f: MetadataFilter) -> dict[str, Any]:
    key, op = f.key, f.operator
    if op == FilterOperator.TEXT_MATCH and not isinstance(f.value, str):
        raise QRAGError(f"LlamaIndex filter on {key!r}: TEXT_MATCH takes a string, got {f.value!r}")
    if op in (FilterOperator.IN, FilterOperator.NIN):
        return {key: {_SAME[op]: _values(f)}}
    if op in _SAME:
        return {key: {_SAME[op]: f.value}}
    if op in (FilterOperator.ANY, FilterOperator.ALL):
        parts = [{key: {"$contains": v}} for v in _values(f)]
        return {"$or" if op == FilterOperator.ANY else "$and": parts}
    if op == FilterOperator.IS_EMPTY:  # missing, None, "" or []
        return {"$or": [{key: {"$exists": False}}, {key: None}, {key: ""}, {key: {"$eq": []}}]}
    raise QRAGError(
        f"LlamaIndex filter on {key!r}: operator {op.name} has no counterpart here; supported: "
        f"{', '.join(o.name for o in _MAPPED)}"
    )


def from_llama_filters(filters: MetadataFilters | MetadataFilter) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` (nested ones too) as a filter mapping: ``AND`` / ``OR`` as
    ``$and`` / ``$or``, ``NOT`` (none of the filters holds) as ``$not`` over their ``$or``.

    Raises:
        QRAGError: an operator without a counterpart (``TEXT_MATCH_INSENSITIVE``), or a value
            of the wrong shape.
    """
    if isinstance(filters, MetadataFilter):
        return _one(filters)
    parts = [from_llama_filters(f) for f in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return {"$and": parts}
    if condition == FilterCondition.OR:
        return {"$or": parts}
    if condition == FilterCondition.NOT:
        return {"$not": {"$or": parts}}
    raise QRAGError(
        f"LlamaIndex filter condition {condition!r} has no counterpart here: AND, OR, NOT"
    )


def as_filter(filter: Any) -> Any:
    """The filter a search runs with: LlamaIndex ``MetadataFilters`` converted, a mapping checked
    (so a bad one is refused before any search), anything else (``None``, a callable, a store's
    own filter object) as it is.

    Raises:
        QRAGError: a mapping that is no filter, or ``MetadataFilters`` without a counterpart.
    """
    if isinstance(filter, (MetadataFilters, MetadataFilter)):
        return from_llama_filters(filter)
    if isinstance(filter, Mapping):
        parse_filter(filter)
    return filter
