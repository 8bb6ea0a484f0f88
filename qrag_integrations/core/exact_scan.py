"""The exact strategy: every chunk's ``Q = <E_s(s), R(p) E_a(a)>`` at its layout position, as the
paper's search scores it (:class:`ExactScorer`), and the scans the other strategies re-score with.

Because ``R`` is a rotation, ``<s, R(p) a> = <R(-p) s, a>``: the scan rotates the *state* once per
run of chunks sharing a position (relative / none modes, document mode over long documents) and
scans the stored, unrotated embeddings with plain matrix products, block by block (absolute
positions, every chunk its own, rotate the chunks instead). It gives a question's best chunk
(:meth:`ExactScorer.best_one`), a batch's best over one shared layout in one pass, and the
``depth`` best by Q that the search's rules read (:meth:`ExactScorer.pools`).

Under ``document_relative`` after the first step, a batch's layouts differ only inside the
documents holding their picks: one block scan of the fixed layout serves the whole batch, each
question's relaid documents masked out of it, and each question scans its relaid documents alone
at their moved positions; the two best lists merge (:func:`relaid_top_k`, where the relaid
documents are small against the index, :meth:`IndexCandidates.shares
<qrag_integrations.core.index.IndexCandidates.shares>`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.index import IndexCandidates
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.positions import positions_at, rotated_states
from qrag_integrations.core.step import Scored, Step


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


def _merge(
    shared: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    own: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best of two ``(q, rank, position)`` columns: higher Q first, the lower rank
    among equal ones (as every scan of the search breaks ties)."""
    q, rank, pos = (torch.cat([a, b.to(a.device)]) for a, b in zip(shared, own))
    by_rank = rank.argsort(stable=True)
    order = by_rank[q[by_rank].argsort(descending=True, stable=True)][:k]
    return q[order], rank[order], pos[order]


