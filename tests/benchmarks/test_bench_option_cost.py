"""The option-cost benchmark's two sides: model configuration on a copy, search policy apart."""

from __future__ import annotations

import dataclasses

from search_reference import QUERIES, random_index

from benchmarks.search.option_cost import OPTIONS, measure, searcher_with
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.policy import DEFAULT_MARGIN


def test_a_model_option_changes_a_copy_and_a_search_option_the_policy(make_model) -> None:
    model = make_model("document")
    index = random_index()
    on = searcher_with(model, index, {"position_mode": "document_relative", "supersede": True})
    assert on.model.config.position_mode is PositionMode.DOCUMENT_RELATIVE
    assert model.config.position_mode is PositionMode.DOCUMENT  # the original is untouched
    assert (
        on.model.state_encoder is model.state_encoder
        and on.policy.supersede_margin == DEFAULT_MARGIN
    )


def test_position_mode_cost_is_measured_per_question_in_batches(make_model) -> None:
    model = make_model("document")
    got = measure(model, random_index(), QUERIES, 3, OPTIONS["position_mode"](0.0), batch=2)
    assert got["batch"] == 2 and got["picks"] == 3 * len(QUERIES)
    assert got["ms_on"] > 0 and got["ms_off"] > 0 and 0 <= got["picks_differing"] <= got["picks"]


def test_lexical_weight_sides_differ_in_weight_and_depth_only(make_model) -> None:
    model = make_model("document")
    on_changes, off_changes = OPTIONS["lexical_weight"](0.0)
    on = searcher_with(model, random_index(), on_changes)
    off = searcher_with(model, random_index(), off_changes)
    assert (on.policy.lexical_weight, on.policy.lexical_depth) == (0.3, 20)
    assert (off.policy.lexical_weight, off.policy.lexical_depth) == (0.0, 10)
    assert dataclasses.replace(on.policy, lexical_weight=0.0, lexical_depth=10) == off.policy
