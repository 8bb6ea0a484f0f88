"""Model specs of the benchmarks' command lines: ``CHECKPOINT[:FIELD=VALUE,...]``, a checkpoint
with search-time settings changed (they are read at search time, not trained in)."""

from __future__ import annotations

from qrag_integrations import load_model
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy


def _optional_float(value: str) -> float | None:
    return None if value.lower() == "none" else float(value)


def _bool(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return value.lower() == "true"


#: Search settings a model spec may change (they are read at search time, not trained in): the
#: model's config fields, then rules of the search policy (``SearchPolicy.of``'s changes).
SETTINGS = {
    "question_weight": float,
    "supersede_margin": _optional_float,
    "supersede_similarity": float,
    "max_state_tokens": int,
    "max_chunk_tokens": int,
    "position_mode": PositionMode,
    "relative_step": int,
    "state_at_last_pick": _bool,
}
SEARCH_SETTINGS = {
    "lexical_depth": int,
    "lexical_steps": int,
    "lexical_gap": float,
    "lexical_weight": float,
}


def load_with_settings(spec: str) -> tuple[QRAGModel, SearchPolicy]:
    """``CHECKPOINT[:FIELD=VALUE,...]``: the model, with those search settings changed, and the
    search policy it is searched by (its config's, with the spec's rules)."""
    checkpoint, _, settings = split_settings(spec)
    model, search = load_model(checkpoint), {}
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        if key in SEARCH_SETTINGS:
            search[key] = SEARCH_SETTINGS[key](value)
        elif key in SETTINGS:
            setattr(model.config, key, SETTINGS[key](value))
        else:
            valid = ", ".join([*SETTINGS, *SEARCH_SETTINGS])
            raise ValueError(f"unknown search setting {key!r} in {spec!r}; valid: {valid}")
    return model, SearchPolicy.of(model.config, **search)


def split_settings(spec: str) -> tuple[str, str, str]:
    """``(checkpoint, ':', settings)``: settings follow the last ``:`` that precedes a ``=``."""
    head, sep, tail = spec.rpartition(":")
    if sep and "=" in tail:
        return head, sep, tail
    return spec, "", ""


def checkpoint_of(spec: str) -> str:
    """The checkpoint part of a model spec."""
    return split_settings(spec)[0]


def load_with_model_settings(spec: str) -> QRAGModel:
    """:func:`load_with_settings` for benchmarks that search with the model's own settings: the
    search fields (BM25 fusion) are set on the model's config, where they are its defaults."""
    model, policy = load_with_settings(spec)
    for key in SEARCH_SETTINGS:
        # the config says "no fusion" / "never" with None, where the policy says 0
        setattr(model.config, key, getattr(policy, key) or None)
    return model
