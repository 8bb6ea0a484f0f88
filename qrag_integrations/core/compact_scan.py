"""The compact-copy strategy (:class:`CompactScorer`): a small copy of the chunk embeddings that
each search step scans to pick candidates, which it then re-scores exactly in float32.

A step's scan reads every stored embedding; on a CPU that is memory-bound, so fewer bytes per
chunk make it faster: ``"int8"`` keeps 1 byte per dimension (a signed code, one symmetric range
per dimension learnt from the embeddings) and ``"binary"`` 1 bit per dimension (the signs;
Hamming distance to the signs of the state). ``"bf16"`` keeps 2 bytes per dimension and is
for batches: a batch of states against every chunk is a matrix product, compute-bound rather than
memory-bound, and bfloat16 products run ~2x faster than float32 ones on CPUs with AVX512-BF16 /
AMX (torch's oneDNN kernels); a lone state is scanned exactly instead (one row per chunk is
bandwidth-bound, where :func:`~qrag_integrations.core.exact_scan.scan_run_cpu` already reads float32
at full speed). The full-precision embeddings stay in memory for the re-scoring, so a compact
copy *adds* ``D`` bytes (int8), ``D / 8`` (binary) or ``2 D`` (bf16) per chunk: 384 / 48 / 768
bytes for MiniLM, on top of 1,536 for float32.

SimSIMD scans the int8 codes and FAISS the binary ones (not numpy / torch: no int8
matrix-vector product exists in torch on CPU). SimSIMD's int8 dot products run on VNNI where the
CPU has it and read 400K x 384 codes in ~19 ms on one thread, against 31-35 ms for FAISS's
int8 scanner, which widens every code to float32 (docs/decisions.md). The state is quantized too
(one scale per state), so an int8 score is an integer dot product times that scale: comparable
across runs, and exact re-scoring of the candidates follows. A run of rows that share a position
is scanned alone (its slice of the codes), so that the runs of a step read each row once. The
bf16 copy is a torch tensor scanned by torch's matrix product.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from qrag_integrations.core.chunks import BuiltFor
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.exact_scan import ExactScorer
from qrag_integrations.core.index import IndexCandidates
from qrag_integrations.core.step import Scored, Step, best_first
from qrag_integrations.core.threads import faiss_threads_for, threads_for, threads_in_search

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


class CompactScorer:
    """A compact copy's ``rescore`` best rows over every run of equal positions, re-scored
    exactly, for a batch sharing one unfiltered in-memory index; the ``exact`` scorer where the
    copy does not serve (a lone question on a bf16 copy, a bf16 batch with different layouts).
    The copy of one tensor of chunk embeddings is built on first use and rebuilt when the
    embeddings change (thread-safe)."""

    def __init__(self, exact: ExactScorer, kind: str, rescore: int) -> None:
        if kind not in (INT8, BINARY, BF16):
            raise QRAGError(f"a compact scan is {INT8!r}, {BINARY!r} or {BF16!r}, got {kind!r}")
        self.exact, self.kind, self.rescore = exact, kind, rescore
        self._slot = BuiltFor()

    # -- the scorer's interface (:class:`~qrag_integrations.core.step.Scorer`) --------------------
    def picks(self, step: Step[IndexCandidates]) -> list[Scored | None]:
        if not self._serves(step):
            return self.exact.picks(step)
        return [top[0] if top else None for top in self._top(step, 1)]

    def pools(self, step: Step[IndexCandidates], depth: int) -> list[list[Scored]]:
        """The best of the copy's candidates re-scored exactly (exact where the copy does not
        serve), so the rules cost no exact scan."""
        return self._top(step, depth) if self._serves(step) else self.exact.pools(step, depth)

    def _serves(self, step: Step[IndexCandidates]) -> bool:
        fresh = step.number == 1 or not self.exact.config.position_mode.moves
        return self.serves(len(step.active), fresh)

    def _top(self, step: Step[IndexCandidates], depth: int) -> list[list[Scored]]:
        cands, config = step.candidates[0], self.exact.config

        def runs_of(taken: list[int]) -> list[tuple[int, int, int]]:
            runs = cands.layout_runs(config, taken)
            assert runs is not None  # a compact scan refuses absolute positions
            return runs

        return top_compact(
            self,
            cands.emb,
            step.states,
            step.picked,
            runs_of,
            self.exact.rotated,
            self.rescore,
            depth,
        )

    # -- the copy -----------------------------------------------------------------------------

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
        scale, codes = self._slot.get(emb, lambda: self._build(emb))
        queries = np.ascontiguousarray(states.detach().float().cpu().numpy())
        take = min(want, hi - lo)
        if self.kind == BINARY:
            with faiss_threads_for(len(queries)):
                scores, rows = _hamming_top(np.packbits(queries > 0, axis=1), codes[lo:hi], take)
        else:
            scores, rows = _int8_top(scale, queries, codes[lo:hi], take)
        out_scores = np.full((len(queries), want), -np.inf, dtype=np.float32)
        out_rows = np.full((len(queries), want), -1, dtype=np.int64)
        out_scores[:, :take], out_rows[:, :take] = scores, np.where(rows >= 0, rows + lo, -1)
        out_scores[out_rows < 0] = -np.inf
        return out_scores, out_rows

    def candidates_over_runs(
        self,
        emb: torch.Tensor,
        vecs: torch.Tensor,
        runs: Sequence[tuple[int, int, int]],
        want: int,
        taken: Sequence[int],
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """One state's candidates in each run, ``(scores, rows)`` per run as in
        :meth:`candidates` (one state), which together hold the ``want`` rows besides ``taken``
        that the copy scores best over all runs.

        Args:
            emb: ``(N, D)`` chunk embeddings (CPU).
            vecs: ``(R, D)``: the state rotated for each run's position.
            runs: ``R`` runs ``(lo, hi, position)`` of distinct rows.
            want: candidates wanted besides ``taken``.
            taken: rows already picked.
        """
        if self.kind != INT8:
            found = []
            for (lo, hi, _), vec in zip(runs, vecs):
                take = min(hi - lo, want + sum(lo <= t < hi for t in taken))
                scores, rows = self.candidates(emb, vec[None], lo, hi, take)
                found.append((scores[0], rows[0]))
            return found
        # int8: every run's scores side by side, then one selection over all of them (a
        # selection per run, of up to ``want`` rows each, costs more than the scan itself)
        scale, codes = self._slot.get(emb, lambda: self._build(emb))
        step, q8 = _quantized(scale, np.ascontiguousarray(vecs.detach().float().cpu().numpy()))
        scores = np.concatenate(
            [
                _int8_dots(q8[j : j + 1], codes[lo:hi], 1)[0] * step[j]
                for j, (lo, hi, _) in enumerate(runs)
            ]
        )
        starts = np.cumsum([0] + [hi - lo for lo, hi, _ in runs])
        take = min(len(scores), want + len(taken))
        best = np.argpartition(-scores, take - 1)[:take] if take else np.empty(0, dtype=np.int64)
        run_of = np.searchsorted(starts, best, side="right") - 1
        found = []
        for j, (lo, _, _) in enumerate(runs):
            mine = best[run_of == j]
            found.append((scores[mine], mine - starts[j] + lo))
        return found

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
        """The copy's codes, one row per chunk, and (int8) each dimension's scale: a code is
        ``round(x / scale)`` in ``[-127, 127]``, ``scale`` the dimension's largest ``|x|`` / 127."""
        vectors = np.ascontiguousarray(emb.detach().float().cpu().numpy())
        dim = vectors.shape[1]
        if self.kind == BINARY:
            if dim % 8:
                raise QRAGError(f"a binary scan needs a dimension divisible by 8, got {dim}")
            return None, np.packbits(vectors > 0, axis=1)
        scale = np.abs(vectors).max(axis=0) / 127
        scale[scale == 0] = 1.0
        return scale.astype(np.float32), _to_int8(vectors / scale)


