"""SearchPolicy: a checkpoint's recommended rules, changed by name, checked once, shown in words."""

from __future__ import annotations

import pytest

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.policy import DEFAULT_MARGIN, SearchPolicy

DEFAULTISH = QRAGConfig(lexical_depth=10, lexical_steps=1, lexical_gap=0.03, supersede_margin=0.05)


def test_a_checkpoints_policy_is_its_configs_rules() -> None:
    assert SearchPolicy.of(DEFAULTISH) == SearchPolicy(10, 1, 0.03, 0.05, 0.8)
    assert SearchPolicy.of(QRAGConfig()) == SearchPolicy()  # no rules: Q's arg-max alone


def test_changes_by_name_keep_the_rest() -> None:
    assert SearchPolicy.of(DEFAULTISH, lexical_depth=0) == SearchPolicy(0, 1, 0.03, 0.05, 0.8)
    assert SearchPolicy.of(DEFAULTISH, supersede=False).supersede_margin is None
    assert SearchPolicy.of(DEFAULTISH, supersede=True).supersede_margin == 0.05
    assert SearchPolicy.of(QRAGConfig(), supersede=True).supersede_margin == DEFAULT_MARGIN
    assert SearchPolicy.of(DEFAULTISH, lexical_steps=3, lexical_gap=0).lexical_gap == 0
    assert SearchPolicy().replace(lexical_depth=4).lexical_depth == 4


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"lexical_depth": -1}, "lexical_depth"),
        ({"lexical_depth": 2.5}, "lexical_depth"),
        ({"lexical_steps": 0}, "lexical_steps"),
        ({"lexical_gap": -0.1}, "lexical_gap"),
        ({"lexical_gap": float("nan")}, "lexical_gap"),
        ({"supersede": "yes"}, "supersede"),
    ],
)
def test_bad_changes_name_the_field(changes: dict, name: str) -> None:
    with pytest.raises(QRAGError, match=name):
        SearchPolicy.of(DEFAULTISH, **changes)


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"supersede_margin": -1.0}, "supersede_margin"),
        ({"supersede_similarity": 1.5}, "supersede_similarity"),
        ({"lexical_depth": None}, "lexical_depth"),
        ({"lexical_gap": True}, "lexical_gap"),
    ],
)
def test_bad_fields_name_the_field(fields: dict, name: str) -> None:
    with pytest.raises(QRAGError, match=name):
        SearchPolicy(**fields)


def test_describe_says_each_rule() -> None:
    text = SearchPolicy.of(DEFAULTISH).describe()
    assert text.splitlines() == [
        "BM25 fusion: depth 10, first 1 step(s), later where Q's two best lie within 0.03",
        "restatement rule: margin 0.05, cosine >= 0.8",
    ]
    assert SearchPolicy().describe() == "BM25 fusion: off\nrestatement rule: off"
