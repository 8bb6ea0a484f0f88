"""The settings of question generation (:func:`qrag_training.questions.make_questions`)."""

from __future__ import annotations

from dataclasses import dataclass

from qrag_training.data.custom import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    SPLITTER_AUTO,
    SPLITTERS,
)
from qrag_training.questions.errors import QuestionGenerationError

SPLIT_HASH, SPLIT_NONE = "hash", "none"
SPLIT_MODES = (SPLIT_HASH, SPLIT_NONE)


@dataclass(frozen=True)
class QuestionSettings:
    """How documents become training lines; checked once, when built."""

    chunk_size: int = DEFAULT_CHUNK_SIZE
    """Characters per chunk: give the trainer the same (``env.chunk_size``)."""
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    """Characters of overlap between chunks (LangChain splitter only)."""
    splitter: str = SPLITTER_AUTO
    """Document splitter as in the custom JSONL format: auto, langchain or sentences."""
    questions_per_chunk: int = 2
    """Most single-chunk questions written from one chunk."""
    bridge_share: float = 0.25
    """Most bridge questions, as a share of the single-chunk questions (0: none)."""
    bridge_max_chunks: int = 4
    """A bridge entity is one named in 2 to this many chunks (rarer names make better links)."""
    pool_chunks: int = 30
    """Chunks a line searches at least: its documents' excerpts, topped up with other documents."""
    split: str = SPLIT_HASH
    """hash: documents keep the trainer's hash side and never share a line with the other side;
    none: no side (you hold documents out yourself, e.g. separate files)."""
    seed: int = 0
    """Seed of every random choice (the same documents and seed give the same file)."""
    reader_batch: int = 16
    """Prompts per reader call."""
    rules_fallback: bool = True
    """With a reader: keep the rules' question where the reader's fails validation."""

    def __post_init__(self) -> None:
        problems = []
        if self.chunk_size < 1 or self.chunk_overlap < 0 or self.chunk_overlap >= self.chunk_size:
            problems.append(
                f"chunk_size must be >= 1 and 0 <= chunk_overlap < chunk_size "
                f"(got {self.chunk_size}, {self.chunk_overlap})"
            )
        if self.splitter not in SPLITTERS:
            problems.append(
                f"splitter must be one of {', '.join(SPLITTERS)} (got {self.splitter!r})"
            )
        if self.questions_per_chunk < 1:
            problems.append(f"questions_per_chunk must be >= 1 (got {self.questions_per_chunk})")
        if not 0 <= self.bridge_share <= 1:
            problems.append(f"bridge_share must lie in [0, 1] (got {self.bridge_share})")
        if self.bridge_max_chunks < 2:
            problems.append(f"bridge_max_chunks must be >= 2 (got {self.bridge_max_chunks})")
        if self.pool_chunks < 1:
            problems.append(f"pool_chunks must be >= 1 (got {self.pool_chunks})")
        if self.split not in SPLIT_MODES:
            problems.append(f"split must be one of {', '.join(SPLIT_MODES)} (got {self.split!r})")
        if self.reader_batch < 1:
            problems.append(f"reader_batch must be >= 1 (got {self.reader_batch})")
        if problems:
            raise QuestionGenerationError("; ".join(problems))
