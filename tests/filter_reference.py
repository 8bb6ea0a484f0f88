"""The metadata filter language's meaning, spelled out independently of
qrag_integrations.core.filters (the reference its tests compare with), and random metadata and
filters over it."""

from __future__ import annotations

import operator
from typing import Any

from hypothesis import strategies as st

from qrag_integrations.core.filters import FIELD_OPERATORS

_ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: True is not 1, 1 is 1.0, lists item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) or _number(b):
        return _number(a) and _number(b) and a == b
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b))
        )
    return type(a) is type(b) and a == b


def reference_op(meta: dict[str, Any], key: str, op: str, arg: Any) -> bool:
    present, value = key in meta, meta.get(key)
    if op == "$exists":
        return present == arg
    if op == "$ne":
        return not reference_op(meta, key, "$eq", arg)
    if op == "$nin":
        return not reference_op(meta, key, "$in", arg)
    if op == "$not":
        return not all(reference_op(meta, key, o, a) for o, a in arg.items())
    if not present:
        return False
    if op == "$eq":
        return json_equal(value, arg)
    if op == "$in":
        return any(json_equal(value, a) for a in arg)
    if op == "$contains":
        if isinstance(value, list):
            return any(json_equal(x, arg) for x in value)
        return isinstance(value, str) and isinstance(arg, str) and arg in value
    if (_number(value) and _number(arg)) or (isinstance(value, str) and isinstance(arg, str)):
        return bool(_ORDER[op](value, arg))
    return False


def reference(meta: dict[str, Any], flt: dict[str, Any]) -> bool:
    """Whether ``meta`` passes ``flt`` as docs/retriever.md's filter table defines it."""
    for key, cond in flt.items():
        if key == "$and":
            ok = all(reference(meta, f) for f in cond)
        elif key == "$or":
            ok = any(reference(meta, f) for f in cond)
        elif key == "$not":
            ok = not reference(meta, cond)
        elif isinstance(cond, dict):
            ok = all(reference_op(meta, key, op, arg) for op, arg in cond.items())
        elif isinstance(cond, list):
            ok = reference_op(meta, key, "$in", cond)
        else:
            ok = reference_op(meta, key, "$eq", cond)
        if not ok:
            return False
    return True


# -- random metadata and filters -------------------------------------------------------------------
KEYS = ["t", "n", "tags"]
SCALAR = st.one_of(
    st.sampled_from(["a", "b", "ab", ""]),
    st.integers(-2, 2),
    st.sampled_from([0.5, 1.0, -1.5]),
    st.booleans(),
    st.none(),
)
VALUE = st.one_of(SCALAR, SCALAR, st.lists(SCALAR, max_size=2))
METADATA = st.dictionaries(st.sampled_from(KEYS), VALUE, max_size=3)
ORDERED = st.one_of(st.integers(-2, 2), st.sampled_from([0.5, -1.5, "a", "b", "ab"]))


def operands(op: str) -> st.SearchStrategy[Any]:
    if op in ("$eq", "$ne"):
        return st.one_of(SCALAR, SCALAR, st.lists(SCALAR, max_size=2))
    if op in ("$in", "$nin"):
        return st.lists(SCALAR, max_size=3)
    if op in _ORDER:
        return ORDERED
    if op == "$contains":
        return SCALAR
    return st.booleans()  # $exists


@st.composite
def operator_dicts(draw: st.DrawFn) -> dict[str, Any]:
    ops = draw(st.lists(st.sampled_from(FIELD_OPERATORS), min_size=1, max_size=2, unique=True))
    out = {op: draw(operands(op)) for op in ops}
    if draw(st.integers(0, 5)) == 0:
        out = {"$not": out}
    return out


LEAF = st.dictionaries(
    st.sampled_from(KEYS),
    st.one_of(SCALAR, st.lists(SCALAR, max_size=3), operator_dicts(), operator_dicts()),
    min_size=1,
    max_size=2,
)
FILTERS = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.builds(lambda fs: {"$and": fs}, st.lists(inner, max_size=3)),
        st.builds(lambda fs: {"$or": fs}, st.lists(inner, max_size=3)),
        st.builds(lambda f: {"$not": f}, inner),
        st.builds(lambda a, b: {**a, **b}, inner, LEAF),
    ),
    max_leaves=6,
)
