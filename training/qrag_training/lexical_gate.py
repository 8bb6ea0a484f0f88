"""``qrag-fit-gate``: learn a checkpoint's lexical gate from its own searches (next-hop labels).

A :class:`~qrag_integrations.core.gate.LexicalGate` decides, at each step after the first, whether
the search fuses BM25 of the whole question. This command runs the checkpoint's search, with its
own policy, over training questions of three kinds: HotpotQA (multi-hop, the training buckets),
bAbI stories in the training noise (multi-hop, a training seed) and SQuAD v2 dev articles 9-17
(single-hop; articles 0-8 stay for validation, 18-34 are never read). At every later step it
records the gate's evidence and the pick either way (``MultiStepSearcher.trace``), and labels the
step by the next hop: +1 where fusing picks a supporting chunk not yet found and the rules do not,
-1 the reverse; the rest decide nothing. A logistic regression (scikit-learn) over the deciding
steps is the gate. A second round searches again with that gate, so that the steps a gated search
reaches are recorded too, and fits over both rounds' records. The new checkpoint is the old one
with the gate in its config.

    qrag-fit-gate --checkpoint packaged:qrag-general-minilm --out runs/gated

The gate only re-orders what the search already scores (Q's best ``lexical_depth`` and BM25), so
the encoders are not touched and the fit takes minutes on a CPU (most of it the searches).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qrag_integrations.cli_backend import add_threads_argument, apply_threads
from qrag_integrations.core.candidates import CandidateSet
from qrag_integrations.core.gate import GATE_FEATURES, LexicalGate
from qrag_integrations.core.lexical import GateStep
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_training.baselines import distinct_text_embedder, greedy_retrieve
from qrag_training.data.babilong import babilong_dataset
from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.data.squad import load_squad_ood

#: The seed of the bAbI stories and the SQuAD sample: a training seed, which no validation
#: (555555 on) or held-out (20261100 on) run uses.
TRAIN_SEED = 4242
#: SQuAD v2 dev articles the gate learns from (half-open); 0-8 validate it.
SQUAD_ARTICLES = (9, 18)
#: Picks per question of each kind (as the benchmarks read them).
PICKS = {"hotpotqa": 4, "babilong": 6, "squad": 3}


@dataclass(frozen=True)
class GateRecord:
    """One question at one later step."""

    kind: str
    """Which training set it came from (``hotpotqa``, ``babilong``, ``squad``)."""
    evidence: np.ndarray
    """The gate's features there."""
    gain: int
    """+1: fusing picks a missing supporting chunk and the rules do not; -1: the reverse; 0."""


def training_sets(
    hotpotqa_n: int, babi_n: int, squad_n: int, seed: int = TRAIN_SEED
) -> dict[str, list[Episode]]:
    """The training questions of each kind (``babi_n`` stories over qa1-qa5 at 4K tokens)."""
    return {
        "hotpotqa": load_hotpotqa(split="train", limit=hotpotqa_n),
        "babilong": babilong_dataset(
            ["qa1", "qa2", "qa3", "qa4", "qa5"], n=babi_n, target_tokens=4000, seed=seed
        ),
        "squad": load_squad_ood(
            articles=SQUAD_ARTICLES,
            group_size=SQUAD_ARTICLES[1] - SQUAD_ARTICLES[0],
            n=squad_n,
            seed=seed,
        ),
    }


def label(episode: Episode, candidates: CandidateSet, step: GateStep) -> int:
    """The next-hop label of ``step`` (:attr:`GateRecord.gain`)."""
    found = {int(candidates.chunk(r).id) for r in step.picked}
    missing = set(episode.support) - found

    def hits(pick: Any) -> int:
        return int(pick is not None and int(candidates.chunk(pick[0]).id) in missing)

    return hits(step.opened) - hits(step.closed)


def record(
    model: QRAGModel, policy: SearchPolicy, sets: dict[str, list[Episode]], threads: int | None
) -> list[GateRecord]:
    """Search every question of ``sets`` with ``model`` by ``policy`` (which must hold a gate:
    its evidence is read only where one is) and record each later step."""
    if policy.lexical_gate is None:
        raise ValueError("recording needs a policy with a lexical gate (any: it is only read)")
    records: list[GateRecord] = []
    for kind, episodes in sets.items():

        def trace(episode: Episode, candidates: CandidateSet, step: GateStep, kind=kind) -> None:
            records.append(GateRecord(kind, step.evidence, label(episode, candidates, step)))

        embed = distinct_text_embedder(model, batch_size=64)
        greedy_retrieve(
            model, episodes, PICKS[kind], embed=embed, policy=policy, threads=threads, trace=trace
        )
    return records


