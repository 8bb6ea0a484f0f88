"""Compact scans: a small copy of the chunk embeddings that each search step scans to pick
candidates, which the search then re-scores exactly in float32.

A step's scan reads every stored embedding; on a CPU that is memory-bound, so fewer bytes per
chunk make it faster: ``"int8"`` keeps 1 byte per dimension (FAISS scalar quantizer, a min/max
range per dimension learnt from the embeddings) and ``"binary"`` 1 bit per dimension (the signs;
Hamming distance to the signs of the state). ``"bf16"`` keeps 2 bytes per dimension and is
for batches: a batch of states against every chunk is a matrix product, compute-bound rather than
memory-bound, and bfloat16 products run ~2x faster than float32 ones on CPUs with AVX512-BF16 /
AMX (torch's oneDNN kernels); a lone state is scanned exactly instead (one row per chunk is
bandwidth-bound, where :func:`~qrag_integrations.core.scan.scan_run_cpu` already reads float32
at full speed). The full-precision embeddings stay in memory for the re-scoring, so a compact
copy *adds* ``D`` bytes (int8), ``D / 8`` (binary) or ``2 D`` (bf16) per chunk: 384 / 48 / 768
bytes for MiniLM, on top of 1,536 for float32.

FAISS (not numpy / torch) scans the int8 and binary codes: it has SIMD kernels for both, and no
int8 matrix-vector product exists in torch on CPU. A run of rows that share a position is scanned
alone (its slice of the codes), so that the runs of a step read each row once. The bf16 copy is a
torch tensor scanned by torch's matrix product.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.scan import Scored, best_first, faiss_threads_for
from qrag_integrations.core.snapshot_cache import BuiltFor

EXACT, INT8, BINARY, BF16 = "exact", "int8", "binary", "bf16"
#: The scan kinds: ``"exact"`` (float32, the default), ``"int8"``, ``"binary"`` and ``"bf16"``.
SCAN_KINDS: tuple[str, ...] = (EXACT, INT8, BINARY, BF16)
#: Extra bytes per chunk and dimension that each compact kind stores beside the embeddings.
BYTES_PER_DIMENSION = {INT8: 1.0, BINARY: 0.125, BF16: 2.0}
#: Rows of the bf16 copy per matrix product (bounds temporary memory to this many x batch floats).
BF16_BLOCK = 65536


def check_scan(scan: str, rescore: int) -> None:
    """Raise :class:`~qrag_integrations.core.errors.QRAGError` for an unknown scan kind or a
    re-scoring count below 1."""
    if scan not in SCAN_KINDS:
        raise QRAGError(f"scan must be one of {list(SCAN_KINDS)}, got {scan!r}")
    if isinstance(rescore, bool) or not isinstance(rescore, int) or rescore < 1:
        raise QRAGError(f"rescore must be an integer >= 1, got {rescore!r}")


class CompactScanner:
    """A compact FAISS copy of one tensor of chunk embeddings, built on first use and rebuilt
    when the embeddings change (thread-safe)."""

    def __init__(self, kind: str) -> None:
        if kind not in (INT8, BINARY, BF16):
            raise QRAGError(f"a compact scan is {INT8!r}, {BINARY!r} or {BF16!r}, got {kind!r}")
        self.kind = kind
        self._slot = BuiltFor()

    @property
    def exact_alone(self) -> bool:
        """Whether a lone question is still scanned exactly (a bf16 copy serves batches only),
        so that a model's own BM25 fusion, which ranks by exact Q, fits this scan."""
        return self.kind == BF16

    def serves(self, batch: int, one_layout: bool) -> bool:
        """Whether this copy scans for ``batch`` states at once; ``one_layout``: every state has
        the same layout of positions (a bf16 copy serves only two or more states that share one
        layout, so that one matrix product scores them all; otherwise they are scanned exactly)."""
        return self.kind != BF16 or (batch > 1 and one_layout)

    def candidates(
        self, emb: torch.Tensor, states: torch.Tensor, lo: int, hi: int, want: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``emb[lo:hi]`` that the compact copy scores best for each state, with
        those scores.

        Args:
            emb: ``(N, D)`` chunk embeddings (CPU).
            states: ``(B, D)`` states, already rotated for the run's position.
            lo: first row of the run.
            hi: end of the run (exclusive).
            want: candidates per state.

        Returns:
            ``(scores, rows)``, ``(B, want)`` each: the copy's scores, higher is better and
            comparable across runs (an approximate inner product; minus the Hamming distance for
            ``"binary"``; ``-inf`` where fewer rows exist), and int64 row numbers (absolute,
            ``-1`` where fewer rows exist).
        """
        if self.kind == BF16:
            return self._bf16_candidates(emb, states, lo, hi, want)
        quantizer, codes = self._slot.get(emb, lambda: self._build(emb))
        queries = np.ascontiguousarray(states.detach().float().cpu().numpy())
        take = min(want, hi - lo)
        if self.kind == BINARY:
            with faiss_threads_for(len(queries)):
                scores, rows = _hamming_top(np.packbits(queries > 0, axis=1), codes[lo:hi], take)
        else:
            scores, rows = _int8_top(quantizer, queries, codes[lo:hi], take)
        out_scores = np.full((len(queries), want), -np.inf, dtype=np.float32)
        out_rows = np.full((len(queries), want), -1, dtype=np.int64)
        out_scores[:, :take], out_rows[:, :take] = scores, np.where(rows >= 0, rows + lo, -1)
        out_scores[out_rows < 0] = -np.inf
        return out_scores, out_rows

    def _bf16_candidates(
        self, emb: torch.Tensor, states: torch.Tensor, lo: int, hi: int, want: int
    ) -> tuple[np.ndarray, np.ndarray]:
        copy = self._slot.get(emb, lambda: emb.detach().to(torch.bfloat16).contiguous())
        queries = states.detach().to(torch.bfloat16)
        top_q = torch.empty(states.shape[0], 0)
        top_rows = torch.empty(states.shape[0], 0, dtype=torch.long)
        for a in range(lo, hi, BF16_BLOCK):
            b = min(hi, a + BF16_BLOCK)
            scores = (queries @ copy[a:b].T).float()  # (B, rows)
            q, r = scores.topk(min(want, b - a), dim=1)
            top_q, at = torch.cat([top_q, q], 1), torch.cat([top_rows, r + a], 1)
            top_q, keep = top_q.topk(min(want, top_q.shape[1]), dim=1)
            top_rows = at.gather(1, keep)
        rows = np.full((states.shape[0], want), -1, dtype=np.int64)
        rows[:, : top_rows.shape[1]] = top_rows.numpy()
        scores = np.full((states.shape[0], want), -np.inf, dtype=np.float32)
        scores[:, : top_q.shape[1]] = top_q.numpy()
        return scores, rows

    def _build(self, emb: torch.Tensor) -> tuple[Any, np.ndarray]:
        """The copy's codes, one row per chunk, and (int8) the FAISS scalar quantizer that made
        them (one min/max range per dimension learnt from every row)."""
        import faiss

        vectors = np.ascontiguousarray(emb.detach().float().cpu().numpy())
        dim = vectors.shape[1]
        if self.kind == BINARY:
            if dim % 8:
                raise QRAGError(f"a binary scan needs a dimension divisible by 8, got {dim}")
            return None, np.packbits(vectors > 0, axis=1)
        quantizer = faiss.ScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit)
        quantizer.train(vectors)
        return quantizer, np.ascontiguousarray(quantizer.compute_codes(vectors))


def _int8_top(
    quantizer: Any, queries: np.ndarray, codes: np.ndarray, take: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``take`` best rows of ``codes`` by approximate inner product, best first:
    FAISS's SIMD scanner over exactly these rows (a FAISS index would check a range selector
    against every row it holds)."""
    import faiss

    scores = np.full((len(queries), take), -np.inf, dtype=np.float32)
    rows = np.full((len(queries), take), -1, dtype=np.int64)
    if take == 0:
        return scores, rows
    # store_pairs=True: a row's id is its number in ``codes`` (list 0)
    scanner = quantizer.select_InvertedListScanner(
        faiss.METRIC_INNER_PRODUCT, None, True, None, False
    )
    scanner.set_list(0, 0.0)
    for i, query in enumerate(queries):
        scanner.set_query(faiss.swig_ptr(query))
        scanner.scan_codes(
            len(codes), faiss.swig_ptr(codes), None, faiss.swig_ptr(scores[i]),
            faiss.swig_ptr(rows[i]), take,
        )  # fmt: skip
    order = np.argsort(-scores, axis=1, kind="stable")  # the scanner leaves a heap
    return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)


