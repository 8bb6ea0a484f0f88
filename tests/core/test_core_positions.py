"""Position layouts (none / absolute / relative) and the twin-head RoPE rotation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.positions import (
    document_positions,
    layout,
    layout_runs,
    relative_layout,
    relative_positions_at,
    relative_runs,
    rope_inv_freq,
    rotate,
)

THETA = 10000.0


# --------------------------------------------------------------------------------------------
# reference implementations, written from the paper / reference code description
# --------------------------------------------------------------------------------------------
def _reference_relative(
    n: int, picks: list[int], step: int, span: float, dtype: type[np.floating]
) -> np.ndarray:
    """The reference code's loop with ``dtype`` storage: ``linspace(0, M, L) + offset`` per
    segment, an empty segment still advances the offset."""
    max_value = int(span * step)
    result = np.zeros(n, dtype=dtype)
    current, start = 0, 0
    for end in sorted(picks) + [n]:
        if end > start:
            result[start:end] = np.linspace(0, max_value, end - start) + current
            start = end
        current += step
    return result


def reference_relative_float32(
    n: int, picks: list[int], step: int, span: float = 0.9
) -> np.ndarray:
    """The reference code's loop: float32 storage of ``linspace(0, M, L) + offset`` per segment,
    an empty segment still advances the offset, then an int32 cast (truncation) for the lookup."""
    return _reference_relative(n, picks, step, span, np.float32).astype(np.int32).astype(np.int64)


def reference_relative_float64(
    n: int, picks: list[int], step: int, span: float = 0.9
) -> np.ndarray:
    """Same loop in float64, unrounded (floor applied by the caller)."""
    return _reference_relative(n, picks, step, span, np.float64)


def exact_relative(n: int, picks: list[int], step: int, span: float = 0.9) -> np.ndarray:
    """Plain-Python integer formula: segment j, i-th of L -> j * step + (i * M) // (L - 1)."""
    max_value = int(span * step)
    bounds = sorted(set(picks)) + [n]
    out = []
    start = 0
    for seg, end in enumerate(bounds):
        length = end - start
        for i in range(length):
            out.append(seg * step + ((i * max_value) // (length - 1) if length > 1 else 0))
        start = max(start, end)
    return np.array(out, dtype=np.int64)


def ref_rotate_vector(v: torch.Tensor, p: float, theta: float = THETA) -> torch.Tensor:
    """rotary_embedding_torch convention, one vector of size d: pair (v[2i], v[2i+1]) is rotated
    by angle ``p / theta ** (2i / d)``."""
    d = v.shape[-1]
    out = torch.empty(d, dtype=torch.float64)
    vv = v.to(torch.float64)
    for i in range(d // 2):
        ang = p / theta ** (2 * i / d)
        c, s = math.cos(ang), math.sin(ang)
        x0, x1 = float(vv[2 * i]), float(vv[2 * i + 1])
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x1 * c + x0 * s
    return out


def random_cases(seed: int, count: int, max_n: int = 120):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(0, max_n))
        n_picks = int(rng.integers(0, min(n, 8) + 1)) if n else 0
        picks = [int(x) for x in rng.choice(n, size=n_picks, replace=False)] if n_picks else []
        yield n, picks


# --------------------------------------------------------------------------------------------
# relative layout
# --------------------------------------------------------------------------------------------
def test_relative_layout_hand_computed_examples() -> None:
    # no picks: one segment spread over [0, 18]
    assert relative_layout(5, [], 20, 0.9).tolist() == [0, 4, 9, 13, 18]
    # picks 3 and 7 split 10 chunks into [0,3) [3,7) [7,10)
    assert relative_layout(10, [7, 3], 20, 0.9).tolist() == [0, 9, 18, 20, 26, 32, 38, 40, 49, 58]
    # a pick at rank 0 leaves segment 0 empty, which still advances the offset
    assert relative_layout(5, [0], 20, 0.9).tolist() == [20, 24, 29, 33, 38]
    # adjacent picks: the one-chunk segment [2,3) sits at 20, the next segment starts at 40
    assert relative_layout(6, [2, 3], 20, 0.9).tolist() == [0, 18, 20, 40, 49, 58]
    # last chunk picked: a one-chunk final segment
    assert relative_layout(4, [3], 20, 0.9).tolist() == [0, 9, 18, 20]
    # single chunk and empty corpus
    assert relative_layout(1, [], 20, 0.9).tolist() == [0]
    assert relative_layout(0, [], 20, 0.9).tolist() == []


def test_relative_layout_dtype_is_int64() -> None:
    assert relative_layout(7, [2], 20, 0.9).dtype == np.int64


@pytest.mark.parametrize(
    "step,span", [(20, 0.9), (10, 0.9), (7, 0.9), (3, 0.9), (1, 0.9), (20, 1.0), (20, 0.5)]
)
def test_relative_layout_matches_reference_loop(step: int, span: float) -> None:
    for n, picks in random_cases(seed=step * 100 + int(span * 10), count=150):
        got = relative_layout(n, picks, step, span)
        assert got.tolist() == reference_relative_float32(n, picks, step, span).tolist(), (n, picks)
        assert got.tolist() == exact_relative(n, picks, step, span).tolist(), (n, picks)


def test_relative_layout_matches_float64_floor_except_at_integer_hits() -> None:
    """Against float64 ``floor(linspace)``: a mismatch may only happen where the float value is
    within 1e-9 of an integer (linspace rounding), and then our value is that integer."""
    for n, picks in random_cases(seed=7, count=200, max_n=400):
        ours = relative_layout(n, picks, 20, 0.9)
        ref = reference_relative_float64(n, picks, 20, 0.9)
        floor = np.floor(ref).astype(np.int64)
        bad = np.nonzero(ours != floor)[0]
        for i in bad:
            assert abs(ref[i] - round(ref[i])) < 1e-9, (n, picks, i, ref[i])
            assert ours[i] == round(ref[i])


def test_relative_layout_large_segment_formula() -> None:
    n = 100_003
    got = relative_layout(n, [50_000], 20, 0.9)
    i = np.arange(50_000)
    assert np.array_equal(got[:50_000], (i * 18) // 49_999)
    j = np.arange(n - 50_000)
    assert np.array_equal(got[50_000:], 20 + (j * 18) // (n - 50_000 - 1))
    assert got.max() == 38 and got.min() == 0


def test_relative_layout_picks_any_order_and_duplicates() -> None:
    base = relative_layout(30, [4, 17, 9], 20, 0.9)
    assert np.array_equal(relative_layout(30, [17, 9, 4], 20, 0.9), base)
    assert np.array_equal(relative_layout(30, [9, 4, 17, 9], 20, 0.9), base)
    assert np.array_equal(relative_layout(30, np.array([17, 4, 9]), 20, 0.9), base)


def test_relative_layout_picked_chunk_opens_its_segment() -> None:
    picks = [5, 12, 20]
    pos = relative_layout(30, picks, 20, 0.9)
    for j, p in enumerate(sorted(picks), start=1):
        assert pos[p] == j * 20  # first chunk of segment j
    # positions never decrease along the document
    assert np.all(np.diff(pos) >= 0)


# --------------------------------------------------------------------------------------------
# runs and subsets
# --------------------------------------------------------------------------------------------
def expand_runs(runs: list[tuple[int, int, int]], n: int) -> np.ndarray:
    out = np.full(n, -1, dtype=np.int64)
    prev_stop = 0
    for start, stop, pos in runs:
        assert start == prev_stop, runs  # contiguous, in order, non-empty
        assert stop > start, runs
        out[start:stop] = pos
        prev_stop = stop
    assert prev_stop == n
    return out


@pytest.mark.parametrize("step,span", [(20, 0.9), (4, 0.9), (1, 0.9), (7, 1.0), (3, 0.5)])
def test_relative_runs_equal_layout(step: int, span: float) -> None:
    for n, picks in random_cases(seed=1000 + step, count=200):
        runs = relative_runs(n, picks, step, span)
        expected = relative_layout(n, picks, step, span)
        assert expand_runs(runs, n).tolist() == expected.tolist(), (n, picks)
        # runs are maximal: neighbours have different positions (with span 1.0 the last chunk
        # of a segment lands on the next segment's first position, so two runs may touch)
        if int(span * step) < step:
            for (_, _, p1), (_, _, p2) in itertools.pairwise(runs):
                assert p1 != p2
        assert len(runs) <= (int(span * step) + 1) * (len(picks) + 1)


def test_relative_runs_large_n_few_runs() -> None:
    runs = relative_runs(1_000_000, [10, 500_000], 20, 0.9)
    assert len(runs) == 1 * 10 + 19 + 19  # segment 0 has 10 chunks -> 10 distinct positions
    assert runs[0] == (0, 1, 0)
    assert runs[-1][1] == 1_000_000 and runs[-1][2] == 40 + 18


def test_relative_positions_at_subsets() -> None:
    rng = np.random.default_rng(3)
    for n, picks in random_cases(seed=11, count=100):
        if n == 0:
            continue
        full = relative_layout(n, picks, 20, 0.9)
        ranks = rng.integers(0, n, size=int(rng.integers(1, 20)))
        got = relative_positions_at(ranks, n, picks, 20, 0.9)
        assert got.tolist() == full[ranks].tolist()
    # shape is kept for 2-D rank arrays
    ranks2 = np.array([[0, 5], [9, 2]])
    got2 = relative_positions_at(ranks2, 10, [5], 20, 0.9)
    assert got2.shape == (2, 2)
    assert got2.tolist() == relative_layout(10, [5], 20, 0.9)[ranks2].tolist()


def test_layout_other_modes() -> None:
    assert layout(PositionMode.NONE, 6, [1, 3], 20, 0.9).tolist() == [0] * 6
    assert layout(PositionMode.ABSOLUTE, 6, [1, 3], 20, 0.9).tolist() == [0, 1, 2, 3, 4, 5]
    assert (
        layout(PositionMode.RELATIVE, 6, [1, 3], 20, 0.9).tolist()
        == relative_layout(6, [1, 3], 20, 0.9).tolist()
    )
    assert layout_runs(PositionMode.NONE, 6, [1], 20, 0.9) == [(0, 6, 0)]
    assert layout_runs(PositionMode.NONE, 0, [], 20, 0.9) == []
    assert layout_runs(PositionMode.ABSOLUTE, 6, [1], 20, 0.9) is None
    assert layout_runs(PositionMode.RELATIVE, 6, [1], 20, 0.9) == relative_runs(6, [1], 20, 0.9)
    assert layout(PositionMode.ABSOLUTE, 0, [], 20, 0.9).tolist() == []


# --------------------------------------------------------------------------------------------
# rotation
# --------------------------------------------------------------------------------------------
def test_rope_inv_freq_values() -> None:
    f = rope_inv_freq(16, THETA)
    assert f.shape == (8,)
    expected = torch.tensor([1.0 / THETA ** (2 * i / 16) for i in range(8)], dtype=torch.float32)
    assert torch.allclose(f, expected, rtol=1e-6, atol=0)
    assert f[0].item() == 1.0


def test_pairs_faster_than_the_cap_stay_unrotated() -> None:
    capped = rope_inv_freq(16, THETA, max_frequency=0.05)
    plain = rope_inv_freq(16, THETA)
    assert torch.equal(capped, torch.where(plain > 0.05, 0.0, plain)) and capped[0] == 0
    assert (capped > 0).sum() == (plain <= 0.05).sum() > 0
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(1))
    y = rotate(x, torch.tensor([3, 9, 27, 81]), THETA, max_frequency=0.05)
    fast = [j for i in range(8) if plain[i] > 0.05 for j in (2 * i, 2 * i + 1)]
    fast += [16 + j for j in fast]  # the same pairs in the second half
    assert torch.equal(y[:, fast], x[:, fast])
    assert not torch.allclose(y, x, atol=1e-3)
    with pytest.raises(ValueError, match="rope_max_frequency must be None or > 0"):
        QRAGConfig(rope_max_frequency=0.0)


def test_rotate_inverse_undoes_and_preserves_norms() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 32, generator=g)
    pos = torch.randint(0, 200, (50,), generator=g)
    y = rotate(x, pos, THETA)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert not torch.allclose(y, x, atol=1e-3)
    assert torch.allclose(rotate(y, pos, THETA, inverse=True), x, atol=1e-5)
    assert torch.allclose(rotate(rotate(x, pos, THETA, inverse=True), pos, THETA), x, atol=1e-5)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    # each half keeps its own norm (the rotation never mixes the halves)
    assert torch.allclose(y[:, :16].norm(dim=-1), x[:, :16].norm(dim=-1), atol=1e-5)
    assert torch.allclose(y[:, 16:].norm(dim=-1), x[:, 16:].norm(dim=-1), atol=1e-5)


def test_rotate_position_zero_is_identity() -> None:
    x = torch.randn(4, 8)
    assert torch.equal(rotate(x, torch.zeros(4, dtype=torch.long), THETA), x)


def test_rotate_adjoint_identity() -> None:
    g = torch.Generator().manual_seed(1)
    s = torch.randn(20, 32, generator=g)
    a = torch.randn(20, 32, generator=g)
    p = torch.randint(0, 100, (20,), generator=g)
    lhs = (s * rotate(a, p, THETA)).sum(-1)
    rhs = (rotate(s, p, THETA, inverse=True) * a).sum(-1)
    assert torch.allclose(lhs, rhs, atol=1e-5)
    # the same holds per half, i.e. per twin head
    h = 16
    assert torch.allclose(
        (s[:, :h] * rotate(a, p, THETA)[:, :h]).sum(-1),
        (rotate(s, p, THETA, inverse=True)[:, :h] * a[:, :h]).sum(-1),
        atol=1e-5,
    )
    assert torch.allclose(
        (s[:, h:] * rotate(a, p, THETA)[:, h:]).sum(-1),
        (rotate(s, p, THETA, inverse=True)[:, h:] * a[:, h:]).sum(-1),
        atol=1e-5,
    )


@pytest.mark.parametrize("dim", [8, 32])
def test_rotate_matches_hand_written_reference_per_half(dim: int) -> None:
    g = torch.Generator().manual_seed(dim)
    x = torch.randn(6, dim, generator=g)
    positions = [0, 1, 7, 20, 58, 133]
    y = rotate(x, torch.tensor(positions), THETA)
    half = dim // 2
    for row, p in enumerate(positions):
        q1 = ref_rotate_vector(x[row, :half], p)  # first half (Q1) ...
        q2 = ref_rotate_vector(x[row, half:], p)  # ... and second half (Q2), same angles
        assert torch.allclose(y[row, :half].double(), q1, atol=1e-5), (row, p)
        assert torch.allclose(y[row, half:].double(), q2, atol=1e-5), (row, p)


def test_rotate_halves_are_independent() -> None:
    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(3, 8, generator=g) for _ in range(3))  # halves of a 16-dim vector
    p = torch.tensor([3, 40, 17])
    ab = rotate(torch.cat([a, b], -1), p, THETA)
    ac = rotate(torch.cat([a, c], -1), p, THETA)
    assert torch.equal(ab[:, :8], ac[:, :8])  # first half untouched by the second half's values
    assert not torch.allclose(ab[:, 8:], ac[:, 8:])
    # the second half gets exactly the rotation the first half would get
    assert torch.allclose(ab[:, 8:], rotate(torch.cat([b, a], -1), p, THETA)[:, :8], atol=1e-6)


def test_rotate_broadcasts_positions() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 5, 8, generator=g)
    pos = torch.tensor([[1], [2], [3]]).expand(3, 5)
    y = rotate(x, pos, THETA)
    for r in range(3):
        assert torch.allclose(y[r], rotate(x[r], torch.full((5,), r + 1), THETA), atol=1e-6)


