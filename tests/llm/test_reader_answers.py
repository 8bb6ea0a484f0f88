"""Answer metrics and the reader prompt."""

import pytest

from qrag_integrations.llm import answer_em, answer_f1, build_prompt, normalize_answer


def test_normalisation_drops_case_punctuation_articles() -> None:
    assert normalize_answer("  The  Eiffel Tower! ") == "eiffel tower"


@pytest.mark.parametrize(
    ("pred", "gold", "em", "f1"),
    [
        ("the kitchen", "kitchen", 1.0, 1.0),
        ("kitchen garden", "kitchen", 0.0, 2 / 3),
        ("bedroom", "kitchen", 0.0, 0.0),
        ("yes", "no", 0.0, 0.0),
        ("no answer here", "no", 0.0, 0.0),
        ("", "kitchen", 0.0, 0.0),
    ],
)
def test_em_and_f1(pred: str, gold: str, em: float, f1: float) -> None:
    assert answer_em(pred, gold) == em
    assert answer_f1(pred, gold) == pytest.approx(f1)


def test_prompt_keeps_chunk_order_and_rejects_bad_template() -> None:
    prompt = build_prompt("Where is Mary?", ["b fact", "a fact"])
    assert prompt.index("b fact") < prompt.index("a fact") and "Where is Mary?" in prompt
    with pytest.raises(ValueError, match="context"):
        build_prompt("q", ["c"], template="{question}")