def _hamming_top(
    queries: np.ndarray, codes: np.ndarray, take: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``take`` rows of ``codes`` nearest in Hamming distance, nearest first, scored
    minus the distance."""
    import faiss

    if take == 0:
        empty = np.empty((len(queries), 0))
        return empty.astype(np.float32), empty.astype(np.int64)
    distances, rows = faiss.knn_hamming(queries, codes, take)
    return -distances.astype(np.float32), rows


def rescore_best(
    emb: torch.Tensor,
    vecs: Sequence[torch.Tensor],
    positions: Sequence[int],
    found: Sequence[tuple[np.ndarray, np.ndarray]],
    taken: set[int],
    rescore: int,
    depth: int = 1,
) -> list[Scored]:
    """The exact ``depth`` best ``(row, Q, position)``, best first (ties: the lowest row first,
    as in the exact scan), among the ``rescore`` candidates the compact copy scores best over
    every run; empty when no candidate is left.

    Args:
        emb: ``(N, D)`` chunk embeddings (CPU).
        vecs: the state rotated for each run.
        positions: each run's position.
        found: each run's ``(scores, rows)`` from :meth:`CompactScanner.candidates`
            (``-1`` = no row).
        taken: rows already picked (never candidates).
        rescore: candidates re-scored exactly, over all runs together.
        depth: how many best.
    """
    if not found:
        return []
    run = np.concatenate([np.full(len(rows), j) for j, (_, rows) in enumerate(found)])
    rows = np.concatenate([rows for _, rows in found])
    scores = np.concatenate([scores for scores, _ in found])
    ok = rows >= 0
    if taken:
        ok &= ~np.isin(rows, np.fromiter(taken, dtype=np.int64))
    keep = np.flatnonzero(ok)
    if len(keep) > rescore:
        keep = keep[np.argpartition(-scores[keep], rescore - 1)[:rescore]]
    best: list[Scored] = []
    for j in np.unique(run[keep]).tolist():
        cand = np.sort(rows[keep[run[keep] == j]])
        q = emb[torch.from_numpy(cand).to(emb.device)].float() @ vecs[j].to(emb.device).float()
        best.extend(zip(cand.tolist(), q.tolist(), itertools.repeat(positions[j])))
    return best_first(best, depth)


def top_compact(
    scanner: CompactScanner,
    emb: torch.Tensor,
    states: torch.Tensor,
    picked: list[list[int]],
    runs_of: Callable[[list[int]], list[tuple[int, int, int]]],
    rotated: Callable[[torch.Tensor, list[int]], torch.Tensor],
    rescore: int,
    depth: int = 1,
) -> list[list[Scored]]:
    """Each question's ``depth`` best ``(row, Q, position)``, best first: every run of equal
    positions scanned by the compact copy, and the ``rescore`` best candidates over all runs
    (besides the question's picks) re-scored exactly.

    Args:
        scanner: the compact copy of ``emb``.
        emb: ``(N, D)`` chunk embeddings (CPU).
        states: ``(B, D)`` states.
        picked: each question's picked rows.
        runs_of: the runs ``(lo, hi, position)`` of a question's layout, given its picks.
        rotated: ``(R, B, D)`` states rotated by ``-p`` for each of ``R`` run positions.
        rescore: candidates re-scored exactly per question and step.
        depth: how many best per question.

    Returns:
        One list per question (empty when nothing is left).
    """
    want_rows = max(rescore, depth)
    shared = [runs_of(p) for p in picked]
    if shared and all(r == shared[0] for r in shared) and len(shared[0]) == 1:
        # one run for every question (no positions, or no picks yet): one scan for the batch
        lo, hi, p = shared[0][0]
        vecs = rotated(states, [p])[0]
        want = min(hi - lo, want_rows + max(len(t) for t in picked))
        scores, rows = scanner.candidates(emb, vecs, lo, hi, want)
        return [
            rescore_best(emb, [vecs[i]], [p], [(scores[i], rows[i])], set(taken), want_rows, depth)
            for i, taken in enumerate(picked)
        ]
    out: list[list[Scored]] = []
    for i, (taken, runs) in enumerate(zip(picked, shared)):
        positions = [p for _, _, p in runs]
        vecs = rotated(states[i : i + 1], positions)[:, 0]
        found = []
        for (lo, hi, _), vec in zip(runs, vecs):
            want = min(hi - lo, want_rows + sum(lo <= t < hi for t in taken))
            scores, rows = scanner.candidates(emb, vec[None], lo, hi, want)
            found.append((scores[0], rows[0]))
        out.append(rescore_best(emb, vecs, positions, found, set(taken), want_rows, depth))
    return out


def compact_scanner(
    scan: str, device: torch.device, absolute_positions: bool
) -> CompactScanner | None:
    """The scanner a searcher over an index on ``device`` uses for ``scan`` (``None`` = exact).

    Raises:
        QRAGError: a compact scan on a GPU index or with absolute positions (every chunk has its
            own position, so there are no runs to scan).
    """
    if scan == EXACT:
        return None
    if device.type != "cpu" or absolute_positions:
        where = f"a {device.type!r} index" if device.type != "cpu" else "absolute positions"
        raise QRAGError(
            f"scan={scan!r} needs a CPU index and positions 'none', 'document' or 'relative', not {where}: "
            "use scan='exact'"
        )
    return CompactScanner(scan)
