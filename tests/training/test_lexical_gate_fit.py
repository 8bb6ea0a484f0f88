"""qrag-fit-gate: next-hop labels, the logistic fit and the checkpoint it writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from qrag_training import lexical_gate
from qrag_training.data.episode import Episode
from qrag_training.lexical_gate import GateRecord, fit, label, net_gain

from qrag_integrations.core.gate import GATE_FEATURES
from qrag_integrations.core.lexical import GateStep
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.policy import SearchPolicy

SPREAD = GATE_FEATURES.index("q_spread")


@dataclass
class _Chunk:
    id: str


class _Candidates:
    """The one thing :func:`label` reads of a candidate set: each rank's chunk id."""

    def chunk(self, rank: int) -> _Chunk:
        return _Chunk(str(rank))


def _step(picked: tuple[int, ...], opened: int, closed: int) -> GateStep:
    return GateStep(picked, np.zeros(len(GATE_FEATURES)), (opened, 0.5, 0), (closed, 0.4, 0))


def test_a_step_is_labelled_by_the_next_hop() -> None:
    episode = Episode(id="e", question="q", chunks=["a", "b", "c", "d"], support=[1, 3])
    cands = _Candidates()
    assert label(episode, cands, _step((1,), opened=3, closed=2)) == 1  # fusing finds the hop
    assert label(episode, cands, _step((1,), opened=2, closed=3)) == -1  # the rules find it
    assert label(episode, cands, _step((1,), opened=3, closed=3)) == 0  # both do
    assert label(episode, cands, _step((3,), opened=3, closed=0)) == 0  # found already


def _records(n: int, seed: int) -> list[GateRecord]:
    """Fusing helps where Q's best five lie within 0.05 and hurts elsewhere (plus ties)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        evidence = rng.random(len(GATE_FEATURES))
        evidence[SPREAD] = rng.random() * 0.2
        gain = 1 if evidence[SPREAD] < 0.05 else -1
        out.append(GateRecord(["squad", "hotpotqa"][i % 2], evidence, gain if i % 3 else 0))
    return out


def test_the_fit_learns_where_fusing_helps() -> None:
    gate = fit(_records(600, 0), c=100.0)
    held = _records(300, 1)
    right = [gate.opens(r.evidence) == (r.evidence[SPREAD] < 0.05) for r in held]
    assert np.mean(right) > 0.95
    gained = net_gain(held, gate)
    assert gained["squad"] > 0 and gained["hotpotqa"] > 0
    always = net_gain(held, None)
    assert sum(gained.values()) > sum(always.values())


def test_records_of_one_kind_only_are_a_clear_error() -> None:
    records = [GateRecord("squad", np.zeros(len(GATE_FEATURES)), 1)] * 4
    with pytest.raises(ValueError, match="record more questions"):
        fit(records)


@pytest.mark.slow
def test_the_command_writes_a_checkpoint_whose_search_reads_its_gate(tmp_path: Path) -> None:
    out = tmp_path / "gated"
    argv = ["--out", str(out), "--hotpotqa-n", "48", "--babi-n", "30", "--squad-n", "48"]
    report = lexical_gate.main([*argv, "--rounds", "1", "--threads", "1"])
    assert report["trained"] == "next_hop" and sum(report["deciding"].values()) > 0
    model = load_model(str(out))
    assert model.config.extra["lexical_gate"]["records"] == report["records"]
    policy = SearchPolicy.of(model.config)
    assert policy.lexical_gate is not None
    assert policy.lexical_gate.to_dict() == model.config.lexical_gate
