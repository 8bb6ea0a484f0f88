"""What a training run tells its user on the console: the start summary (the data and how it
was split, the budget, the machine) and the progress bar's length under a time budget."""

from __future__ import annotations

import math
from dataclasses import dataclass

from qrag_training.data.groups import GROUP_AUTO, GROUP_LINE
from qrag_training.data.splits import EVAL, FITTED, MIN_SLICE, TRAIN, VAL
from qrag_training.settings import CorpusSplit, RunConfig

#: How the summary names the hash splits.
SPLIT_NAMES = {TRAIN: "train", VAL: "validation", EVAL: "report"}


@dataclass(frozen=True)
class RunPlan:
    """What a run is about to do, as the start summary tells it."""

    run: RunConfig
    """The run settings (steps, budget, intervals, ``out_dir``)."""
    learner: str
    """``algo.kind``."""
    device: str
    """The torch device."""
    threads: int
    """Torch's CPU threads."""
    data: str
    """The data set's name (``env.name``)."""
    train_questions: int | None
    """Training episodes, ``None`` when every pass generates a new pool."""
    eval_questions: int
    """Episodes of each evaluation (they choose ``best/``)."""
    eval_split: str | None
    """The hash split they come from (``env.eval_hash_split``)."""
    report_split: str | None
    """The hash split of the end-of-run report (``env.report_hash_split``)."""
    split: CorpusSplit | None
    """How a corpus's lines were split (``None``: not split by group)."""
    resumed_at: int | None = None
    """The update a resumed run continues from."""


def _grouping(group_by: str) -> str:
    if group_by == GROUP_AUTO:
        return "lines that share a document are one group: env.group_by=auto"
    if group_by == GROUP_LINE:
        return "every line its own group: env.group_by=line"
    return f"lines with the same {group_by} are one group: env.group_by={group_by}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _sizes(split: CorpusSplit) -> str:
    return ", ".join(
        f"{SPLIT_NAMES[name]} {_count(split.questions[name], 'question')} "
        f"({_count(split.groups[name], 'group')})"
        for name in (TRAIN, VAL, EVAL)
        if split.questions.get(name)
    )


def start_summary(plan: RunPlan) -> list[str]:
    """The lines a run prints before its first update."""
    run, split, lines = plan.run, plan.split, []
    if split is not None:
        lines.append(
            f"{split.source}: {_count(split.lines, 'question')}, "
            f"{_count(split.documents, 'document')}, "
            f"{_count(sum(split.groups.values()), 'group')} ({_grouping(split.group_by)})"
        )
        if split.plan.method == FITTED:
            hashed = split.plan.hash_sizes
            how = (
                f"split fitted to this corpus (the stable hash split would hold "
                f"{hashed.get(VAL, 0)} validation and {hashed.get(EVAL, 0)} report questions; "
                f"each needs {MIN_SLICE})"
            )
        else:
            how = "split by the stable hash of each group"
        lines.append(f"{how}: {_sizes(split)}")
    pool = (
        "a new pool of episodes every pass"
        if plan.train_questions is None
        else f"{plan.train_questions} questions"
    )
    side = (
        f" of the {SPLIT_NAMES.get(plan.eval_split, plan.eval_split)} split"
        if plan.eval_split
        else ""
    )
    chosen = (
        f"checkpoints chosen on {plan.eval_questions} questions{side} every "
        f"{run.eval_interval} updates"
    )
    report = ""
    if run.final_report:
        where = plan.report_split or plan.eval_split
        report = "; then the report against the baselines" + (
            f" on the {SPLIT_NAMES.get(where, where)} split" if where else ""
        )
    lines.append(f"{plan.data}: training on {pool}; {chosen}{report}")
    budget = (
        f" or {run.time_budget_minutes:g} minutes of training, whichever ends first"
        if run.time_budget_minutes
        else ""
    )
    resumed = f", resuming at update {plan.resumed_at}" if plan.resumed_at is not None else ""
    lines.append(
        f"{plan.learner}: {run.steps} updates{budget}{resumed}; device {plan.device}, "
        f"{_count(plan.threads, 'torch thread')}; out_dir {run.out_dir}"
    )
    return lines


def expected_updates(
    updates: int, start: int, total: int, seconds: float, start_seconds: float, budget_s: float
) -> int:
    """The update a run will end at: ``total``, or sooner where the time budget ends it first at
    the pace of this process's updates so far (``start`` .. ``updates`` in ``start_seconds`` ..
    ``seconds`` of training). The progress bar's length, so its ETA follows the budget."""
    done = updates - start
    if not math.isfinite(budget_s) or done <= 0 or seconds <= start_seconds:
        return total
    pace = (seconds - start_seconds) / done
    left = max(0.0, budget_s - seconds)
    return max(updates, min(total, updates + math.ceil(left / pace)))