def relaid_top_k(
    config: QRAGConfig,
    cands: IndexCandidates,
    states: torch.Tensor,
    picked: Sequence[Sequence[int]],
    k: int,
    block: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best ``(Q, rank, position)`` of each state, each ``(min(k, n), B)``, as
    :func:`top_k_shared` gives them over one layout (``block``: rows
    scored at a time)."""
    runs = cands.layout_runs(config, [])
    assert runs is not None
    rotated = rotated_states(config, states, [p for _, _, p in runs])
    relaid = [cands.relaid(config, list(p)) for p in picked]
    q, rank, pos = top_k_shared(
        cands.emb, runs, rotated, picked, k, block, skip=[spans for spans, _ in relaid]
    )
    columns = []
    for i, (_, own) in enumerate(relaid):
        column = (q[:, i], rank[:, i], pos[:, i])
        if own:
            turned = rotated_states(config, states[i : i + 1], [p for _, _, p in own])
            mine = top_k_shared(cands.emb, own, turned, [picked[i]], k, block)
            column = _merge(column, (mine[0][:, 0], mine[1][:, 0], mine[2][:, 0]), q.shape[0])
        columns.append(column)
    top_q, top_rank, top_pos = (torch.stack([c[j] for c in columns], dim=1) for j in range(3))
    return top_q, top_rank, top_pos


class ExactScorer:
    """The exact arg-max (and pool) over every untaken candidate of in-memory candidates: exact
    Q-values of a model, scanned ``block_size`` rows at a time; one pass for a batch that shares
    one layout."""

    def __init__(self, model: QRAGModel, block_size: int) -> None:
        self.model = model
        self.block_size = block_size

    @property
    def config(self) -> QRAGConfig:
        """The model's config (read at each use: its position mode, RoPE and step settings)."""
        return self.model.config

    # -- layouts ------------------------------------------------------------------------------
    def runs(self, cands: IndexCandidates, picked: list[int]) -> list[tuple[int, int, int]] | None:
        """The runs ``(start, stop, position)`` of equal positions a step scores ``cands`` at."""
        return cands.layout_runs(self.config, picked)

    def rotated(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """``(R, B, D)``: every state rotated by ``-p`` for each run position ``p``."""
        return rotated_states(self.config, states, positions)

    def one_layout(self, step: Step[IndexCandidates]) -> bool:
        """Whether one pass over ``step.candidates[0]`` scores every question of a batch that
        shares it: the first step, positions that picks do not move, or a batch whose relaid
        documents are small (:meth:`~qrag_integrations.core.index.IndexCandidates.shares`)."""
        return step.shared and (
            step.number == 1
            or not self.config.position_mode.moves
            or step.candidates[0].shares(self.config, step.picked)
        )

    # -- the scorer's interface (:class:`~qrag_integrations.core.step.Scorer`) --------------------
    def picks(self, step: Step[IndexCandidates]) -> list[Scored | None]:
        """Each question's exact arg-max, in one pass where the batch shares one layout."""
        if self.one_layout(step):  # no picks yet, or picks move no position: one pass
            return [*self.best_shared(step.candidates[0], step.states, step.picked)]
        return [
            self.best_one(cands, state, picked)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    def pools(self, step: Step[IndexCandidates], depth: int) -> list[list[Scored]]:
        """Q's ``depth`` best untaken ``(rank, Q, position)`` for each question's state, best
        first: one pass for the batch where it shares one layout, else one scan each."""
        if self.one_layout(step):
            tops = self.top_shared(step.candidates[0], step.states, step.picked, depth)
            if tops is not None:
                return tops
        return [
            self.top(cands, state, picked, depth)
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]

    # -- one question -------------------------------------------------------------------------
    def best_one(self, cands: IndexCandidates, state: torch.Tensor, picked: list[int]) -> Scored:
        """Best available chunk ``(rank, Q, position)`` for one question given its picks."""
        emb, n, block = cands.emb, cands.n, self.block_size
        runs = self.runs(cands, picked)
        dtype = score_dtype(emb)
        taken = torch.tensor(sorted(picked), dtype=torch.long, device=emb.device)
        best: Scored = (-1, -float("inf"), 0)
        if runs is None:  # absolute: every chunk has its own position, rotate the chunks instead
            for lo in range(0, n, block):
                hi = min(n, lo + block)
                pos = torch.arange(lo, hi, device=emb.device)
                scores = self.model.rotate_chunks(emb[lo:hi].float(), pos) @ state
                best = update_best(best, scores, lo, taken, lambda r: r)
            return best
        rotated = self.rotated(state.unsqueeze(0), [p for _, _, p in runs])[:, 0]
        if cpu_fp32(emb):
            taken_list = sorted(picked)
            for (a, b, p), rot in zip(runs, rotated):
                rank, q = scan_run_cpu(emb, a, b, rot.float().contiguous(), taken_list)
                if q > best[1]:
                    best = (rank, q, p)
            return best
        for (a, b, p), rot in zip(runs, rotated):
            rot = rot.to(dtype)
            for lo in range(a, b, block):
                hi = min(b, lo + block)
                scores = (emb[lo:hi].to(dtype) @ rot).float()
                best = update_best(best, scores, lo, taken, lambda r, p=p: p)
        return best

    def top(
        self, cands: IndexCandidates, state: torch.Tensor, picked: list[int], depth: int
    ) -> list[Scored]:
        """The ``depth`` best untaken ``(rank, Q, position)`` by exact Q, best first."""
        n, emb = cands.n, cands.emb
        runs = self.runs(cands, picked)
        if runs is None:  # absolute positions: every chunk has its own
            q, positions = score_at_positions(self.model, state, emb, np.arange(n), n, picked)
            parts = [(torch.arange(n), q, torch.from_numpy(positions))]
        else:
            parts = []
            rotated = self.rotated(state.float()[None], [p for _, _, p in runs])[:, 0]
            for (lo, hi, p), rot in zip(runs, rotated):
                if cpu_fp32(emb):  # torch's matrix-vector product reads at ~40% of the bandwidth
                    q = torch.from_numpy(inner_products_cpu(emb, lo, hi, rot))
                else:
                    q = (emb[lo:hi].float() @ rot.to(emb.device)).cpu()
                parts.append((torch.arange(lo, hi), q, torch.full((hi - lo,), p)))
        ranks = torch.cat([r for r, _, _ in parts])
        q = torch.cat([v.float().cpu() for _, v, _ in parts])
        positions = torch.cat([p for _, _, p in parts])
        if picked:
            q[torch.isin(ranks, torch.tensor(picked))] = -torch.inf
        top = torch.topk(q, min(depth, n - len(picked)))
        # whole-tensor conversions: indexing element by element cost ~6 us per hit
        rows, values = top.indices, top.values.tolist()
        return [
            (r, v, p)
            for r, v, p in zip(ranks[rows].tolist(), values, positions[rows].tolist())
            if v > -math.inf
        ]

    # -- a batch over one layout --------------------------------------------------------------
    def top_k(
        self, cands: IndexCandidates, states: torch.Tensor, picked: list[list[int]], k: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """The ``k`` best ``(Q, rank, position)`` of states that share one layout (the first
        step, or no positions), each ``(k, B)``, in one pass over the index; ``None`` with
        absolute positions (every chunk has its own)."""
        if any(picked) and cands.shares(self.config, picked):
            return relaid_top_k(self.config, cands, states, picked, k, self.block_size)
        runs = self.runs(cands, [])
        if runs is None:
            return None
        rotated = self.rotated(states, [p for _, _, p in runs])
        return top_k_shared(cands.emb, runs, rotated, picked, k, self.block_size)

    def best_shared(
        self, cands: IndexCandidates, states: torch.Tensor, picked: list[list[int]]
    ) -> list[Scored]:
        """Each question's best in one pass over a layout they share (its picks masked out)."""
        one_on_cpu = states.shape[0] == 1 and cpu_fp32(cands.emb)
        shared = None if one_on_cpu else self.top_k(cands, states, picked, 1)
        if shared is None:
            return [self.best_one(cands, states[i], picked[i]) for i in range(states.shape[0])]
        q, rank, pos = shared
        return [(int(r), float(v), int(p)) for v, r, p in zip(q[0], rank[0], pos[0])]

    def top_shared(
        self, cands: IndexCandidates, states: torch.Tensor, picked: list[list[int]], depth: int
    ) -> list[list[Scored]] | None:
        """:meth:`top` of a batch of states that share one layout (the first step, or no
        positions) in one pass over the index, as a batch's plain steps are scanned; ``None`` where
        that does not serve (one state, absolute positions, a filtered subset)."""
        if states.shape[0] < 2 or cands.rows is not None:
            return None
        shared = self.top_k(cands, states.float(), picked, depth)
        if shared is None:
            return None
        # one list per state, converted whole (as top), not element by element
        top_q, top_rank, top_pos = (t.cpu().T.tolist() for t in shared)
        return [
            [(r, q, p) for q, r, p in zip(qs, ranks, positions) if q > -math.inf]
            for qs, ranks, positions in zip(top_q, top_rank, top_pos)
        ]
