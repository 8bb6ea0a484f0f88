"""The payload layout a Q-RAG ingest writes to Qdrant (user keys under ``metadata.``) and
filters as Qdrant ``models.Filter`` on it.

A filter mapping is pushed down as a Qdrant filter that matches *at least* the chunks it matches
(Qdrant matches a list holding the value, ``1`` as ``1.0``): what Qdrant cannot say as it means
(``$ne``, ``$nin``, ``$not``, string ``$gt``..., ``$contains`` of a string, dotted keys, which
Qdrant reads as nested paths) is left out of the push-down, and every chunk Qdrant returns is
checked with :mod:`qrag_integrations.core.filters` in our code. A native ``models.Filter`` is
Qdrant's own to apply; its keys not already under ``metadata.`` are put there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from qdrant_client import models

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.filters import AllOf, AnyOf, Field, Node, parse_filter

#: Payload field holding a chunk's metadata (its ``doc_rank`` and ``order`` keys among them).
METADATA = "metadata"
Condition = models.Filter | models.FieldCondition | models.IsNullCondition | models.IsEmptyCondition
#: Top-level payload fields a native filter may name as they are.
_PAYLOAD_FIELDS = (f"{METADATA}.", "page_content")


def metadata_field(key: str) -> str:
    """The payload path of a metadata key."""
    return f"{METADATA}.{key}"


def _on(key: str, **what: Any) -> models.FieldCondition:
    return models.FieldCondition(key=metadata_field(key), **what)


def _equal(key: str, value: Any) -> Condition | None:
    """A condition matching at least the chunks whose ``key`` equals ``value``."""
    if isinstance(value, (bool, str)):
        return _on(key, match=models.MatchValue(value=value))
    if isinstance(value, (int, float)):
        return _on(key, range=models.Range(gte=value, lte=value)) if math.isfinite(value) else None
    if value is None:
        return models.IsNullCondition(is_null=models.PayloadField(key=metadata_field(key)))
    if value == []:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=metadata_field(key)))
    return None


def _field(node: Field) -> Condition | None:
    key, op, operand = node.key, node.op, node.operand
    if not key or any(c in key for c in '.[]"'):  # Qdrant would read a nested path
        return None
    if op == "$eq":
        return _equal(key, operand)
    if op == "$in":
        if not operand:
            return None
        strings = sorted({v for v in operand if isinstance(v, str)})
        parts = [_equal(key, v) for v in operand if not isinstance(v, str)]
        if strings:
            parts.append(_on(key, match=models.MatchAny(any=strings)))
        return None if any(p is None for p in parts) else models.Filter(should=parts)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(operand, str) or not math.isfinite(operand):
            return None
        return _on(key, range=models.Range(**{op[1:]: operand}))
    if op == "$contains" and not isinstance(operand, str):
        return _equal(key, operand) if operand is not None else None
    if op == "$exists" and not operand:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=metadata_field(key)))
    return None  # $ne, $nin, $contains of a string, $exists: True


def _push(node: Node) -> Condition | None:
    """A condition matching at least the chunks ``node`` matches; ``None``: no constraint."""
    if isinstance(node, Field):
        return _field(node)
    if isinstance(node, AllOf):
        parts = [c for c in (_push(p) for p in node.parts) if c is not None]
        return models.Filter(must=parts) if parts else None
    if isinstance(node, AnyOf):
        parts = [_push(p) for p in node.parts]
        if not parts or any(p is None for p in parts):
            return None
        return models.Filter(should=parts)
    return None  # $not: a looser inner condition would make its complement stricter


def _rekey(key: str) -> str:
    return key if key.startswith(_PAYLOAD_FIELDS) else metadata_field(key)


def _native(condition: Any) -> Any:
    """``condition`` of a native filter with its keys under ``metadata.``."""
    if isinstance(condition, models.Filter):
        return native_filter(condition)
    if isinstance(condition, models.FieldCondition):
        return condition.model_copy(update={"key": _rekey(condition.key)})
    if isinstance(condition, models.IsEmptyCondition):
        field = models.PayloadField(key=_rekey(condition.is_empty.key))
        return condition.model_copy(update={"is_empty": field})
    if isinstance(condition, models.IsNullCondition):
        return condition.model_copy(
            update={"is_null": models.PayloadField(key=_rekey(condition.is_null.key))}
        )
    if isinstance(condition, models.NestedCondition):  # inner keys are relative to the array
        nested = condition.nested.model_copy(update={"key": _rekey(condition.nested.key)})
        return condition.model_copy(update={"nested": nested})
    return condition  # HasId, HasVector: no payload key


def native_filter(filter: models.Filter) -> models.Filter:
    """A user's ``models.Filter`` on this layout: ``FieldCondition(key="package")`` reads
    ``metadata.package``; keys already under ``metadata.`` (or ``page_content``) stay."""

    def each(conditions: Any) -> Any:
        if conditions is None:
            return None
        if isinstance(conditions, list):
            return [_native(c) for c in conditions]
        return _native(conditions)

    update: dict[str, Any] = {
        "must": each(filter.must),
        "should": each(filter.should),
        "must_not": each(filter.must_not),
    }
    if filter.min_should is not None:
        update["min_should"] = filter.min_should.model_copy(
            update={"conditions": each(filter.min_should.conditions)}
        )
    return filter.model_copy(update=update)


def qdrant_filter(filter: Any) -> models.Filter | None:
    """The Qdrant filter a search pushes down: for a filter mapping one matching at least its
    chunks (``None``: nothing Qdrant can narrow by), a native ``models.Filter`` on this layout.

    Raises:
        QRAGError: a callable or other object Qdrant cannot run, or a mapping that is no filter.
    """
    if filter is None:
        return None
    if isinstance(filter, models.Filter):
        return native_filter(filter)
    if not isinstance(filter, Mapping):
        raise QRAGError(
            "a Qdrant store takes a filter mapping or a qdrant_client.models.Filter, not "
            f"{type(filter).__name__} (the filter runs inside Qdrant)"
        )
    pushed = _push(parse_filter(filter))
    if pushed is None or isinstance(pushed, models.Filter):
        return pushed
    return models.Filter(must=[pushed])
