"""Q-RAG multi-step search over a :class:`~qrag_integrations.core.index.ChunkIndex` (no framework code).

Each step embeds the state text (question + picked chunks), scores every available chunk with
``Q = <E_s(s), R(p) E_a(a)>`` at the positions laid out around the current picks, and picks the
arg-max. Because ``R`` is a rotation, ``<s, R(p) a> = <R(-p) s, a>``: the search rotates the
*state* once per run of chunks sharing a position (relative / none modes, document mode over long
documents) and scans the stored, unrotated embeddings with plain matrix products, block by block.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from qrag_integrations.core.candidates import (
    CandidateSet,
    DocumentRotation,
    IndexCandidates,
    all_in_memory,
    own_settings_apply,
)
from qrag_integrations.core.chunks import Chunk, MetadataFilter
from qrag_integrations.core.compact_scan import EXACT, best_compact, check_scan, compact_scanner
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.lexical import (
    LexicalRanker,
    check_depth,
    check_gap,
    check_steps,
    fused_picks,
    fusion_of,
)
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.positions import rotate_as
from qrag_integrations.core.relaid_scan import relaid_top_k, shares
from qrag_integrations.core.scan import (
    FaissPreselector,
    cpu_fp32,
    faiss_best,
    scan_run_cpu,
    score_dtype,
    top_k_shared,
    update_best,
)
from qrag_integrations.core.supersede import pool_best, pools, search_margin, superseded


@dataclass(frozen=True)
class Hit:
    """One picked chunk."""

    chunk: Chunk
    """The chunk."""
    step: int
    """Search step (1-based) at which it was picked."""
    q_value: float
    """Q-value of the pick, ``Q1 + Q2``."""
    position: int
    """Position the chunk had when it was picked."""


@dataclass
class SearchSettings:
    """How the multi-step search runs."""

    block_size: int = 65536
    """Rows scored per matrix product; bounds temporary memory to ``block_size * batch`` floats."""
    faiss_candidates: int | None = None
    """If set, each step first takes this many candidates by FAISS inner product on unrotated
    embeddings, then re-scores them exactly with positions (approximate, for very large indexes)."""
    faiss_min_size: int = 200_000
    """FAISS pre-selection is used only for indexes at least this big."""
    faiss_factory: str = "Flat"
    """``faiss.index_factory`` string of the candidate index (``"Flat"``, ``"HNSW32"``, ...)."""
    scan: str = EXACT
    """How a step scans the index: ``"exact"`` (float32), or a compact copy that picks
    candidates for exact re-scoring: ``"int8"`` / ``"binary"``, or ``"bf16"`` for batches of
    questions (:mod:`~qrag_integrations.core.compact_scan`; CPU, positions ``none``, ``document`` or
    ``relative``; filtered searches scan exactly)."""
    rescore: int = 400
    """Compact scans: candidates per run of equal positions re-scored exactly each step."""
    lexical_depth: int | None = None
    """Fuse BM25 of the question into the first ``lexical_steps`` steps: BM25's ranking of this
    many chunks re-orders the best this many by Q, by reciprocal rank (the pick is one of Q's;
    :mod:`~qrag_integrations.core.lexical`; exact scan, in-memory index). ``0``: no fusion;
    ``None``: the model's ``QRAGConfig.lexical_depth`` where it can apply (in-memory index, exact
    scan, no FAISS pre-selection), else none."""
    lexical_steps: int | None = None
    """How many first steps fuse BM25; ``None``: the model's ``QRAGConfig.lexical_steps``
    (``None`` there: every step)."""
    lexical_gap: float | None = None
    """A step after the first ``lexical_steps`` fuses where Q's two best untaken lie within this
    gap (BM25 then counts chunks naming a question term no pick names); ``None``: the model's
    ``QRAGConfig.lexical_gap``; ``0``: never."""
    supersede: bool | None = None
    """Later restatements supersede picks (:mod:`~qrag_integrations.core.supersede`); ``None``: the model's."""

    def __post_init__(self) -> None:
        check_scan(self.scan, self.rescore)
        check_depth(self.lexical_depth)
        check_steps(self.lexical_steps)
        check_gap(self.lexical_gap)