def test_rotate_keeps_half_precision_dtype() -> None:
    x = torch.randn(4, 8)
    y = rotate(x.half(), torch.arange(4), THETA)
    assert y.dtype == torch.float16
    assert torch.allclose(y.float(), rotate(x, torch.arange(4), THETA), atol=2e-3)


@pytest.mark.parametrize("dim", [6, 5, 2, 10])
def test_rotate_rejects_dim_not_divisible_by_4(dim: int) -> None:
    with pytest.raises(ValueError, match="divisible by 4"):
        rotate(torch.randn(2, dim), torch.arange(2), THETA)


def test_rotate_matches_rotary_embedding_torch_as_reference_uses_it() -> None:
    """The reference code builds ``RotaryEmbedding(dim=D // 2)``, looks freqs up at integer
    positions and applies ``apply_rotary_emb`` to each half of the embedding separately."""
    import rotary_embedding_torch as ret  # the `test` extra

    dim = 32
    rot = ret.RotaryEmbedding(dim=dim // 2, theta=THETA)
    assert torch.allclose(rot.freqs.float(), rope_inv_freq(dim // 2, THETA), rtol=1e-6)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(7, dim, generator=g)
    pos = torch.tensor([0, 1, 2, 19, 20, 38, 77])
    freqs = torch.einsum("n,f->nf", pos.float(), rot.freqs.float()).repeat_interleave(2, dim=-1)
    half = dim // 2
    expected = torch.cat(
        [
            ret.apply_rotary_emb(freqs, x[:, :half], seq_dim=0),
            ret.apply_rotary_emb(freqs, x[:, half:], seq_dim=0),
        ],
        dim=-1,
    )
    assert torch.allclose(rotate(x, pos, THETA), expected, atol=1e-5)


def test_document_positions_are_fixed_inside_each_document() -> None:
    from qrag_integrations.core.positions import document_layout, document_positions

    ids = ["a"] * 4 + ["b"] + ["c"] * 2 + ["a"]  # a later run of "a" is another document
    order, length = document_layout(ids)
    assert order.tolist() == [0, 1, 2, 3, 0, 0, 1, 0]
    assert length.tolist() == [4, 4, 4, 4, 1, 2, 2, 1]
    assert document_positions(ids, 20, 0.9).tolist() == [0, 6, 12, 18, 0, 0, 18, 0]
    assert document_positions([], 20, 0.9).tolist() == []
    # one document with no picks: the relative layout's first segment
    assert (
        document_positions(["d"] * 50, 20, 0.9).tolist()
        == relative_layout(50, [], 20, 0.9).tolist()
    )
    assert layout(PositionMode.DOCUMENT, 5, [1], 20, 0.9).tolist() == [0] * 5
    assert layout_runs(PositionMode.DOCUMENT, 5, [1], 20, 0.9) == [(0, 5, 0)]
    assert PositionMode.DOCUMENT.moves is False and PositionMode.RELATIVE.moves


def searched_embeddings(
    emb: torch.Tensor, doc_ids: list[str], cfg: QRAGConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(stored, scanned)``: the embeddings an index of chunks ``emb`` in these documents holds,
    and those its document-mode search scans."""
    from qrag_integrations.core.index import ChunkIndex, DocumentRotation

    index = ChunkIndex(emb.shape[1])
    index.add([f"t{i}" for i in range(len(doc_ids))], emb, doc_ids=doc_ids)
    snap = index.snapshot()
    return snap.embeddings, DocumentRotation(cfg).candidates(snap, None).emb


def test_one_chunk_documents_are_searched_without_a_rotated_copy() -> None:
    cfg = QRAGConfig(position_mode=PositionMode.DOCUMENT)
    emb = torch.randn(3, 32)
    stored, scanned = searched_embeddings(emb, ["a", "b", "c"], cfg)
    assert scanned is stored  # all at 0: no copy
    stored, turned = searched_embeddings(emb, ["a", "a", "c"], cfg)
    assert (
        turned is not stored and torch.equal(turned[0], emb[0]) and torch.equal(turned[2], emb[2])
    )
    assert not torch.allclose(turned[1], emb[1])


def test_documents_rotated_in_blocks_equal_one_rotation(monkeypatch) -> None:
    from qrag_integrations.core import positions

    cfg = QRAGConfig(position_mode=PositionMode.DOCUMENT, rope_max_frequency=0.2)
    emb = torch.randn(7, 32)
    ids = ["a"] * 4 + ["b"] * 3
    whole = rotate(
        emb, torch.from_numpy(document_positions(ids, 20, 0.9)), cfg.rope_theta, False, 0.2
    )
    monkeypatch.setattr(positions, "ROTATION_BLOCK", 3)  # blocks cut across both documents
    assert torch.equal(searched_embeddings(emb, ids, cfg)[1], whole)
    # repeated positions (one cos / sin per distinct position) give each row's own rotation
    rows = [rotate(emb[i], torch.tensor(p), 1e4) for i, p in enumerate([5, 0, 5, 9, 0, 5, 9])]
    assert torch.equal(rotate(emb, torch.tensor([5, 0, 5, 9, 0, 5, 9]), 1e4), torch.stack(rows))


def test_document_mode_on_one_chunk_documents_searches_as_none(tiny_bert_dir) -> None:
    from qrag_integrations.core.config import QRAGConfig
    from qrag_integrations.core.index import ChunkIndex
    from qrag_integrations.core.model import QRAGModel
    from qrag_integrations.core.search import MultiStepSearcher

    texts = [f"fact {i} " + "the " * i for i in range(12)]
    emb = torch.randn(12, 32, generator=torch.Generator().manual_seed(3))
    runs = {}
    for mode in (PositionMode.NONE, PositionMode.DOCUMENT):
        model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), position_mode=mode))
        torch.manual_seed(0)
        model = QRAGModel.from_base(
            QRAGConfig(base_model=str(tiny_bert_dir), position_mode=mode)
        ).eval()
        one_each = ChunkIndex(32)
        one_each.add(
            texts, emb, ids=[str(i) for i in range(12)], doc_ids=[str(i) for i in range(12)]
        )
        whole = ChunkIndex(32)
        whole.add(texts, emb, ids=[str(i) for i in range(12)], doc_ids=["d"] * 12)
        runs[mode] = [
            [
                (h.chunk.id, round(h.q_value, 5))
                for h in MultiStepSearcher(model, ix).search(["fact 3"], k=4)[0]
            ]
            for ix in (one_each, whole)
        ]
    assert runs[PositionMode.DOCUMENT][0] == runs[PositionMode.NONE][0]
    assert runs[PositionMode.NONE][1] == runs[PositionMode.NONE][0]  # none ignores documents
    assert runs[PositionMode.DOCUMENT][1] != runs[PositionMode.DOCUMENT][0]  # one document: rotated


@pytest.mark.parametrize("picked", [[], [0], [2], [5, 1], [3, 4, 9], [9, 8, 0, 13]])
@pytest.mark.parametrize("offset", [False, True])
def test_document_relative_runs_hold_the_positions_document_by_document(
    picked: list[int], offset: bool
) -> None:
    from qrag_integrations.core.positions import (
        document_layout,
        document_relative_positions_at,
        document_runs,
        fixed_runs,
        layout_positions,
        overlaid,
        picked_documents,
        positions_in_runs,
        relative_layout,
    )

    ids = ["a"] * 6 + ["b"] + ["c"] * 7  # documents of 6, 1 and 7 chunks
    order, length = document_layout(ids)
    fixed = layout_positions(order, length, 4, 0.9)
    want = fixed.copy()
    for lo, hi in [(0, 6), (6, 7), (7, 14)]:
        local = [p - lo for p in picked if lo <= p < hi]
        if local:
            want[lo:hi] = relative_layout(hi - lo, local, 4, 0.9)
    ranks = np.arange(14)
    got = document_relative_positions_at(ranks, order, length, picked, order[picked], 4, 0.9)
    np.testing.assert_array_equal(got, want)
    rest = fixed if offset else np.zeros(14, dtype=np.int64)
    base = list(fixed_runs(fixed)) if not offset else [(0, 14, 0)]
    spans = picked_documents(order, length, picked)
    relaid = document_runs(order, length, picked, 4, 0.9, fixed if offset else None)
    runs = overlaid(base, spans, relaid)
    assert [a for a, _, _ in runs] == sorted(a for a, _, _ in runs) and runs[0][0] == 0
    assert all(b == a2 for (_, b, _), (a2, _, _) in itertools.pairwise(runs)) and runs[-1][1] == 14
    np.testing.assert_array_equal(positions_in_runs(runs, ranks) + rest, want)
