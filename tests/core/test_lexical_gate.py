"""The learned lexical gate: its evidence, its validation and what a search does with it."""

from __future__ import annotations

import numpy as np
import pytest
from search_reference import as_tuples, assert_same, rules
from test_lexical_fusion import QUERIES, TEXTS, reference, word_index

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.gate import GATE_FEATURES, LexicalGate, gate_evidence
from qrag_integrations.core.lexical import GateStep
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import MultiStepSearcher

N = len(GATE_FEATURES)
OPEN = LexicalGate((0.0,) * N, 1.0)
SHUT = LexicalGate((0.0,) * N, -1.0)
#: Opens from the third step on (the first feature is the step).
THIRD_ON = LexicalGate((1.0,) + (0.0,) * (N - 1), -2.5)


def test_the_evidence_is_what_the_features_name() -> None:
    q = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    novel = np.array([False, True, False, True, False, False])
    got = gate_evidence(3, q, novel, fused=1)
    assert got == pytest.approx([3, 0.1, 0.9, 0.4, 2 / 6, 2, 1])
    # fewer than five: the spread runs to the last
    assert gate_evidence(2, [0.5, 0.2], np.array([True, False]), 1)[3] == pytest.approx(0.3)


def test_a_gate_round_trips_and_bad_ones_name_the_problem() -> None:
    gate = LexicalGate(tuple(float(i) for i in range(N)), -0.5)
    assert LexicalGate.from_dict(gate.to_dict()) == gate
    assert gate.opens(np.ones(N)) and not gate.opens(np.zeros(N))
    with pytest.raises(ValueError, match="weights"):
        LexicalGate((1.0,), 0.0)
    with pytest.raises(ValueError, match="finite"):
        LexicalGate((float("nan"),) * N, 0.0)
    other = {**gate.to_dict(), "features": ["step"]}
    with pytest.raises(ValueError, match="qrag-fit-gate"):
        LexicalGate.from_dict(other)
    with pytest.raises(ValueError, match="numeric"):
        LexicalGate.from_dict({**gate.to_dict(), "bias": "high"})
    with pytest.raises(ValueError, match="mapping"):
        LexicalGate.from_dict([1, 2])  # type: ignore[arg-type]
    # a config refuses a bad gate when it is made, not at the first search
    with pytest.raises(ValueError, match="qrag-fit-gate"):
        QRAGConfig(lexical_gate=other)


def test_the_policy_takes_the_checkpoints_gate_unless_told_otherwise() -> None:
    config = QRAGConfig(lexical_depth=4, lexical_steps=1, lexical_gate=OPEN.to_dict())
    assert SearchPolicy.of(config).lexical_gate == OPEN
    assert SearchPolicy.of(config, lexical_gate=True).lexical_gate == OPEN
    assert SearchPolicy.of(config, lexical_gate=False).lexical_gate is None
    assert "learned gate" in SearchPolicy.of(config).describe()
    with pytest.raises(QRAGError, match="no learned gate"):
        SearchPolicy.of(QRAGConfig(), lexical_gate=True)
    with pytest.raises(QRAGError, match="lexical_gate"):
        SearchPolicy.of(config, lexical_gate="yes")  # type: ignore[arg-type]
    with pytest.raises(QRAGError, match="lexical_gate"):
        SearchPolicy(lexical_gate={"bias": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["none-anchored", "relative"])
@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_an_open_gate_fuses_every_step_and_a_shut_one_leaves_the_rules(
    make_model, mode: str, weight: float
) -> None:
    """Against the brute-force loop: a gate that always opens is fusion at every step; one that
    never opens is the first step's fusion and the gap rule after it; filtered and not."""
    model = make_model(mode)
    index = word_index()
    gap = 0.05
    base = rules(model, lexical_depth=4, lexical_steps=1, lexical_gap=gap, lexical_weight=weight)
    rows = [i for i in range(len(TEXTS)) if i % 3]
    for gate, steps, want_gap in [(OPEN, None, None), (SHUT, 1, gap)]:
        searcher = MultiStepSearcher(model, index, policy=base.replace(lexical_gate=gate))
        for query, hits in zip(QUERIES, searcher.search(QUERIES, k=5)):
            want = reference(model, index, query, 5, 4, steps=steps, gap=want_gap, weight=weight)
            assert_same(as_tuples(hits), want)
        filtered = searcher.search(QUERIES, k=5, filter={"doc": "A"})
        for query, hits in zip(QUERIES, filtered):
            want = reference(model, index, query, 5, 4, rows, steps, want_gap, weight=weight)
            assert_same(as_tuples(hits), want)


def test_a_trace_sees_each_gated_step_and_the_pick_follows_the_gate(make_model) -> None:
    model = make_model("none-anchored")
    index = word_index()
    policy = rules(model, lexical_depth=4, lexical_steps=1, lexical_gap=0.05, lexical_weight=0.5)
    searcher = MultiStepSearcher(model, index, policy=policy.replace(lexical_gate=THIRD_ON))
    seen: list[tuple[int, GateStep]] = []
    searcher.trace = lambda b, cands, step: seen.append((b, step))
    hits = searcher.search(QUERIES, k=4)
    # steps 2-4 of every question are read, none of step 1
    assert sorted(int(s.evidence[0]) for _, s in seen) == sorted([2, 3, 4] * len(QUERIES))
    snap = index.snapshot()
    for b, step in seen:
        number = int(step.evidence[0])
        assert len(step.picked) == number - 1
        pick = step.opened if THIRD_ON.opens(step.evidence) else step.closed
        assert pick is not None
        assert hits[b][number - 1].chunk.id == snap.chunks[pick[0]].id
    # opening from the third step changes picks against the rules alone (else the test is empty)
    plain = MultiStepSearcher(model, index, policy=policy).search(QUERIES, k=4)
    assert [as_tuples(h) for h in hits] != [as_tuples(h) for h in plain]