class MultiStepSearcher:
    """Runs Q-RAG's greedy multi-step search for one model over one index."""

    def __init__(
        self, model: QRAGModel, index: ChunkIndex, settings: SearchSettings | None = None
    ) -> None:
        if model.embedding_dim != index.embedding_dim:
            raise QRAGError(
                f"model embedding size {model.embedding_dim} != index embedding size {index.embedding_dim}"
            )
        self.model = model
        self.index = index
        self.settings = settings or SearchSettings()
        self._faiss = FaissPreselector()
        self._lexical = LexicalRanker()
        self._searched = DocumentRotation(model.config)  # document mode's rotated snapshot
        self._compact = compact_scanner(
            self.settings.scan, index.device, model.config.position_mode is PositionMode.ABSOLUTE
        )

    # -- public -------------------------------------------------------------------------------
    def search(
        self,
        queries: Sequence[str],
        k: int,
        stop_threshold: float | None = None,
        filter: MetadataFilter | None = None,
        *,
        where: MetadataFilter | None = None,
    ) -> list[list[Hit]]:
        """Search several questions at once.

        Args:
            queries: question texts.
            k: maximum number of steps (= chunks returned per question).
            stop_threshold: stop a question's search before a pick whose Q-value is below this
                (it can then return nothing).
            filter: metadata filter (as the retriever's ``filter``); only matching chunks are
                candidates (positions are laid out over the matching chunks, which then form the
                "document").
            where: deprecated name of ``filter``.

        Returns:
            For each question, its hits in pick order: ``min(k, candidates)`` of them, fewer when
            ``stop_threshold`` stops early.
        """
        if where is not None:
            if filter is not None:
                raise QRAGError("pass filter= only (where= is its deprecated name)")
            warnings.warn(
                "MultiStepSearcher.search(where=) is deprecated; use filter=",
                DeprecationWarning,
                stacklevel=2,
            )
            filter = where
        candidates = self._searched.candidates(self.index.snapshot(), filter)
        use_faiss = (
            self.settings.faiss_candidates is not None
            and candidates.rows is None
            and candidates.n >= self.settings.faiss_min_size
        )
        return self._run(
            queries,
            [candidates] * len(queries),
            k,
            stop_threshold,
            shared=True,
            use_faiss=use_faiss,
        )

    def search_each(
        self,
        queries: Sequence[str],
        indexes: Sequence[ChunkIndex],
        k: int,
        stop_threshold: float | None = None,
    ) -> list[list[Hit]]:
        """Search each question in its own index (e.g. a question's own paragraphs), with the
        states of all questions encoded together at every step.

        The same search as :meth:`search` (same picks, Q-values and stop rule as searching each
        question alone in its index); ``self.index`` is not used.
        """
        if len(indexes) != len(queries):
            raise QRAGError(f"got {len(queries)} queries but {len(indexes)} indexes")
        for index in indexes:
            if index.embedding_dim != self.model.embedding_dim:
                raise QRAGError(
                    f"model embedding size {self.model.embedding_dim} != index embedding size {index.embedding_dim}"
                )
        candidates = [self._searched.candidates(i.snapshot(), None, keep=False) for i in indexes]
        return self._run(queries, candidates, k, stop_threshold, shared=False, use_faiss=False)

    def search_sets(
        self,
        queries: Sequence[str],
        sets: Sequence[CandidateSet],
        k: int,
        stop_threshold: float | None = None,
    ) -> list[list[Hit]]:
        """Search each question over its own :class:`CandidateSet` (e.g. a vector store's
        candidates, :mod:`qrag_integrations.stores.search`): the loop, state texts, anchoring and
        stop rule of :meth:`search`, with the set choosing each pick; ``self.index`` is not used."""
        if len(sets) != len(queries):
            raise QRAGError(f"got {len(queries)} queries but {len(sets)} candidate sets")
        return self._run(queries, sets, k, stop_threshold, shared=False, use_faiss=False)

    # -- the search loop ----------------------------------------------------------------------
    def _run(
        self,
        queries: Sequence[str],
        candidates: Sequence[CandidateSet],
        k: int,
        stop_threshold: float | None,
        shared: bool,
        use_faiss: bool,
    ) -> list[list[Hit]]:
        """Greedy search of ``queries[b]`` over ``candidates[b]``; ``shared`` = one candidate set
        for all (its first step is one pass for the batch)."""
        if k < 1:
            raise QRAGError(f"k must be >= 1, got {k}")
        results: list[list[Hit]] = [[] for _ in queries]
        picked: list[list[int]] = [[] for _ in queries]  # local ranks in pick order
        active = [b for b in range(len(queries)) if candidates[b].n > 0]
        question_row: dict[int, int] = {}
        questions = torch.empty(0)
        fusion = fusion_of(self, candidates, queries, active, self._lexical_depth(candidates), k)  # type: ignore[arg-type]
        positions = self.model.config.position_mode.moves
        margin = search_margin(self, candidates)
        for step in range(1, k + 1):
            active = [b for b in active if len(picked[b]) < candidates[b].n]
            if not active:
                break
            texts = [self._state_text(queries[b], candidates[b], picked[b]) for b in active]
            with torch.inference_mode():
                states = self.model.embed_states(texts).to(torch.float32)
                if step == 1:  # the state is the bare question: keep it for anchoring
                    questions, question_row = states, {b: i for i, b in enumerate(active)}
                else:
                    states = self.model.anchor_states(
                        states, questions[[question_row[b] for b in active]]
                    )
                    last = torch.tensor([results[b][-1].position for b in active])
                    states = self.model.place_states(states, last)
            best: list[tuple[int, float, int] | None]
            one_layout = shared and (  # one scan serves the batch
                step == 1
                or not positions
                or shares(self, candidates[0], [picked[b] for b in active])  # type: ignore[arg-type]
            )
            pool = pools(self, candidates, active, states, picked, one_layout, margin)
            if fusion is not None and fusion.at(step):
                best = fused_picks(self, fusion, step, active, states, picked, pool, one_layout)
            elif pool is not None:
                best = [pool_best(p) for p in pool]
            elif use_faiss:
                best = [
                    faiss_best(self, candidates[0], states[i], picked[b])  # type: ignore[arg-type]
                    for i, b in enumerate(active)
                ]
            elif (
                self._compact is not None
                and shared
                and candidates[0].rows is None
                and self._compact.serves(len(active), step == 1 or not positions)
            ):
                best = best_compact(
                    self._compact,
                    candidates[0].emb,
                    states,
                    [picked[b] for b in active],
                    lambda taken, c=candidates[0]: self._runs(c, taken),  # type: ignore[misc]
                    self._rotated_states,
                    self.settings.rescore,
                )
            elif one_layout:  # no picks yet, or picks move no position
                best = self._best_shared_layout(
                    candidates[0],  # type: ignore[arg-type]
                    states,
                    [picked[b] for b in active],
                )
            else:
                best = [
                    candidates[b].best(self, states[i], picked[b]) for i, b in enumerate(active)
                ]
            if pool is not None:
                best = superseded(self, candidates, active, pool, picked, best, texts, margin)  # type: ignore[arg-type]
            still = []
            for pick, b in zip(best, active):
                if pick is None:  # nothing left that this question may get
                    continue
                rank, q, pos = pick
                if stop_threshold is not None and q < stop_threshold:
                    continue
                picked[b].append(rank)
                cand = candidates[b]
                if isinstance(cand, IndexCandidates):  # document mode: its fixed position
                    pos = cand.position(rank, pos)
                results[b].append(Hit(cand.chunk(rank), step, q, pos))
                still.append(b)
            active = still
        return results

    # -- helpers ------------------------------------------------------------------------------
    def _lexical_depth(self, candidates: Sequence[CandidateSet]) -> int | None:
        """This search's BM25 fusion depth: the settings' (0: none), else the model's where
        fusion can run (``None``: no fusion)."""
        explicit = self.settings.lexical_depth
        if explicit is not None:
            if explicit and not all_in_memory(candidates):
                raise QRAGError("lexical fusion (lexical_depth) searches an in-memory index only")
            return explicit or None
        return self.model.config.lexical_depth if own_settings_apply(self, candidates) else None

    def _state_text(self, query: str, candidates: CandidateSet, picked: list[int]) -> str:
        return self.model.state_text(
            query, [candidates.chunk(r).text for r in picked], picked_order=picked
        )

    def _runs(self, cands: IndexCandidates, picked: list[int]) -> list[tuple[int, int, int]] | None:
        """The runs ``(start, stop, position)`` of equal positions a step scores ``cands`` at."""
        return cands.layout_runs(self.model.config, picked)

    def _rotated_states(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """``(R, B, D)``: every state rotated by ``-p`` for each run position ``p``."""
        if not any(positions):  # modes none / document: one run at 0, a rotation by 0 is a copy
            return states.unsqueeze(0).expand(len(positions), -1, -1)
        pos = torch.tensor(positions, device=states.device).view(-1, 1).expand(-1, states.shape[0])
        many = states.unsqueeze(0).expand(len(positions), -1, -1)
        return rotate_as(self.model.config, many, pos, inverse=True)

    def _best_shared_layout(
        self, cands: IndexCandidates, states: torch.Tensor, picked: list[list[int]]
    ) -> list[tuple[int, float, int]]:
        """Each question's best in one pass over a layout they share (its picks masked out)."""
        one_on_cpu = states.shape[0] == 1 and cpu_fp32(cands.emb)
        shared = None if one_on_cpu else self.shared_layout_top_k(cands, states, picked, 1)
        if shared is None:
            return [self._best_one(cands, states[i], picked[i]) for i in range(states.shape[0])]
        q, rank, pos = shared
        return [(int(r), float(v), int(p)) for v, r, p in zip(q[0], rank[0], pos[0])]

    def shared_layout_top_k(
        self, cands: IndexCandidates, states: torch.Tensor, picked: list[list[int]], k: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """The ``k`` best ``(Q, rank, position)`` of states that share one layout (the first
        step, or no positions), each ``(k, B)``, in one pass over the index; ``None`` with
        absolute positions (every chunk has its own)."""
        if any(picked) and shares(self, cands, picked):
            return relaid_top_k(self, cands, states, picked, k)
        runs = self._runs(cands, [])
        if runs is None:
            return None
        rotated = self._rotated_states(states, [p for _, _, p in runs])
        return top_k_shared(cands.emb, runs, rotated, picked, k, self.settings.block_size)

    def _best_one(
        self, cands: IndexCandidates, state: torch.Tensor, picked: list[int]
    ) -> tuple[int, float, int]:
        """Best available chunk for one question given its picks."""
        emb, n = cands.emb, cands.n
        runs = self._runs(cands, picked)
        dtype = score_dtype(emb)
        taken = torch.tensor(sorted(picked), dtype=torch.long, device=emb.device)
        best: tuple[int, float, int] = (-1, -float("inf"), 0)
        if runs is None:  # absolute: every chunk has its own position, rotate the chunks instead
            for lo in range(0, n, self.settings.block_size):
                hi = min(n, lo + self.settings.block_size)
                pos = torch.arange(lo, hi, device=emb.device)
                scores = self.model.rotate_chunks(emb[lo:hi].float(), pos) @ state
                best = update_best(best, scores, lo, taken, lambda r: r)
            return best
        rotated = self._rotated_states(state.unsqueeze(0), [p for _, _, p in runs])[:, 0]
        if cpu_fp32(emb):
            taken_list = sorted(picked)
            for (a, b, p), rot in zip(runs, rotated):
                rank, q = scan_run_cpu(emb, a, b, rot.float().contiguous(), taken_list)
                if q > best[1]:
                    best = (rank, q, p)
            return best
        for (a, b, p), rot in zip(runs, rotated):
            rot = rot.to(dtype)
            for lo in range(a, b, self.settings.block_size):
                hi = min(b, lo + self.settings.block_size)
                scores = (emb[lo:hi].to(dtype) @ rot).float()
                best = update_best(best, scores, lo, taken, lambda r, p=p: p)
        return best
