"""The exact scan of an in-memory index: every chunk's ``Q = <E_s(s), R(p) E_a(a)>`` at its layout
position, as the paper's search scores it.

Because ``R`` is a rotation, ``<s, R(p) a> = <R(-p) s, a>``: the scan rotates the *state* once per
run of chunks sharing a position (relative / none modes, document mode over long documents) and
scans the stored, unrotated embeddings with plain matrix products, block by block (absolute
positions, every chunk its own, rotate the chunks instead). It gives a question's best chunk
(:meth:`ExactScan.best_one`), a batch's best over one shared layout in one pass, and the ``depth``
best by Q that the search's rules read (:meth:`ExactScan.pools`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from qrag_integrations.core.candidates import IndexCandidates
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.relaid_scan import relaid_top_k, shares
from qrag_integrations.core.scan import (
    Scored,
    cpu_fp32,
    inner_products_cpu,
    rotated_states,
    scan_run_cpu,
    score_at_positions,
    score_dtype,
    top_k_shared,
    update_best,
)
from qrag_integrations.core.step import Step


class ExactScan:
    """Exact Q-values of a model over in-memory candidates, scanned ``block_size`` rows at a time."""

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

    def one_layout(self, cands: IndexCandidates, picked: list[list[int]], step: int) -> bool:
        """Whether one pass over ``cands`` scores every question of a batch with these picks at
        ``step``: the first step, positions that picks do not move, or a batch whose relaid
        documents are small (:func:`~qrag_integrations.core.relaid_scan.shares`)."""
        return (
            step == 1 or not self.config.position_mode.moves or shares(self.config, cands, picked)
        )

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
        if any(picked) and shares(self.config, cands, picked):
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

    # -- the pool the rules read --------------------------------------------------------------
    def pools(self, step: Step, depth: int) -> list[list[Scored]]:
        """Q's ``depth`` best untaken ``(rank, Q, position)`` for each question's state, best
        first: one pass for the batch where it shares one layout, else one scan each."""
        if step.one_layout:
            cands: Sequence[IndexCandidates] = step.candidates  # type: ignore[assignment]
            tops = self.top_shared(cands[0], step.states, step.picked, depth)
            if tops is not None:
                return tops
        return [
            self.top(cands, state, picked, depth)  # type: ignore[arg-type]
            for cands, state, picked in zip(step.candidates, step.states, step.picked)
        ]


def pool_best(pool: list[Scored]) -> Scored | None:
    """The step's pick from its pool: the best Q, the lowest rank among equal ones (as every scan
    of the search breaks ties); ``None`` when nothing is left."""
    if not pool:
        return None
    return min((hit for hit in pool if hit[1] == pool[0][1]), key=lambda hit: hit[0])
