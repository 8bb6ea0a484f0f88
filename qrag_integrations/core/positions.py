"""Chunk positions: the position modes (:class:`PositionMode`: none / absolute / relative /
document / document_relative), their layouts, the runs of equal positions a step scans, a
document mode's fixed layout, and the RoPE rotation they drive.

Positions are integers: the reference implementation looks rotation angles up in an integer
table, so a relative layout ``linspace(0, 18, n)`` is floored. Integer positions also make runs
of neighbouring chunks share one position, which the search exploits (see ``exact_scan.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np
import torch


class PositionMode(str, Enum):
    """How chunk positions rotate chunk embeddings (RoPE)."""

    NONE = "none"
    """No rotation: Q ignores where a chunk sits in the document."""
    ABSOLUTE = "absolute"
    """Position of chunk i is its order index i in the index."""
    RELATIVE = "relative"
    """Positions are re-laid out around the picked chunks after every pick (the paper's default)."""
    DOCUMENT = "document"
    """Fixed positions inside each document: chunk ``i`` of a document of ``L`` chunks is at
    ``(i * M) // (L - 1)`` with ``M = int(relative_span * relative_step)``, a one-chunk document
    at 0. Order counts inside a document (the latest of a person's moves in a story) and never
    between documents (pooled paragraphs); picks move nothing."""
    DOCUMENT_RELATIVE = "document_relative"
    """The document mode's fixed positions, except inside a document holding picks: that
    document's chunks are laid out as relative mode lays out one document around its picks
    (segment ``j``, cut by the ``j``-th pick in it, from ``j * relative_step``). Order around the
    picks counts inside a story ("where was X before Y"); documents without picks and one-chunk
    documents stay as in document mode."""

    @property
    def moves(self) -> bool:
        """Whether a chunk's position depends on the picks or its row (absolute, relative,
        document_relative), so one scan cannot serve questions with different picks."""
        return self in (
            PositionMode.ABSOLUTE,
            PositionMode.RELATIVE,
            PositionMode.DOCUMENT_RELATIVE,
        )

    @property
    def in_documents(self) -> bool:
        """Whether positions are laid out inside each document (document, document_relative)."""
        return self in (PositionMode.DOCUMENT, PositionMode.DOCUMENT_RELATIVE)


class PositionSettings(Protocol):
    """The model settings positions read (a :class:`~qrag_integrations.core.config.QRAGConfig`)."""

    @property
    def position_mode(self) -> PositionMode: ...

    @property
    def relative_step(self) -> int: ...

    @property
    def relative_span(self) -> float: ...

    @property
    def rope_theta(self) -> float: ...

    @property
    def rope_max_frequency(self) -> float | None: ...


def relative_positions_at(
    ranks: np.ndarray, n: int, picked_ranks: Sequence[int], step: int, span: float
) -> np.ndarray:
    """Relative positions of the chunks at ``ranks`` (document order) among ``n`` chunks.

    Each picked chunk opens a new segment; segment ``j`` of length ``L`` gives its ``i``-th chunk
    ``j * step + (i * M) // (L - 1)`` with ``M = int(span * step)``, i.e. ``floor`` of the
    paper's ``linspace(0, M, L)`` computed in exact integer arithmetic. An empty segment (a pick
    at rank 0, or two adjacent picks) still advances ``j``, as in the reference code.

    Args:
        ranks: int array of ranks in ``[0, n)``.
        n: number of chunks in document order.
        picked_ranks: ranks of picked chunks, any order.
        step: distance between segments.
        span: fraction of ``step`` a segment spreads over.

    Returns:
        int64 array shaped like ``ranks``.
    """
    max_value = int(span * step)
    ranks = np.asarray(ranks, dtype=np.int64)
    bounds = np.array(sorted({int(r) for r in picked_ranks}), dtype=np.int64)
    # segment j covers [starts[j], ends[j]); segment 0 starts at 0, segment j>0 at bounds[j-1]
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [n]])
    seg = np.searchsorted(bounds, ranks, side="right")
    length = ends[seg] - starts[seg]
    offset_in = ranks - starts[seg]
    within = np.where(length > 1, (offset_in * max_value) // np.maximum(length - 1, 1), 0)
    return seg * step + within


def relative_layout(n: int, picked_ranks: Sequence[int], step: int, span: float) -> np.ndarray:
    """Relative positions of all ``n`` chunks (see :func:`relative_positions_at`)."""
    return relative_positions_at(np.arange(n), n, picked_ranks, step, span)


def relative_runs(
    n: int, picked_ranks: Sequence[int], step: int, span: float
) -> list[tuple[int, int, int]]:
    """The relative layout as runs ``(start, stop, position)`` of equal positions.

    Same positions as :func:`relative_layout` without materialising ``n`` values: there are at
    most ``(int(span * step) + 1) * (len(picked_ranks) + 1)`` runs.
    """
    max_value = int(span * step)
    runs: list[tuple[int, int, int]] = []
    bounds = sorted({int(r) for r in picked_ranks}) + [n]
    start = 0
    for seg, end in enumerate(bounds):
        length = end - start
        if length == 1 or (length > 1 and max_value == 0):
            runs.append((start, end, seg * step))
        elif length > 1:
            for p in range(max_value + 1):
                # first i with (i * M) // (L - 1) >= p is ceil(p * (L - 1) / M)
                a = -((-p * (length - 1)) // max_value)
                b = min(-((-(p + 1) * (length - 1)) // max_value), length)
                if b > a:
                    runs.append((start + a, start + b, seg * step + p))
        start = max(start, end)
    return runs


def document_layout(doc_ids: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk's order inside its document and that document's chunk count, for chunks in
    document order (a document is a run of equal consecutive ``doc_ids``)."""
    n = len(doc_ids)
    starts = [i for i in range(n) if i == 0 or doc_ids[i] != doc_ids[i - 1]]
    lengths = np.diff(np.array(starts + [n], dtype=np.int64))
    first = np.repeat(np.array(starts, dtype=np.int64), lengths)
    return np.arange(n, dtype=np.int64) - first, np.repeat(lengths, lengths)


def layout_positions(order: np.ndarray, length: np.ndarray, step: int, span: float) -> np.ndarray:
    """Fixed positions under :attr:`PositionMode.DOCUMENT`: chunk ``order`` of a document of
    ``length`` chunks sits at ``(order * M) // (length - 1)`` with ``M = int(span * step)`` (the
    relative layout's segment with no picks), a one-chunk document at 0."""
    max_value = int(span * step)
    order, length = np.asarray(order, dtype=np.int64), np.asarray(length, dtype=np.int64)
    return np.where(length > 1, (order * max_value) // np.maximum(length - 1, 1), 0)


def document_positions(doc_ids: Sequence[object], step: int, span: float) -> np.ndarray:
    """:func:`layout_positions` of chunks in document order with these ``doc_ids``."""
    return layout_positions(*document_layout(doc_ids), step, span)


def document_relative_positions_at(
    ranks: np.ndarray,
    order: np.ndarray,
    length: np.ndarray,
    picked_ranks: Sequence[int] | np.ndarray,
    picked_order: Sequence[int] | np.ndarray,
    step: int,
    span: float,
) -> np.ndarray:
    """Positions under :attr:`PositionMode.DOCUMENT_RELATIVE` of the chunks at ``ranks`` (document
    order), each the ``order``-th of its document's ``length`` chunks, given the picks' ranks and
    their orders in their documents: :func:`layout_positions`, except in a document holding
    picks, where :func:`relative_positions_at` lays that document out around them.

    Returns:
        int64 array shaped like ``ranks``.
    """
    ranks, order, length = (np.asarray(a, dtype=np.int64) for a in (ranks, order, length))
    out = layout_positions(order, length, step, span)
    starts = ranks - order  # a document is known by the rank of its first chunk
    picked = np.asarray(picked_ranks, dtype=np.int64)
    picked_starts = picked - np.asarray(picked_order, dtype=np.int64)
    for start in np.unique(picked_starts).tolist():
        here = starts == start
        if here.any():
            local = (picked[picked_starts == start] - start).tolist()
            out[here] = relative_positions_at(order[here], int(length[here][0]), local, step, span)
    return out


def fixed_runs(positions: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """``positions`` (document order) as runs ``(start, stop, position)`` of equal values."""
    if positions.size == 0:
        return ()
    cuts = np.flatnonzero(np.diff(positions)) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    stops = np.concatenate([cuts, [positions.size]]).astype(np.int64)
    return tuple((int(a), int(b), int(positions[a])) for a, b in zip(starts, stops))


def _outside(
    runs: Sequence[tuple[int, int, int]], spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int, int]]:
    """The parts of ``runs`` outside ``spans`` (sorted, disjoint ``(start, stop)``)."""
    out = []
    for a, b, p in runs:
        for lo, hi in spans:
            if hi <= a:
                continue
            if lo >= b:
                break
            if lo > a:
                out.append((a, lo, p))
            a = hi
        if a < b:
            out.append((a, b, p))
    return out


def picked_documents(
    order: np.ndarray, length: np.ndarray, picked_ranks: Sequence[int]
) -> list[tuple[int, int]]:
    """``(start, stop)`` of each document holding one of ``picked_ranks``, sorted (``order`` and
    ``length``: each chunk's order inside its document and that document's chunk count)."""
    return sorted(
        {(int(r) - int(order[r]), int(r) - int(order[r]) + int(length[r])) for r in picked_ranks}
    )


def document_runs(
    order: np.ndarray,
    length: np.ndarray,
    picked_ranks: Sequence[int],
    step: int,
    span: float,
    offset: np.ndarray | None = None,
) -> list[tuple[int, int, int]]:
    """The runs of the documents holding picks under :attr:`PositionMode.DOCUMENT_RELATIVE`, each
    laid out around its picks (:func:`relative_runs`), sorted; ``offset``: positions the searched
    embeddings are already rotated by (a rotated copy), so the runs hold the rest,
    ``relative - offset``."""
    out: list[tuple[int, int, int]] = []
    for lo, hi in picked_documents(order, length, picked_ranks):
        local = [int(r) - lo for r in picked_ranks if lo <= r < hi]
        if offset is None:
            runs = relative_runs(hi - lo, local, step, span)
        else:
            runs = list(fixed_runs(relative_layout(hi - lo, local, step, span) - offset[lo:hi]))
        out += [(lo + a, lo + b, p) for a, b, p in runs]
    return out


def overlaid(
    base: Sequence[tuple[int, int, int]],
    spans: Sequence[tuple[int, int]],
    runs: Sequence[tuple[int, int, int]],
) -> list[tuple[int, int, int]]:
    """``base`` runs outside ``spans`` (sorted, disjoint ``(start, stop)``) plus ``runs`` (inside
    them), sorted by start: a :attr:`PositionMode.DOCUMENT_RELATIVE` step's layout from the fixed
    layout's runs and :func:`document_runs`."""
    return sorted(_outside(base, spans) + list(runs))


#: Rows rotated at a time when a snapshot is rotated for document positions.
ROTATION_BLOCK = 16384

#: Runs ``(start, stop, position)`` of consecutive chunks sharing one fixed position.
Runs = tuple[tuple[int, int, int], ...]

#: Document mode searches stored, unrotated embeddings run by run of equal fixed positions (the
#: state rotated once per run, as in relative mode) when the runs average at least this many
#: chunks, e.g. one long document (at most ``int(relative_span * relative_step) + 1`` runs);
#: shorter runs (many short documents) would cost a rotation and a small scan each per step, so
#: those are searched on a rotated copy of the embeddings (one more float32 copy).
MIN_MEAN_RUN = 1024


def rotated_copy(
    emb: torch.Tensor, positions: np.ndarray, config: PositionSettings
) -> torch.Tensor:
    """``emb`` rotated by ``positions`` (a document mode's rotated copy of the embeddings)."""
    # in blocks into one new tensor: the rotation's float32 temporaries stay a block's size
    # (whole, they were ~7 times the embeddings at 400K chunks)
    out, at = torch.empty_like(emb), torch.from_numpy(positions).to(emb.device)
    for i in range(0, emb.shape[0], ROTATION_BLOCK):
        j = i + ROTATION_BLOCK
        out[i:j] = rotate_as(config, emb[i:j], at[i:j])
    return out


@dataclass(frozen=True)
class DocumentLayout:
    """Where the searched chunks sit in their documents, and the fixed positions that gives."""

    order: np.ndarray
    """Each chunk's order inside its document (a run of equal consecutive doc ids)."""
    length: np.ndarray
    """Each chunk's document's chunk count."""
    fixed: np.ndarray
    """Each chunk's fixed position (:func:`layout_positions`)."""


def fixed_layout(
    doc_ids: Sequence[object], emb: torch.Tensor, config: PositionSettings
) -> tuple[DocumentLayout, Runs | None, torch.Tensor | None]:
    """The fixed layout of the searched chunks of these ``doc_ids`` (document modes), its runs and
    rotated embeddings: runs (``emb`` searched as stored) where they are long, else a rotated
    copy."""
    order, length = document_layout(doc_ids)
    fixed = layout_positions(order, length, config.relative_step, config.relative_span)
    runs = fixed_runs(fixed)
    where = DocumentLayout(order, length, fixed)
    if not fixed.any() or len(runs) * MIN_MEAN_RUN <= fixed.size:
        return where, runs, None
    return where, None, rotated_copy(emb, fixed, config)


def positions_in_runs(runs: Sequence[tuple[int, int, int]], ranks: np.ndarray) -> np.ndarray:
    """The position of each of ``ranks`` in ``runs`` (sorted, covering every rank asked)."""
    starts = np.array([a for a, _, _ in runs], dtype=np.int64)
    at = np.array([p for _, _, p in runs], dtype=np.int64)
    return at[np.searchsorted(starts, np.asarray(ranks, dtype=np.int64), side="right") - 1]


def _needs_documents(mode: PositionMode) -> None:
    if mode is PositionMode.DOCUMENT_RELATIVE:
        raise ValueError(
            "position_mode document_relative lays chunks out by document: use "
            "document_relative_positions_at / document_runs with each chunk's document layout"
        )


def positions_at(
    mode: PositionMode,
    ranks: np.ndarray,
    n: int,
    picked_ranks: Sequence[int],
    step: int,
    span: float,
) -> np.ndarray:
    """Positions of the chunks at ``ranks`` (document order) among ``n``, for any position mode
    (document mode: 0, since its fixed rotation is applied to the embeddings searched, see
    :class:`~qrag_integrations.core.index.DocumentRotation`)."""
    _needs_documents(mode)
    if mode is PositionMode.RELATIVE:
        return relative_positions_at(ranks, n, picked_ranks, step, span)
    if mode is PositionMode.ABSOLUTE:
        return np.asarray(ranks, dtype=np.int64)
    return np.zeros(len(ranks), dtype=np.int64)


def layout(
    mode: PositionMode, n: int, picked_ranks: Sequence[int], step: int, span: float
) -> np.ndarray:
    """Positions of all ``n`` chunks in document order for any position mode."""
    return positions_at(mode, np.arange(n), n, picked_ranks, step, span)


def layout_runs(
    mode: PositionMode, n: int, picked_ranks: Sequence[int], step: int, span: float
) -> list[tuple[int, int, int]] | None:
    """Runs of equal positions, or ``None`` when every chunk has its own (absolute mode); document
    mode is one run at 0 like none: its fixed positions are in the embeddings searched, or are the
    candidates' own runs (:class:`~qrag_integrations.core.index.IndexCandidates`)."""
    _needs_documents(mode)
    if mode is PositionMode.RELATIVE:
        return relative_runs(n, picked_ranks, step, span)
    if mode in (PositionMode.NONE, PositionMode.DOCUMENT):
        return [(0, n, 0)] if n else []
    return None


def rope_inv_freq(
    dim: int,
    theta: float,
    device: torch.device | str | None = None,
    max_frequency: float | None = None,
) -> torch.Tensor:
    """Inverse frequencies for a RoPE over ``dim`` features (``dim // 2`` rotated pairs); those
    above ``max_frequency`` are 0 (the pair is not rotated)."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    if max_frequency is not None:
        inv = torch.where(inv > max_frequency, torch.zeros_like(inv), inv)
    return inv


def rotate(
    emb: torch.Tensor,
    positions: torch.Tensor,
    theta: float,
    inverse: bool = False,
    max_frequency: float | None = None,
) -> torch.Tensor:
    """Rotate embeddings by their positions, each half of the features separately.

    Features are rotated in interleaved pairs ``(x[2i], x[2i+1])`` (the layout of
    ``rotary_embedding_torch``), with the same angles in both halves, which is what the twin heads
    need: ``Q1`` uses the first half and ``Q2`` the second.

    Args:
        emb: ``(..., D)`` with ``D % 4 == 0``.
        positions: integer positions broadcastable to ``emb.shape[:-1]``.
        theta: RoPE base.
        inverse: rotate by ``-position`` (turns ``<s, R(p) a>`` into ``<R(-p) s, a>``).
        max_frequency: pairs of a higher frequency stay as they are (``None``: all turn).

    Returns:
        Rotated tensor, same shape and dtype as ``emb``.
    """
    dim = emb.shape[-1]
    if dim % 4:
        raise ValueError(f"embedding size must be divisible by 4 for twin-head RoPE, got {dim}")
    half = dim // 2
    inv_freq = rope_inv_freq(half, theta, device=emb.device, max_frequency=max_frequency)
    if positions.device.type == "cpu":
        # on the CPU the cos and sin of every element cost most: those of each distinct position
        # (a document has ~19) gathered per row are the same values (on CUDA, unique() would
        # wait for the device)
        distinct, which = torch.unique(positions, return_inverse=True)
    else:
        distinct, which = positions, None
    angles = distinct.to(torch.float32).unsqueeze(-1) * inv_freq  # (U, half // 2)
    angles = angles.repeat_interleave(2, dim=-1)  # (U, half)
    angles = torch.cat([angles, angles], dim=-1)  # (U, dim)
    cos, sin = angles.cos(), angles.sin()
    if which is not None:
        cos, sin = cos[which], sin[which]  # (..., dim)
    if inverse:
        sin = -sin
    x = emb.to(torch.float32)
    pairs = x.unflatten(-1, (-1, 2))
    rotated_half = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return (x * cos + rotated_half * sin).to(emb.dtype)


def rotate_as(
    config: PositionSettings, emb: torch.Tensor, positions: torch.Tensor, inverse: bool = False
) -> torch.Tensor:
    """:func:`rotate` with a model's own RoPE settings (``rope_theta``, ``rope_max_frequency``):
    the one call every search and training path rotates through, so none can drop the cap."""
    return rotate(emb, positions, config.rope_theta, inverse, config.rope_max_frequency)


def rotated_states(
    config: PositionSettings, states: torch.Tensor, positions: list[int]
) -> torch.Tensor:
    """``(R, B, D)``: every state of ``(B, D)`` rotated by ``-p`` for each run position ``p``
    (``<s, R(p) a> = <R(-p) s, a>``: one rotation of the state per run, none of the chunks)."""
    if not any(positions):  # modes none / document: one run at 0, a rotation by 0 is a copy
        return states.unsqueeze(0).expand(len(positions), -1, -1)
    pos = torch.tensor(positions, device=states.device).view(-1, 1).expand(-1, states.shape[0])
    many = states.unsqueeze(0).expand(len(positions), -1, -1)
    return rotate_as(config, many, pos, inverse=True)
