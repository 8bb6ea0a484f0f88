"""Turn the composed Hydra config into typed objects (run settings, model config, learner config,
data, reward).

Shared by ``qrag-train`` and ``qrag-eval`` so both read the config tree the same way: each part is
read once, here, into a dataclass; nothing else reads raw config keys.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_training.data.episode import Episode
from qrag_training.data.groups import (
    GROUP_AUTO,
    GROUP_LINE,
    GROUP_META_PREFIX,
    SPLIT_KEY,
    count_documents,
)
from qrag_training.data.registry import load_dataset
from qrag_training.data.splits import ALL, HASH, MIN_GROUPS, VAL, SplitPlan, plan_splits
from qrag_training.env import EnvSettings
from qrag_training.feedback import Feedback
from qrag_training.feedback_kinds import build_feedback
from qrag_training.next_hop import NextHopConfig
from qrag_training.pqn import PQNConfig

logger = logging.getLogger(__name__)

#: Env-group fields that become QRAGConfig fields.
ENV_MODEL_FIELDS = (
    "position_mode",
    "relative_step",
    "relative_span",
    "state_order",
    "max_state_tokens",
    "max_chunk_tokens",
    "state_separator",
)
#: Model-group fields that become QRAGConfig fields.
MODEL_FIELDS = (
    "base_model",
    "trainable_layers",
    "output_scale",
    "normalize",
    "question_weight",
    "rope_theta",
    "rope_max_frequency",
    "state_at_last_pick",
)
#: ``algo.kind`` values: the learner each builds its config for.
ALGO_KINDS = ("pqn", "next_hop")
#: Eval metrics that can select ``out_dir/best`` (keys of :func:`qrag_training.metrics.summarize`).
CHECKPOINT_METRICS = ("fact_em", "fact_em_at_facts", "fact_f1", "reward")


@dataclass
class RunConfig:
    """The run settings: the top-level fields of ``conf/train.yaml`` (documented there) and the
    two fields of the ``env`` group that the loop reads. Types are checked and converted when it
    is built (:func:`run_config_from`)."""

    out_dir: str
    """Run folder: ``best/``, ``last/``, ``tb/``, ``metrics.jsonl``."""
    seed: int = 0
    """Seeds python, numpy and torch, the policy sampler and the training data."""
    device: str = "cpu"
    """Torch device for training and evaluation."""
    torch_threads: int | None = None
    """``torch.set_num_threads`` for CPU ops; ``None`` keeps torch's default."""
    steps: int = 50_000
    """Optimiser steps (updates) of the whole run; the learning-rate schedule ends here."""
    batch_size: int = 64
    """Transitions per rollout (``envs_parallel`` x rollout length); per rank in a multi-process
    run (global batch = ``batch_size`` x ranks)."""
    envs_parallel: int = 4
    """Environments stepping in parallel (must divide ``batch_size``)."""
    eval_interval: int = 500
    """Evaluate on held-out episodes (and save checkpoints) every this many updates."""
    eval_at_start: bool = True
    """Also evaluate the untrained model at update 0."""
    eval_episodes: int = 300
    """Held-out episodes per evaluation."""
    eval_seed: int = 999_999
    """Seed of generated held-out episodes."""
    eval_batch: int = 16
    """Held-out episodes retrieved together."""
    log_interval: int = 10
    """Updates between metric records."""
    save_interval: int = 500
    """Updates between saves of ``out_dir/last``."""
    checkpoint_metric: str = "fact_em"
    """Eval metric (``fact_em``, ``fact_em_at_facts``, ``fact_f1`` or ``reward``) that selects
    ``out_dir/best``."""
    final_report: bool = True
    """At the end of the run, compare ``out_dir/best`` with its base encoder (multi-step), dense
    top-k and BM25 on the held-out episodes and give a verdict (:mod:`qrag_training.report`):
    ``out_dir/report.md`` / ``report.json`` and a section of ``best``'s model card."""
    report_episodes: int = 100_000
    """Held-out episodes in the end-of-run report, at most (default: every one of a user-sized
    split; evaluations during the run use ``eval_episodes``)."""
    resume: bool = False
    """Continue from ``out_dir/last``."""
    overwrite: bool = False
    """Move an ``out_dir`` that holds something else aside instead of refusing."""
    time_budget_minutes: float | None = None
    """Stop after this much training wall-clock time (evaluating and saving first); the
    learning-rate schedule still follows ``steps``. ``None``: no limit."""
    init_from: str | None = None
    """Start the weights from this checkpoint (a folder or a packaged name such as
    ``packaged:qrag-general-minilm``) instead of the base encoder; its search settings (token
    budgets, question anchoring, BM25 fusion) give way to this run's."""
    keep_init_settings: bool = False
    """With ``init_from``: train and save the checkpoint's own model and search settings
    (positions, question anchoring, token budgets, BM25 fusion, superseding) instead of the run's
    ``model`` / ``env`` fields, which then go unused (:mod:`qrag_training.run_model`)."""
    dist_backend: str | None = None
    """``torch.distributed`` backend of a multi-process run (``WORLD_SIZE > 1``, e.g. under
    ``torchrun``): ``gloo``, ``nccl`` or ``mpi``; ``None``: ``nccl`` on CUDA, ``gloo`` on CPU."""
    dist_timeout_minutes: float = 60.0
    """How long ranks wait in a collective (they wait while rank 0 evaluates and saves)."""
    max_steps: int = 6
    """``env.max_steps``: picks per episode (training and evaluation)."""
    refresh_pool: bool = False
    """``env.refresh_pool``: generate a new training pool (new seed) for every pass."""

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        for name in (
            "batch_size",
            "envs_parallel",
            "eval_interval",
            "eval_batch",
            "log_interval",
            "save_interval",
            "max_steps",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.checkpoint_metric not in CHECKPOINT_METRICS:
            raise ValueError(
                f"checkpoint_metric must be one of {', '.join(CHECKPOINT_METRICS)}, got {self.checkpoint_metric!r}"
            )
        if self.dist_backend not in (None, "gloo", "nccl", "mpi"):
            raise ValueError(
                f"dist_backend must be gloo, nccl, mpi or null, got {self.dist_backend!r}"
            )
        if self.dist_timeout_minutes <= 0:
            raise ValueError(f"dist_timeout_minutes must be > 0, got {self.dist_timeout_minutes}")
        if self.batch_size % self.envs_parallel:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of envs_parallel ({self.envs_parallel})"
            )

    @property
    def rollout_len(self) -> int:
        """Steps of each environment per rollout."""
        return self.batch_size // self.envs_parallel


