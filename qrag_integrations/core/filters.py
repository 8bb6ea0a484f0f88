"""The metadata filter language every search path checks chunks with: parsed once into a small
tree, then evaluated on each chunk's metadata.

Forms (the operator dicts of LangChain vector stores, Chroma and PGVector):

- ``{"key": value}``: the value equals ``value``; ``{"key": [v1, v2]}``: it equals one of them;
- ``{"key": {"$op": operand, ...}}`` with ``$eq $ne $gt $gte $lt $lte $in $nin`` plus
  ``$contains`` (a list holding the operand, or a string holding it as a substring) and
  ``$exists`` (``True``: the key is present), several operators on one key all holding;
- ``{"$and": [f, ...]}``, ``{"$or": [f, ...]}``, ``{"$not": f}``; several keys in one mapping
  all hold.

Meaning: a value compares whole (a list-valued field equals only an equal list: use
``$contains`` for membership); ``bool`` is its own type (``True`` is not ``1``); ``int`` and
``float`` compare as numbers; ``$gt``... compare two numbers or two strings, anything else does
not match. A missing key matches nothing but ``$ne``, ``$nin``, ``$exists: False`` and ``$not``
(the complement of ``$eq`` / ``$in`` / the inner filter). ``None`` is a value: ``{"k": None}``
matches ``k`` present and ``None``. Keys are flat: ``"a.b"`` names the key ``"a.b"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from qrag_integrations.core.errors import QRAGError

#: Operators on one key.
FIELD_OPERATORS = (
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$contains",
    "$exists",
)
#: Operators combining filters.
LOGICAL_OPERATORS = ("$and", "$or", "$not")
_ORDER = {"$gt", "$gte", "$lt", "$lte"}
_LISTS = (list, tuple, set, frozenset)
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Field:
    """One operator on one key (``op`` one of :data:`FIELD_OPERATORS`)."""

    key: str
    op: str
    operand: Any


@dataclass(frozen=True)
class AllOf:
    """Every part holds (no parts: always)."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class AnyOf:
    """Some part holds (no parts: never)."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """The part does not hold."""

    part: Node


Node = Field | AllOf | AnyOf | Not


def _supported() -> str:
    return (
        "supported: {key: value}, {key: [values]} (any of), {key: {op: operand}} with op one of "
        f"{', '.join(FIELD_OPERATORS)}, or {', '.join(LOGICAL_OPERATORS)} over filters"
    )


def _is_json(value: Any) -> bool:
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, _LISTS):
        return all(_is_json(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def _plain(value: Any) -> Any:
    """``value`` with tuples and sets as lists and mappings as dicts (how metadata is stored)."""
    if isinstance(value, _LISTS):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _operand(key: str, op: str, operand: Any) -> Any:
    """``operand`` checked for ``op``, in the form :func:`matches` reads."""

    def refuse(want: str) -> QRAGError:
        return QRAGError(f"filter on {key!r}: {op} takes {want}, got {operand!r}")

    if op in ("$eq", "$ne"):
        if not _is_json(operand):
            raise refuse("a str, int, float, bool, None, or a list / dict of those")
        return _plain(operand)
    if op in _ORDER:
        if isinstance(operand, bool) or not isinstance(operand, (int, float, str)):
            raise refuse("a number or a string")
        return operand
    if op in ("$in", "$nin"):
        if not isinstance(operand, _LISTS) or not all(isinstance(v, _SCALARS) for v in operand):
            raise refuse("a list of str, int, float, bool or None")
        return tuple(operand)
    if op == "$contains":
        if not isinstance(operand, _SCALARS):
            raise refuse("a str, int, float, bool or None")
        return operand
    if not isinstance(operand, bool):  # $exists
        raise refuse("True or False")
    return operand


def _field(key: str, value: Any) -> Node:
    if isinstance(value, Mapping):
        if not value:
            raise QRAGError(f"filter on {key!r}: an empty operator dict; {_supported()}")
        parts: list[Node] = []
        for op, operand in value.items():
            if op == "$not":
                if not isinstance(operand, Mapping):
                    raise QRAGError(
                        f"filter on {key!r}: $not takes an operator dict, got {operand!r}"
                    )
                parts.append(Not(_field(key, operand)))
            elif op in FIELD_OPERATORS:
                parts.append(Field(key, op, _operand(key, op, operand)))
            else:
                hint = (
                    ""
                    if str(op).startswith("$")
                    else ' (a dict value is matched by {"$eq": {...}})'
                )
                raise QRAGError(f"filter on {key!r}: unknown operator {op!r}{hint}; {_supported()}")
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))
    if isinstance(value, _LISTS):
        return Field(key, "$in", _operand(key, "$in", value))
    if isinstance(value, _SCALARS):
        return Field(key, "$eq", value)
    raise QRAGError(f"filter on {key!r}: cannot match a {type(value).__name__}; {_supported()}")


def parse_filter(filter: Mapping[str, Any]) -> Node:
    """The tree a filter mapping stands for.

    Raises:
        QRAGError: not a mapping, an unknown operator, or an operand of the wrong type (the
            message names the supported forms).
    """
    if not isinstance(filter, Mapping):
        raise QRAGError(
            f"filter must be a mapping or a callable, got {type(filter).__name__}; {_supported()}"
        )
    parts: list[Node] = []
    for key, value in filter.items():
        if not isinstance(key, str):
            raise QRAGError(f"filter keys are strings, got {key!r}")
        if key in ("$and", "$or"):
            if not isinstance(value, _LISTS) or not all(isinstance(v, Mapping) for v in value):
                raise QRAGError(f"{key} takes a list of filters, got {value!r}")
            inner = tuple(parse_filter(v) for v in value)
            parts.append(AllOf(inner) if key == "$and" else AnyOf(inner))
        elif key == "$not":
            parts.append(Not(parse_filter(value)))
        elif key.startswith("$"):
            raise QRAGError(f"unknown operator {key!r}; {_supported()}")
        else:
            parts.append(_field(key, value))
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "none"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "dict"
    return type(value).__name__


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``bool`` apart from numbers, numbers by value, lists and dicts item by item."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "list":
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if kind == "dict":
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if kind in ("bool", "number", "str", "none"):
        return bool(a == b)
    return False


def _ordered(op: str, value: Any, operand: Any) -> bool:
    kind = _kind(operand)
    if _kind(value) != kind or (kind == "number" and (math.isnan(value) or math.isnan(operand))):
        return False
    if op == "$gt":
        return bool(value > operand)
    if op == "$gte":
        return bool(value >= operand)
    if op == "$lt":
        return bool(value < operand)
    return bool(value <= operand)


def _field_matches(node: Field, meta: Mapping[str, Any]) -> bool:
    op, there = node.op, node.key in meta
    if op == "$exists":
        return there == node.operand
    if op in ("$ne", "$nin"):
        return not _field_matches(
            Field(node.key, "$eq" if op == "$ne" else "$in", node.operand), meta
        )
    if not there:
        return False
    value = meta[node.key]
    if op == "$eq":
        return same(value, node.operand)
    if op == "$in":
        return any(same(value, v) for v in node.operand)
    if op == "$contains":
        if isinstance(value, list):
            return any(same(v, node.operand) for v in value)
        return isinstance(value, str) and isinstance(node.operand, str) and node.operand in value
    return _ordered(op, value, node.operand)


def matches(node: Node, meta: Mapping[str, Any]) -> bool:
    """Whether metadata ``meta`` passes ``node``."""
    if isinstance(node, Field):
        return _field_matches(node, meta)
    if isinstance(node, AllOf):
        return all(matches(p, meta) for p in node.parts)
    if isinstance(node, AnyOf):
        return any(matches(p, meta) for p in node.parts)
    return not matches(node.part, meta)


def compile_filter(
    filter: Mapping[str, Any] | Callable[[dict[str, Any]], bool],
) -> Callable[[Mapping[str, Any]], bool]:
    """The test on a chunk's metadata a filter stands for: a mapping parsed (and checked) once, a
    callable as it is.

    Raises:
        QRAGError: see :func:`parse_filter`.
    """
    if callable(filter) and not isinstance(filter, Mapping):
        return filter
    node = parse_filter(filter)
    return lambda meta: matches(node, meta)