#: A gate that never opens: the search it records is the checkpoint's rules exactly.
SHUT = LexicalGate((0.0,) * len(GATE_FEATURES), -1.0)


def fit(records: Sequence[GateRecord], c: float = 1.0) -> LexicalGate:
    """The logistic gate over the deciding records (``gain != 0``): standardised features, L2
    strength ``1 / c`` (scikit-learn's ``LogisticRegression``), the scaling folded into the
    weights so the gate reads raw evidence."""
    from sklearn.linear_model import LogisticRegression

    deciding = [r for r in records if r.gain]
    if len({r.gain for r in deciding}) < 2:
        raise ValueError(
            "the gate needs steps where fusing helps and steps where it hurts, and the records "
            "lack one kind: record more questions (--hotpotqa-n, --babi-n, --squad-n)"
        )
    x = np.stack([r.evidence for r in deciding])
    y = np.array([r.gain > 0 for r in deciding], dtype=int)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c).fit((x - mean) / scale, y)
    weights = model.coef_[0] / scale
    bias = float(model.intercept_[0] - np.dot(weights, mean))
    return LexicalGate(tuple(float(w) for w in weights), bias)


def net_gain(records: Sequence[GateRecord], gate: LexicalGate | None) -> dict[str, int]:
    """Per kind: supporting chunks gained minus lost against the rules where ``gate`` opens
    (``None``: fusing at every later step)."""
    out: dict[str, int] = {}
    for r in records:
        if gate is None or gate.opens(r.evidence):
            out[r.kind] = out.get(r.kind, 0) + r.gain
        else:
            out.setdefault(r.kind, 0)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qrag-fit-gate", description=__doc__.split("\n")[0].split(": ", 1)[1]
    )
    p.add_argument("--checkpoint", default="packaged:qrag-general-minilm")
    p.add_argument("--out", type=Path, required=True, help="the new checkpoint's folder")
    p.add_argument("--hotpotqa-n", type=int, default=800, help="HotpotQA training questions")
    p.add_argument("--babi-n", type=int, default=500, help="bAbI stories (qa1-qa5, 4K tokens)")
    p.add_argument("--squad-n", type=int, default=800, help="SQuAD questions of articles 9-17")
    p.add_argument("--seed", type=int, default=TRAIN_SEED, help="seed of the bAbI and SQuAD draws")
    p.add_argument("--c", type=float, default=1.0, help="inverse L2 strength of the regression")
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="searches recorded: the first by the checkpoint's rules, each later one by the gate "
        "fitted so far (the steps a gated search reaches), every fit over all records",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace an earlier checkpoint at --out"
    )
    add_threads_argument(p)
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    threads = apply_threads(args)
    started = time.perf_counter()
    model = load_model(args.checkpoint)
    policy = SearchPolicy.of(model.config, lexical_gate=False).replace(lexical_gate=SHUT)
    if policy.lexical_depth == 0 or policy.lexical_steps is None:
        raise SystemExit(
            "qrag-fit-gate: the checkpoint fuses BM25 at no step or at every step "
            "(lexical_depth / lexical_steps), so a gate of later steps has nothing to decide"
        )
    sets = training_sets(args.hotpotqa_n, args.babi_n, args.squad_n, args.seed)
    records: list[GateRecord] = []
    gate = SHUT
    for round_ in range(1, args.rounds + 1):
        records += record(model, policy.replace(lexical_gate=gate), sets, threads)
        gate = fit(records, args.c)
        print(f"round {round_}: {len(records)} steps, gate {gate.to_dict()}", flush=True)
    counts = {k: sum(r.kind == k for r in records) for k in PICKS}
    report = {
        "trained": "next_hop",
        "checkpoint": args.checkpoint,
        "records": counts,
        "deciding": {k: sum(r.kind == k and r.gain != 0 for r in records) for k in PICKS},
        "net_gain_gated": net_gain(records, gate),
        "net_gain_always": net_gain(records, None),
        "rounds": args.rounds,
        "seed": args.seed,
        "squad_articles": list(SQUAD_ARTICLES),
        "minutes": round((time.perf_counter() - started) / 60, 1),
    }
    model.config.lexical_gate = gate.to_dict()
    model.config.extra["lexical_gate"] = report
    model.save_pretrained(str(args.out), overwrite=args.overwrite)
    print(json.dumps({"gate": gate.to_dict(), **report}, indent=1))
    return report


if __name__ == "__main__":
    main()
