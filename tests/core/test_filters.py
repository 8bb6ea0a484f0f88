"""The metadata filter language (qrag_integrations.core.filters): every form's meaning, the
refusals, and a property test against the reference of tests/filter_reference.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from filter_reference import FILTERS, METADATA, reference
from hypothesis import given, settings
from hypothesis import strategies as st

from qrag_integrations.core.chunks import Chunk, Snapshot, mapping_filter
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.filters import compile_filter, parse_filter


@settings(max_examples=300, deadline=None, database=None)
@given(metas=st.lists(METADATA, max_size=8), flt=FILTERS)
def test_the_compiled_filter_is_the_reference(
    metas: list[dict[str, Any]], flt: dict[str, Any]
) -> None:
    test = compile_filter(flt)
    assert [test(m) for m in metas] == [reference(m, flt) for m in metas]


@settings(max_examples=50, deadline=None, database=None)
@given(metas=st.lists(METADATA, min_size=1, max_size=8), flt=FILTERS)
def test_rows_matching_are_the_reference_rows(
    metas: list[dict[str, Any]], flt: dict[str, Any]
) -> None:
    chunks = tuple(Chunk(f"c{i}", "x", m, "d", i) for i, m in enumerate(metas))
    snap = Snapshot(chunks, torch.zeros(len(metas), 2))
    rows = snap.rows_matching(flt)
    assert rows is not None and rows.dtype == np.int64
    assert rows.tolist() == [i for i, m in enumerate(metas) if reference(m, flt)]


# -- each form, spelled out ---------------------------------------------------------------------------
ROWS = [
    {"t": "a", "n": 1},
    {"t": "b", "n": 2.5},
    {"t": None, "n": True},
    {"t": ["a", "b"], "n": "2"},
    {"n": 0},
    {"t": "abc", "n": 1.0},
]


def matching(flt: Any) -> list[int]:
    test = compile_filter(flt)
    return [i for i, m in enumerate(ROWS) if test(m)]


@pytest.mark.parametrize(
    ("flt", "want"),
    [
        ({}, [0, 1, 2, 3, 4, 5]),
        ({"t": "a"}, [0]),  # a list holding "a" is not "a"
        ({"t": ["a", "b"]}, [0, 1]),  # any of
        ({"t": None}, [2]),  # present and None; a missing key is not None
        ({"n": 1}, [0, 5]),  # 1 is 1.0, True is not 1
        ({"n": True}, [2]),
        ({"t": {"$eq": "a"}}, [0]),
        ({"t": {"$eq": ["a", "b"]}}, [3]),  # $eq compares whole values, lists too
        ({"t": {"$ne": "a"}}, [1, 2, 3, 4, 5]),  # missing keys too: not $eq
        ({"t": {"$in": ["b", None]}}, [1, 2]),
        ({"t": {"$nin": ["b", None]}}, [0, 3, 4, 5]),
        ({"n": {"$gt": 1}}, [1]),  # "2" and True are no numbers
        ({"n": {"$gte": 1}}, [0, 1, 5]),
        ({"n": {"$lt": 1}}, [4]),
        ({"n": {"$lte": 1.0}}, [0, 4, 5]),
        ({"t": {"$gt": "a"}}, [1, 5]),  # strings compare as strings
        ({"n": {"$gt": 0, "$lt": 2}}, [0, 5]),  # several operators: all hold
        ({"t": {"$contains": "a"}}, [0, 3, 5]),  # a list holding it, a string holding it
        ({"t": {"$exists": True}}, [0, 1, 2, 3, 5]),
        ({"t": {"$exists": False}}, [4]),
        ({"t": {"$not": {"$eq": "a"}}}, [1, 2, 3, 4, 5]),
        ({"$and": [{"t": "a"}, {"n": 1}]}, [0]),
        ({"$or": [{"t": "a"}, {"n": 0}]}, [0, 4]),
        ({"$not": {"t": "a"}}, [1, 2, 3, 4, 5]),
        ({"$and": []}, [0, 1, 2, 3, 4, 5]),
        ({"$or": []}, []),
        ({"t": "a", "n": 2.5}, []),  # several keys: all hold
        ({"t.x": "a"}, []),  # keys are flat
        (lambda m: m.get("n") == 0, [4]),  # a callable, in memory
    ],
)
def test_each_form_means_what_the_table_says(flt: Any, want: list[int]) -> None:
    assert matching(flt) == want
    if not callable(flt):
        assert want == [i for i, m in enumerate(ROWS) if reference(m, flt)]


@pytest.mark.parametrize(
    ("flt", "names"),
    [
        ({"t": {"$like": "a%"}}, ["'$like'", "$eq", "$contains", "$exists"]),
        ({"$nor": [{"t": "a"}]}, ["'$nor'", "$and", "$or", "$not"]),
        ({"t": {"y": 1}}, ["'y'", '{"$eq": {...}}']),
        ({"t": {}}, ["empty operator dict"]),
        ({"t": {"$in": "a"}}, ["$in takes a list"]),
        ({"t": {"$nin": 3}}, ["$nin takes a list"]),
        ({"t": {"$in": [["a"]]}}, ["$in takes a list of str"]),
        ({"t": {"$gt": None}}, ["$gt takes a number or a string"]),
        ({"t": {"$gt": True}}, ["$gt takes a number or a string"]),
        ({"t": {"$exists": 1}}, ["$exists takes True or False"]),
        ({"t": {"$contains": ["a"]}}, ["$contains takes a str"]),
        ({"t": {"$eq": object()}}, ["$eq takes"]),
        ({"t": object()}, ["cannot match a object"]),
        ({"$and": {"t": "a"}}, ["$and takes a list of filters"]),
        ({"$or": ["t"]}, ["$or takes a list of filters"]),
        ({"$not": "t"}, ["filter must be a mapping"]),
        ({"t": {"$not": "a"}}, ["$not takes an operator dict"]),
        ({1: "a"}, ["filter keys are strings"]),
    ],
)
def test_a_bad_filter_is_refused_naming_what_is_supported(flt: Any, names: list[str]) -> None:
    with pytest.raises(QRAGError) as err:
        parse_filter(flt)
    for name in names:
        assert name in str(err.value)


def test_mapping_filter_keeps_its_contract() -> None:
    assert mapping_filter({"t": {"$in": ["a", "b"]}})({"t": "b"})
    with pytest.raises(QRAGError, match="mapping or a callable"):
        mapping_filter(lambda m: True)  # type: ignore[arg-type]


def test_a_type_mismatch_does_not_match_and_does_not_crash() -> None:
    test = compile_filter({"n": {"$gt": "a"}})
    assert [test(m) for m in ({"n": 1}, {"n": None}, {"n": [1]}, {"n": {"x": 1}}, {"n": "b"})] == [
        False,
        False,
        False,
        False,
        True,
    ]
    assert not compile_filter({"n": {"$lt": 1}})({"n": float("nan")})