#: ``RunConfig`` fields that come from the ``env`` group rather than the top level.
ENV_RUN_FIELDS = ("max_steps", "refresh_pool")


def run_config_from(cfg: DictConfig) -> RunConfig:
    """The :class:`RunConfig` of a composed config (interpolations resolved; a value of the wrong
    type, e.g. ``steps=ten``, is an error naming the field)."""
    names = [f.name for f in dataclasses.fields(RunConfig)]
    fields = {k: cfg[k] for k in names if k not in ENV_RUN_FIELDS and k in cfg}
    fields.update({k: cfg.env[k] for k in ENV_RUN_FIELDS if k in cfg.env})
    typed = OmegaConf.merge(OmegaConf.structured(RunConfig), fields)
    return OmegaConf.to_object(typed)  # type: ignore[return-value]


def to_container(node: Any) -> Any:
    """A resolved plain-Python copy of a config node."""
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def model_config_from(cfg: DictConfig) -> QRAGConfig:
    """The :class:`QRAGConfig` described by the ``model`` and ``env`` groups."""
    fields: dict[str, Any] = {k: cfg.model[k] for k in MODEL_FIELDS}
    fields.update({k: cfg.env[k] for k in ENV_MODEL_FIELDS})
    return QRAGConfig(**to_container(OmegaConf.create(fields)))


def algo_kind(cfg: DictConfig) -> str:
    """``algo.kind``: ``pqn`` (the paper's learner, the default) or ``next_hop`` (warm start)."""
    kind = str(cfg.algo.get("kind", "pqn"))
    if kind not in ALGO_KINDS:
        raise ValueError(f"unknown algo.kind {kind!r}; valid: {', '.join(ALGO_KINDS)}")
    return kind


def _algo_fields(cfg: DictConfig, run: RunConfig) -> dict[str, Any]:
    fields = to_container(cfg.algo)
    fields.pop("kind", None)
    fields["total_updates"] = run.steps
    return fields


def pqn_config_from(cfg: DictConfig, run: RunConfig) -> PQNConfig:
    """The PQN config of the ``algo`` group; the schedule length is the run's ``steps``."""
    return PQNConfig(**_algo_fields(cfg, run))


