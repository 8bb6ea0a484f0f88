"""Scoring primitives of the search: scans of stored chunk embeddings against a state.

The scorers (:mod:`~qrag_integrations.core.scorers`) decide *what* to score; this module holds
*how*: the dtype a block is scored in, states rotated for runs of equal positions, the
bandwidth-bound CPU scan of one run of rows, the block scan of a batch over one layout, and exact
Q-values of chosen chunks at their layout positions.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.positions import positions_at, rotate_as
from qrag_integrations.core.threads import ONE_THREAD_BELOW, threads_in_search

if TYPE_CHECKING:
    from qrag_integrations.core.model import QRAGModel

#: A scored chunk of a step: ``(rank, Q, position)``.
Scored = tuple[int, float, int]


def best_first(hits: Iterable[Scored], depth: int) -> list[Scored]:
    """The ``depth`` best ``(rank, Q, position)`` of ``hits``, higher Q first and the lower rank
    first among equal ones (the exact scan's tie rule)."""
    return heapq.nsmallest(depth, hits, key=lambda hit: (-hit[1], hit[0]))


@contextlib.contextmanager
def faiss_threads_for(queries: int) -> Iterator[None]:
    """Run the FAISS calls inside on the search's threads
    (:func:`~qrag_integrations.core.threads.threads_in_search`), outside a search on one OpenMP
    thread when ``queries`` is below :data:`ONE_THREAD_BELOW` (OpenMP's thread count is per
    calling thread; restored after)."""
    import faiss

    threads = threads_in_search()
    if threads is None and queries >= ONE_THREAD_BELOW:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1 if threads is None else threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def rotated_states(config: QRAGConfig, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """``(R, B, D)``: every state of ``(B, D)`` rotated by ``-p`` for each run position ``p``
    (``<s, R(p) a> = <R(-p) s, a>``: one rotation of the state per run, none of the chunks)."""
    if not any(positions):  # modes none / document: one run at 0, a rotation by 0 is a copy
        return states.unsqueeze(0).expand(len(positions), -1, -1)
    pos = torch.tensor(positions, device=states.device).view(-1, 1).expand(-1, states.shape[0])
    many = states.unsqueeze(0).expand(len(positions), -1, -1)
    return rotate_as(config, many, pos, inverse=True)


def score_dtype(emb: torch.Tensor) -> torch.dtype:
    """The dtype blocks of ``emb`` are scored in (half precision is slow or missing on CPU)."""
    return torch.float32 if emb.device.type == "cpu" else emb.dtype


def cpu_fp32(emb: torch.Tensor) -> bool:
    """Whether ``emb`` can be scanned in place by :func:`scan_run_cpu`."""
    return emb.device.type == "cpu" and emb.dtype == torch.float32 and emb.is_contiguous()


def scan_run_cpu(
    emb: torch.Tensor, lo: int, hi: int, vec: torch.Tensor, taken: list[int]
) -> tuple[int, float]:
    """Best row of ``emb[lo:hi] @ vec`` for a contiguous CPU float32 ``emb``, skipping ``taken``
    rows (absolute ranks); ties go to the lowest row.

    torch's fp32 matrix-vector product (MKL sgemv) reads the rows at about 40% of memory
    bandwidth on CPU; FAISS's SIMD inner products (``fvec_inner_products_ny``) are
    bandwidth-bound, 2.5x faster on 400K x 384, and read ``emb`` in place (no copy). Not
    ``faiss.knn``: for one query it is 2.3x slower with two OpenMP threads than with one
    (measured on the 2-core machine), and the inner products run on one thread regardless.
    """
    scores = inner_products_cpu(emb, lo, hi, vec)
    skip = [t - lo for t in taken if lo <= t < hi]
    scores[skip] = -np.inf
    if scores.size == 0 or np.isneginf(scores).all():
        return -1, -float("inf")
    r = int(scores.argmax())
    return lo + r, float(scores[r])


def inner_products_cpu(emb: torch.Tensor, lo: int, hi: int, vec: torch.Tensor) -> np.ndarray:
    """``emb[lo:hi] @ vec`` as float32 numpy for a contiguous CPU float32 ``emb``: FAISS's SIMD
    inner products, reading ``emb`` in place (see :func:`scan_run_cpu`)."""
    import faiss

    rows = np.ascontiguousarray(emb[lo:hi].numpy())
    query = np.ascontiguousarray(vec.detach().float().numpy(), dtype=np.float32)
    scores = np.empty(hi - lo, dtype=np.float32)
    if hi > lo:
        faiss.fvec_inner_products_ny(
            faiss.swig_ptr(scores),
            faiss.swig_ptr(query),
            faiss.swig_ptr(rows),
            rows.shape[1],
            hi - lo,
        )
    return scores


def score_at_positions(
    model: QRAGModel,
    state: torch.Tensor,
    vectors: torch.Tensor,
    ranks: np.ndarray,
    n: int,
    picked: Sequence[int],
    fixed: np.ndarray | None = None,
) -> tuple[torch.Tensor, np.ndarray]:
    """Exact Q-values of some chunks, given their document-order ranks among ``n`` chunks.

    The chunks get the positions the full layout would give them (around the picks at ranks
    ``picked``) and are scored ``Q1 + Q2`` against one (anchored) state. Both candidate paths
    (FAISS pre-selection, store-backed candidates) score with this.

    Args:
        model: the Q-RAG model (position mode, RoPE).
        state: ``(D,)`` state embedding.
        vectors: ``(K, D)`` unrotated chunk embeddings.
        ranks: ``(K,)`` their ranks in document order among the ``n`` searched chunks.
        n: number of searched chunks (positions are laid out over them).
        picked: ranks of the chunks picked so far.
        fixed: document position modes: the positions to rotate ``vectors`` by, given by the
            caller (their fixed positions, or where ``document_relative`` lays them out, over
            stored or already rotated vectors); without them, the mode's own layout (0 in
            document mode, whose rotation is then part of ``vectors``).

    Returns:
        ``(Q-values (K,), positions (K,))``.
    """
    cfg = model.config
    if fixed is not None:
        positions = fixed
    else:  # 0 in document mode, whose rotation is part of the embeddings searched
        positions = positions_at(
            cfg.position_mode, ranks, n, picked, cfg.relative_step, cfg.relative_span
        )
    pos_t = torch.from_numpy(positions).to(vectors.device)
    return model.rotate_chunks(vectors.float(), pos_t) @ state.to(vectors.device).float(), positions


def update_best(
    best: Scored,
    scores: torch.Tensor,
    lo: int,
    taken: torch.Tensor,
    pos_of: Callable[[int], int],
) -> Scored:
    """``best`` or the best untaken row of ``scores`` (rows ``lo...`` of a block), whichever has
    the larger Q; ``pos_of`` gives a row's position."""
    if taken.numel():
        local = taken[(taken >= lo) & (taken < lo + scores.shape[0])] - lo
        if local.numel():
            scores = scores.index_fill(0, local, -torch.inf)
    q, r = scores.max(0)
    q_f = float(q)
    if q_f > best[1]:
        rank = int(r) + lo
        return rank, q_f, int(pos_of(rank))
    return best


def top_k_shared(
    emb: torch.Tensor,
    runs: Sequence[tuple[int, int, int]],
    rotated: torch.Tensor,
    picked: Sequence[Sequence[int]],
    k: int,
    block: int,
    skip: Sequence[Sequence[tuple[int, int]]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best untaken chunks of every state over one shared layout, in one block scan.

    Args:
        emb: ``(n, D)`` chunk embeddings.
        runs: the layout as runs ``(start, stop, position)``.
        rotated: ``(len(runs), B, D)``: the ``B`` states rotated for each run's position.
        picked: per state, the ranks it may not get.
        k: how many to keep per state.
        block: rows scored at a time.
        skip: per state, spans ``(start, stop)`` of ranks it does not get here either (scored
            elsewhere at other positions).

    Returns:
        ``(q, rank, position)``, each ``(min(k, n), B)`` on ``emb``'s device, best first. With
        ``k == 1`` the lower rank wins a tie, as in the one-state scans; with ``k > 1`` equal
        values within a block come in ``torch.topk``'s order. Fewer than ``k`` untaken chunks
        leave ``-inf`` rows.
    """
    dtype, cols = score_dtype(emb), rotated.shape[1]
    top_q = torch.empty((0, cols), device=emb.device)
    top_rank = torch.empty((0, cols), dtype=torch.long, device=emb.device)
    top_pos = torch.empty((0, cols), dtype=torch.long, device=emb.device)
    for (a, b, p), rot in zip(runs, rotated):
        rot = rot.to(device=emb.device, dtype=dtype)
        for lo in range(a, b, block):
            hi = min(b, lo + block)
            scores = (emb[lo:hi].to(dtype) @ rot.T).float()  # (rows, B)
            for col, ranks in enumerate(picked):
                local = [r - lo for r in ranks if lo <= r < hi]
                if local:
                    scores[local, col] = -torch.inf
            for col, spans in enumerate(skip or ()):
                for start, stop in spans:
                    if max(start, lo) < min(stop, hi):
                        scores[max(start, lo) - lo : min(stop, hi) - lo, col] = -torch.inf
            if k == 1:  # max keeps the first of equal scores; topk's order of ties is unspecified
                q, r = scores.max(0, keepdim=True)
            else:
                q, r = scores.topk(min(k, hi - lo), dim=0)
            q, r = torch.cat([top_q, q]), torch.cat([top_rank, r + lo])
            pos = torch.cat([top_pos, torch.full_like(r[len(top_pos) :], p)])
            # a stable sort keeps earlier blocks (lower ranks) ahead of equal later ones
            top_q, keep = q.sort(dim=0, descending=True, stable=True)
            top_q, keep = top_q[:k], keep[:k]
            top_rank, top_pos = r.gather(0, keep), pos.gather(0, keep)
    return top_q, top_rank, top_pos