#: Most scores one int8 scan call holds at once (float32, 64 MiB): a batch of states is scanned
#: in groups of states so that a large batch over many rows does not hold them all.
INT8_SCORES_AT_ONCE = 1 << 24


def _to_int8(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.clip(np.rint(x), -127, 127).astype(np.int8))


def _quantized(scale: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(step, q8)``: each query weighted by the dimensions' scales and quantized to int8 with
    one step of its own, ``(B, 1)`` and ``(B, D)``; ``step * (q8 . code)`` approximates the inner
    product with the row that ``code`` stands for."""
    weighted = queries * scale
    step = np.abs(weighted).max(axis=1, keepdims=True) / 127
    step[step == 0] = 1.0
    return step, _to_int8(weighted / step)


def _int8_dots(q8: np.ndarray, codes: np.ndarray, threads: int) -> np.ndarray:
    """``(B, rows)`` integer dot products of int8 queries and codes, as float32 (exact up to
    D = 1040: a sum of at most 127 * 127 * D)."""
    import simsimd

    if len(codes) == 0:
        return np.empty((len(q8), 0), dtype=np.float32)
    return np.asarray(simsimd.cdist(q8, codes, metric="dot", threads=threads, out_dtype="float32"))


def _int8_top(
    scale: np.ndarray, queries: np.ndarray, codes: np.ndarray, take: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``take`` best rows of ``codes`` by approximate inner product, best first
    (see :func:`_quantized`), dotted with exactly these rows by SimSIMD."""
    scores = np.full((len(queries), take), -np.inf, dtype=np.float32)
    rows = np.full((len(queries), take), -1, dtype=np.int64)
    if take == 0:
        return scores, rows
    step, q8 = _quantized(scale, queries)
    threads = threads_in_search() or threads_for(len(queries))
    group = max(1, INT8_SCORES_AT_ONCE // len(codes))
    for a in range(0, len(queries), group):
        b = min(len(queries), a + group)
        dots = _int8_dots(q8[a:b], codes, threads)
        top = np.sort(np.argpartition(-dots, take - 1, axis=1)[:, :take], axis=1)
        best = np.take_along_axis(dots, top, 1) * step[a:b]
        order = np.argsort(-best, axis=1, kind="stable")
        scores[a:b] = np.take_along_axis(best, order, 1)
        rows[a:b] = np.take_along_axis(top, order, 1)
    return scores, rows


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
        found: each run's ``(scores, rows)`` from :meth:`CompactScorer.candidates`
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
    scanner: CompactScorer,
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
        found = scanner.candidates_over_runs(emb, vecs, runs, want_rows, taken)
        out.append(rescore_best(emb, vecs, positions, found, set(taken), want_rows, depth))
    return out


def compact_scorer(
    exact: ExactScorer, scan: str, rescore: int, device: torch.device
) -> CompactScorer | None:
    """The compact scorer a searcher over an index on ``device`` uses for ``scan`` (``None`` =
    exact), ``exact`` where the copy does not serve.

    Raises:
        QRAGError: a compact scan on a GPU index or with absolute positions (every chunk has its
            own position, so there are no runs to scan).
    """
    if scan == EXACT:
        return None
    absolute = exact.config.position_mode is PositionMode.ABSOLUTE
    if device.type != "cpu" or absolute:
        where = f"a {device.type!r} index" if device.type != "cpu" else "absolute positions"
        raise QRAGError(
            f"scan={scan!r} needs a CPU index and positions 'none', 'document' or 'relative', not {where}: "
            "use scan='exact'"
        )
    return CompactScorer(exact, scan, rescore)
