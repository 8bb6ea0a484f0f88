"""The option-cost benchmark's two sides: model configuration on a copy, search policy apart."""

from __future__ import annotations

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
