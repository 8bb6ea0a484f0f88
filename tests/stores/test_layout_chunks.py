"""Every store layout lists its chunks' ids and texts in rank order (``ids()[i]`` is the chunk
at document-order rank ``i``), filtered and unfiltered, as the in-memory index orders them."""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client import models
from test_stores import KINDS, TEXTS, exact_index, fill, model, open_source  # noqa: F401

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.stores.rows import SortedKeys

FILTERS = [None, {"kind": "odd"}, {"i": [1, 2, 12]}]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("filter", FILTERS, ids=["all", "odd", "three"])
def test_ids_and_texts_are_in_rank_order(model: QRAGModel, kind: str, filter) -> None:  # noqa: F811
    source = open_source(kind, model)
    fill(source, model)
    layout = source.layout(filter)
    snapshot = exact_index(model).snapshot()
    rows = snapshot.rows_matching(filter)
    want = [snapshot.chunks[r] for r in (range(len(snapshot)) if rows is None else rows)]
    assert list(layout.ids()) == [c.id for c in want]
    assert list(layout.texts()) == [c.text for c in want]
    assert len(layout.ids()) == layout.n
    # the ranks a search gives the store's candidates point at the same chunks
    found = source.candidates(model.embed_chunks(["where is the apple"])[0].numpy(), 14, filter)
    admitted = [i for i, c in enumerate(found.chunks) if c.id in set(layout.ids())]
    ranks = layout.ranks(found.keys[admitted]).tolist()
    assert [layout.ids()[r] for r in ranks] == [found.chunks[i].id for i in admitted]
    assert [layout.texts()[r] for r in ranks] == [found.chunks[i].text for i in admitted]


def test_qdrant_layouts_of_a_native_filter_list_its_chunks(model: QRAGModel) -> None:  # noqa: F811
    odd = models.Filter(
        must=[models.FieldCondition(key="metadata.kind", match=models.MatchValue(value="odd"))]
    )
    want = exact_index(model).snapshot()
    want_ids = [c.id for c in want.chunks if c.metadata["kind"] == "odd"]
    for kind in ("qdrant", "qdrant-count"):
        source = open_source(kind, model)
        fill(source, model)
        layout = source.layout(odd)
        assert list(layout.ids()) == want_ids
        assert list(layout.texts()) == [TEXTS[int(i[1:])] for i in want_ids]


def test_sorted_keys_permute_ids_and_texts_with_the_keys() -> None:
    keys = [(1, 0), (0, 1), (0, 0), (2, 0)]
    layout = SortedKeys(keys, ["b", "a10", "a10", "a9"], ["x", "y", "z", "w"], ["X", "Y", "Z", "W"])
    # documents by id in natural order: a9 < a10 < b
    assert list(layout.ids()) == ["w", "z", "y", "x"]
    assert list(layout.texts()) == ["W", "Z", "Y", "X"]
    assert layout.ranks(np.array([[0, 1], [2, 0]])).tolist() == [2, 0]
    bare = SortedKeys(keys)
    with pytest.raises(QRAGError, match="without chunk ids"):
        bare.ids()
    with pytest.raises(QRAGError, match="without texts"):
        bare.texts()
    with pytest.raises(QRAGError, match="ids has 1 entries for 4 keys"):
        SortedKeys(keys, ids=["x"])
