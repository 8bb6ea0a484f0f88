"""One step of a batch's search as the scorers and rules see it: the questions still searching,
their candidates, state embeddings and picks so far."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from qrag_integrations.core.candidates import CandidateSet


@dataclass(frozen=True)
class Step:
    """Step ``number`` of the questions still searching; entry ``i`` of every field is the
    ``i``-th of them (question number ``active[i]`` of the batch)."""

    number: int
    """The step, from 1."""
    active: list[int]
    """The questions' numbers in the batch."""
    candidates: Sequence[CandidateSet]
    """Each question's candidates (the same set for all in a shared search)."""
    states: torch.Tensor
    """``(B, D)``: their (anchored, placed) state embeddings."""
    picked: list[list[int]]
    """Each question's picked ranks, in pick order."""
    one_layout: bool
    """Every question shares ``candidates[0]`` and its layout of positions, so one pass over the
    index scores the batch."""
