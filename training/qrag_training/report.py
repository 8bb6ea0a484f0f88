"""Should this checkpoint ship? A trained model against the baselines on the same held-out questions.

The retrievers answer every question with ``k`` picks: the trained model (multi-step), the
checkpoint its run started from (``init_from``, searched with its own settings) when there is
one, its base encoder used multi-step (untrained), and what users already run: single-step dense
top-k with the base encoder, BM25, and dense+BM25 fused by reciprocal rank (LangChain's
``EnsembleRetriever``; :mod:`qrag_training.baselines`). Per question: ``hit@1`` (the first pick
is a supporting chunk), ``hit@k`` (one of the ``k`` picks is) and ``fact_em`` (all supporting
chunks are among the ``k`` picks). The trained model is compared with each of them paired on the
same questions (:func:`qrag_training.paired.paired_bootstrap`, 95% interval).

The verdict: **better** when the trained model beats the best baseline (the one with the highest
mean on that metric) beyond the interval on ``hit@1`` or ``hit@k``, beats its starting model (if
any) beyond the interval on some metric, and is worse than no baseline on any metric beyond the
interval; otherwise **not better: do not ship this checkpoint**. Either way the reason names the
best baseline of each metric with the paired difference and its interval. A fine-tune that is no
better than the model it started from, or than what a user already runs, is not worth shipping.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrag_integrations.core.atomic import write_json_atomic, write_text_atomic
from qrag_integrations.core.checkpoint import CARD_FILE
from qrag_integrations.core.model import QRAGModel
from qrag_training.baselines import (
    bm25_retrieve,
    dense_retrieve,
    distinct_text_embedder,
    greedy_retrieve,
    hybrid_retrieve,
)
from qrag_training.data.episode import Episode
from qrag_training.metrics import Retrieval, fact_metrics
from qrag_training.paired import PairedDifference, paired_bootstrap
from qrag_training.run_folder import BEST_DIR, REPORT_JSON, REPORT_MD

logger = logging.getLogger(__name__)

TRAINED, START, BASE, DENSE, BM25, HYBRID = (
    "trained",
    "starting model",
    "base multi-step",
    "dense top-k",
    "bm25",
    "dense+bm25",
)
METHODS = (TRAINED, START, BASE, DENSE, BM25, HYBRID)
SHIP, DO_NOT_SHIP = "better", "not better: do not ship this checkpoint"
#: ``checkpoint_report(start=...)``: the start the checkpoint's own record names (``init_from``).
RECORDED = "recorded"


def per_question(episodes: Sequence[Episode], found: Sequence[Retrieval], k: int) -> dict:
    """``hit@1``, ``hit@k`` and ``fact_em`` of each question (first ``k`` picks)."""
    hit1, hitk, em = [], [], []
    for e, r in zip(episodes, found):
        gold, picks = set(e.support), r.picked[:k]
        hit1.append(float(bool(picks) and picks[0] in gold))
        hitk.append(float(bool(gold & set(picks))))
        em.append(fact_metrics(picks, e.support)[0])
    return {"hit@1": hit1, f"hit@{k}": hitk, "fact_em": em}


@dataclass
class BaselineReport:
    """Means per method and the trained model's paired differences to each baseline."""

    n: int
    """Questions compared (those with supporting chunks)."""
    k: int
    """Picks per question."""
    means: dict[str, dict[str, float]]
    """Method -> metric -> mean."""
    versus: dict[str, dict[str, PairedDifference]]
    """Baseline -> metric -> trained minus baseline."""
    verdict: str
    """``better`` or ``not better: do not ship this checkpoint``."""
    reason: str
    """The verdict in a sentence, with the numbers."""
    notes: list[str] = field(default_factory=list)
    """Where the questions come from and what else a reader should know."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "n": self.n,
            "k": self.k,
            "means": self.means,
            "versus": {b: {m: d.to_dict() for m, d in ms.items()} for b, ms in self.versus.items()},
            "verdict": self.verdict,
            "reason": self.reason,
            "notes": self.notes,
        }

    def markdown(self) -> str:
        """The table and the verdict line, for a terminal or a model card."""
        metrics = list(next(iter(self.means.values())))
        lines = [
            (
                f"{self.n} held-out questions, {self.k} picks each; difference = trained minus "
                "the method, paired, with its bootstrap 95% interval."
            ),
            "",
            "| method | " + " | ".join(metrics) + " |",
            "|---|" + "---:|" * len(metrics),
        ]
        for method, row in self.means.items():
            cells = []
            for m in metrics:
                cell = f"{row[m]:.3f}"
                if method in self.versus:
                    d = self.versus[method][m]
                    cell += f" ({d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}])"
                cells.append(cell)
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines += ["", f"**Verdict: {self.verdict}.** {self.reason}"]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def decide(
    scores: dict[str, dict[str, list[float]]], k: int, notes: Sequence[str] = ()
) -> BaselineReport:
    """The report of per-question ``scores`` (method -> metric -> list; :data:`TRAINED` and the
    baselines), with the verdict of the module docstring."""
    trained = scores[TRAINED]
    n = len(next(iter(trained.values())))
    means = {m: {name: sum(v) / len(v) for name, v in s.items()} for m, s in scores.items()}
    versus = {
        b: {name: paired_bootstrap(trained[name], scores[b][name]) for name in trained}
        for b in scores
        if b != TRAINED
    }
    losses = [
        f"{name} vs {b} {_interval(d)}"
        for b, ds in versus.items()
        for name, d in ds.items()
        if d.verdict == "worse"
    ]
    ranked = [name for name in trained if name != "fact_em"]  # hit@1, hit@k
    best = {name: max(versus, key=lambda b: means[b][name]) for name in ranked}
    wins = [name for name in ranked if versus[best[name]][name].verdict == "better"]
    against_best = "; ".join(
        f"{name} {_interval(versus[b][name])} vs {b} ({means[b][name]:.3f})"
        for name, b in best.items()
    )
    start_wins = [(name, d) for name, d in versus.get(START, {}).items() if d.verdict == "better"]
    if losses:
        verdict, reason = DO_NOT_SHIP, "It is worse beyond the interval: " + "; ".join(losses) + "."
    elif not wins:
        verdict = DO_NOT_SHIP
        reason = (
            f"It does not beat the best baseline beyond the interval on {n} held-out questions: "
            f"{against_best}."
        )
    elif START in versus and not start_wins:
        verdict = DO_NOT_SHIP
        reason = (
            f"It does not beat its starting model beyond the interval on any metric on {n} "
            f"held-out questions (best baseline: {against_best})."
        )
    else:
        verdict = SHIP
        reason = (
            f"Better than the best baseline beyond the interval on {' and '.join(wins)}, and "
            f"worse than none of {len(versus)} baselines on any metric, on {n} held-out "
            f"questions: {against_best}."
        )
    return BaselineReport(n, k, means, versus, verdict, reason, list(notes))


def _interval(d: PairedDifference) -> str:
    """``+0.030 [+0.010, +0.050]``: a difference with its interval."""
    return f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


def compare_with_baselines(
    trained: QRAGModel,
    base: QRAGModel,
    episodes: Sequence[Episode],
    k: int,
    batch_size: int = 16,
    notes: Sequence[str] = (),
    start: QRAGModel | None = None,
) -> BaselineReport:
    """Run the retrievers on ``episodes`` (those with supporting chunks) and decide.

    Args:
        trained: the checkpoint to judge.
        base: the untrained model of its base encoder (``QRAGModel.from_base``).
        episodes: held-out questions; episodes without supporting chunks are skipped.
        k: picks per question.
        batch_size: episodes retrieved together by the multi-step methods.
        notes: lines added under the verdict (e.g. which split the questions come from).
        start: the checkpoint the trained model's run started from, which it must beat.

    Raises:
        ValueError: no episode has supporting chunks.
    """
    labeled = [e for e in episodes if e.support]
    if not labeled:
        raise ValueError("a comparison with the baselines needs episodes with supporting chunks")
    trained_chunks = distinct_text_embedder(trained)
    base_chunks = distinct_text_embedder(base)  # shared by the base multi-step, dense and hybrid
    found = {TRAINED: greedy_retrieve(trained, labeled, k, batch_size, embed=trained_chunks)}
    if start is not None:
        embed = distinct_text_embedder(start)
        found[START] = greedy_retrieve(start, labeled, k, batch_size, embed=embed)
    found.update(
        {
            BASE: greedy_retrieve(base, labeled, k, batch_size, embed=base_chunks),
            DENSE: dense_retrieve(base, labeled, k, embed=base_chunks),
            BM25: bm25_retrieve(labeled, k),
            HYBRID: hybrid_retrieve(base, labeled, k, embed=base_chunks),
        }
    )
    scores = {m: per_question(labeled, r, k) for m, r in found.items()}
    return decide(scores, k, notes)


def recorded_start(model: QRAGModel) -> str | None:
    """The checkpoint ``model``'s training run started from (``init_from`` in the run's record in
    its config), if the record names one."""
    train_config = model.config.extra.get("train_config")
    start = train_config.get("init_from") if isinstance(train_config, dict) else None
    return str(start) if start else None


def checkpoint_report(
    checkpoint: str,
    cfg: Any,
    episodes: Sequence[Episode],
    k: int,
    batch_size: int = 16,
    device: str = "cpu",
    start: str | None = RECORDED,
) -> BaselineReport:
    """:func:`compare_with_baselines` for a checkpoint folder (its base encoder with the same
    settings is the untrained model), noting where the questions of the composed ``cfg`` come
    from (``qrag-eval --compare-baselines``, the end of a training run).

    Args:
        start: the starting model to beat: a checkpoint (folder or packaged name), ``None`` for
            none, or :data:`RECORDED`, the one the checkpoint's own record names (a recorded start
            that no longer loads is noted and left out; a named one that fails is an error).
    """
    from qrag_integrations.core.errors import QRAGError
    from qrag_integrations.core.loading import load_model

    model = load_model(checkpoint, device=device).eval()
    base = QRAGModel.from_base(model.config, device=device).eval()
    split = cfg.env.get("report_hash_split") or cfg.env.get("eval_hash_split")
    where = f"{cfg.env.name}, held-out side" + (f" (hash split {split!r})" if split else "")
    if str(cfg.env.name) == "custom":
        where += f", lines grouped by {cfg.env.get('group_by', 'line')!r}"
    notes = [f"questions: {where}"]
    name = recorded_start(model) if start == RECORDED else start
    start_model = None
    if name:
        try:
            start_model = load_model(name, device=device).eval()
        except (QRAGError, OSError, ValueError) as err:
            if start != RECORDED:
                raise
            notes.append(f"its starting model {name} did not load ({err}): not compared")
    if start_model is not None:
        notes.append(f"starting model: {name}, searched with its own settings")
        if model.config.extra.get("step") == 0:
            notes.append(
                "the checkpoint is the starting model itself (update 0): no later evaluation "
                "during the run beat it on the questions that choose checkpoints"
            )
    return compare_with_baselines(
        model, base, episodes, k, batch_size, notes=notes, start=start_model
    )


def write_run_report(
    out_dir: Path,
    cfg: Any,
    episodes: Sequence[Episode],
    k: int,
    batch_size: int,
    device: str,
    chosen_by: str | None = None,
) -> BaselineReport | None:
    """The end of a training run (``final_report``): ``out_dir/best`` against the baselines on the
    held-out ``episodes``, written to ``out_dir/report.md`` / ``report.json`` and as a section of
    the checkpoint's model card. ``None`` (with a warning) when there is no ``best`` or no
    episode has supporting chunks."""
    best = out_dir / BEST_DIR
    if not (best / CARD_FILE).is_file():
        logger.warning("no %s checkpoint: no comparison with the baselines", best)
        return None
    try:
        report = checkpoint_report(str(best), cfg, episodes, k, batch_size, device)
    except ValueError as err:
        logger.warning("no comparison with the baselines: %s", err)
        return None
    if chosen_by:
        report.notes.append(
            f"these questions also chose the checkpoint ({chosen_by}), so its numbers lean "
            "optimistic"
        )
    text = report.markdown()
    write_json_atomic(out_dir / REPORT_JSON, report.to_dict())
    write_text_atomic(out_dir / REPORT_MD, text + "\n")
    card = best / CARD_FILE
    section = "\n## Against the baselines (end of the run)\n\n" + text + "\n"
    write_text_atomic(card, card.read_text(encoding="utf-8").rstrip("\n") + "\n" + section)
    logger.info("final report: %s. %s", report.verdict, report.reason)
    return report