def next_hop_config_from(cfg: DictConfig, run: RunConfig) -> NextHopConfig:
    """The next-hop warm-start config of the ``algo`` group (``algo=next_hop``)."""
    return NextHopConfig(**_algo_fields(cfg, run))


def env_settings_from(run: RunConfig, model_config: QRAGConfig) -> EnvSettings:
    """Episode settings; positions follow the model's config (which a checkpoint may fix)."""
    return EnvSettings.from_model_config(run.max_steps, model_config)


def feedback_from(cfg: DictConfig) -> Feedback:
    """The reward of the ``feedback`` group."""
    fields = to_container(cfg.feedback)
    return build_feedback(fields.pop("kind"), **fields)


def feedback_needs(feedback: Feedback) -> dict[str, bool]:
    """What a feedback needs episodes to carry, as :func:`load_episodes` keyword arguments."""
    return {
        "needs_support": bool(feedback.requires_support),
        "needs_answer": bool(getattr(feedback, "requires_answer", False)),
    }


def _source(cfg: DictConfig, kwargs: dict[str, Any]) -> str:
    """What the episodes come from, for messages: the file, else the data set's name."""
    return str(kwargs["path"]) if kwargs.get("path") else f"env {cfg.env.name!r}"


def _check_labels(
    episodes: list[Episode], source: str, needs_support: bool, needs_answer: bool
) -> None:
    """Errors of the whole data set, before it is split: no line has what the reward needs."""
    if needs_support and not any(e.support for e in episodes):
        raise QRAGError(
            f"none of the {len(episodes)} questions of {source} has supporting facts (support or "
            "support_text); feedback=ground_truth needs them: add them (training/DATA_FORMAT.md), "
            "or train on answers alone with feedback=llm"
        )
    if needs_answer and not any(e.answer is not None for e in episodes):
        raise QRAGError(
            f"none of the {len(episodes)} questions of {source} has an answer; an answer-based "
            "reward or evaluation (feedback=llm, qrag-eval --reader) needs one per line"
        )


def _split_key(episode: Episode) -> str:
    return str(episode.meta.get(SPLIT_KEY, episode.id))


def _uses_val(cfg: DictConfig) -> bool:
    return VAL in {cfg.env.get(f"{w}_hash_split") for w in ("train", "eval", "report")}


def _too_few_groups(source: str, n: int, groups: int, group_by: str) -> str:
    need = f"a train, a validation and a report slice need {MIN_GROUPS}"
    files = (
        "or give separate files (env.train.path=... env.eval.path=... env.train_hash_split=null "
        "env.eval_hash_split=null env.report_hash_split=null)"
    )
    if group_by == GROUP_LINE:
        return f"{source} has {n} question(s); {need}: add questions, {files}"
    if group_by.startswith(GROUP_META_PREFIX):
        return (
            f"the {n} questions of {source} have {groups} value(s) of {group_by}; {need}: "
            f"group by documents with env.group_by=auto, split by line with env.group_by=line, "
            f"{files}"
        )
    return (
        f"the {n} questions of {source} share their documents: {groups} group(s) of lines that "
        f"share a document, and holding questions out by document needs {MIN_GROUPS} (train, "
        "validation, report); split by line with env.group_by=line (held-out questions then "
        f"share documents with training ones), {files}"
    )


def split_plan(cfg: DictConfig, episodes: list[Episode], kwargs: dict[str, Any]) -> SplitPlan:
    """The split of a loaded data set (:func:`~qrag_training.data.splits.plan_splits` of the
    episodes' group keys where the loader set them, custom JSONL; else the stable hash of ids).

    Raises:
        QRAGError: too few groups to hold out by group, naming ``env.group_by=line``.
    """
    if not any(SPLIT_KEY in e.meta for e in episodes):
        return SplitPlan(HASH)
    keys = [_split_key(e) for e in episodes]
    try:
        return plan_splits(keys, with_val=_uses_val(cfg))
    except ValueError as err:
        group_by = str(kwargs.get("group_by", GROUP_AUTO))
        message = _too_few_groups(_source(cfg, kwargs), len(keys), len(set(keys)), group_by)
        raise QRAGError(message) from err


@dataclass(frozen=True)
class CorpusSplit:
    """How a corpus was split: the start summary's numbers (:func:`corpus_split`)."""

    source: str
    """The file (or data set name)."""
    lines: int
    """Questions (lines) in the file."""
    documents: int
    """Distinct documents they give (:func:`~qrag_training.data.groups.count_documents`)."""
    group_by: str
    """``env.group_by``: what keeps lines on one side."""
    plan: SplitPlan
    """The split."""
    questions: dict[str, int]
    """Questions per split (``train``, ``val``, ``eval``)."""
    groups: dict[str, int]
    """Groups per split."""


def corpus_split(cfg: DictConfig) -> CorpusSplit | None:
    """How the training file's lines fall in the train / val / eval splits (one more load of it);
    ``None`` for data sets that are not split by group (generated, or split by their loader)."""
    if not cfg.env.get("train_hash_split"):
        return None
    kwargs = to_container(cfg.env.train)
    episodes = load_dataset(str(cfg.env.name), **kwargs)
    if not any(SPLIT_KEY in e.meta for e in episodes):
        return None
    plan = split_plan(cfg, episodes, kwargs)
    keys = [_split_key(e) for e in episodes]
    return CorpusSplit(
        source=_source(cfg, kwargs),
        lines=len(episodes),
        documents=count_documents(episodes),
        group_by=str(kwargs.get("group_by", GROUP_AUTO)),
        plan=plan,
        questions=dict(Counter(plan.split(key) for key in keys)),
        groups=dict(Counter(plan.split(key) for key in set(keys))),
    )


def _keep(
    episodes: list[Episode], which: str, what: str, has: Callable[[Episode], Any], hint: str
) -> list[Episode]:
    """Episodes that have ``what`` (``has(e)``); none left is an error saying what to do."""
    kept = [e for e in episodes if has(e)]
    if episodes and not kept:
        raise ValueError(f"none of the {len(episodes)} {which} episodes has {what}; {hint}")
    if len(kept) < len(episodes):
        logger.warning("dropped %d %s episodes without %s", len(episodes) - len(kept), which, what)
    return kept


def load_episodes(
    cfg: DictConfig,
    run: RunConfig,
    which: str,
    pool_pass: int = 0,
    needs_support: bool = True,
    needs_answer: bool = False,
    hash_split: str | None = None,
    limit: int | None = None,
) -> list[Episode]:
    """Load the training pool (``which="train"``) or the held-out episodes (``"eval"``).

    Args:
        cfg: composed config (its ``env`` group names the data set and the loader's arguments).
        run: its run settings.
        which: ``train`` or ``eval``.
        pool_pass: for the training pool with ``env.refresh_pool``: the pass number; the seed
            becomes ``seed * 1000 + pool_pass`` so every pass sees new episodes.
        needs_support: drop episodes without supporting-fact labels (with a warning; an error
            when none has them).
        needs_answer: drop episodes without a gold answer (likewise).
        hash_split: this hash split (``train``, ``val``, ``eval``) instead of the env's
            ``<which>_hash_split`` (e.g. the end-of-run report's ``env.report_hash_split``).
        limit: at most this many ``eval`` episodes (default ``run.eval_episodes``).
    """
    if which not in ("train", "eval"):
        raise ValueError(f"which must be train or eval, got {which!r}")
    kwargs = to_container(cfg.env[which])
    if which == "train" and run.refresh_pool and "seed" in kwargs:
        kwargs["seed"] = int(kwargs["seed"]) * 1000 + pool_pass
    split = hash_split or cfg.env.get(f"{which}_hash_split")
    episodes = load_dataset(str(cfg.env.name), **kwargs)
    _check_labels(episodes, _source(cfg, kwargs), needs_support, needs_answer)
    if split is not None and split != ALL:
        plan = split_plan(cfg, episodes, kwargs)
        episodes = [e for e in episodes if plan.split(_split_key(e)) == split]
    if needs_support:
        episodes = _keep(
            episodes,
            which,
            "supporting facts",
            lambda e: e.support,
            "feedback=ground_truth needs them (support / support_text in a custom JSONL); "
            "to train on answers alone use feedback=llm",
        )
    if needs_answer:
        episodes = _keep(
            episodes,
            which,
            "a gold answer",
            lambda e: e.answer is not None,
            "an answer-based reward or evaluation (feedback=llm, qrag-eval --reader) needs one",
        )
    if which == "eval":
        episodes = episodes[: run.eval_episodes if limit is None else limit]
    if not episodes:
        where = f" (hash split {split!r})" if split else ""
        raise ValueError(f"no {which} episodes for env {cfg.env.name!r}{where} with {kwargs}")
    return episodes
