"""The README's demo transcript is what ``qrag-demo`` prints now: the search steps (step, Q,
position, chunk) of both pipelines, not the reader's answers, which a reader may word otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qrag_integrations import demo

README = Path(__file__).resolve().parents[2] / "README.md"
#: The lines of the transcript that the search alone decides.
SEARCH_LINE = re.compile(
    r"^(model: |corpus: |question: |  step \d+  (Q=|score=)|  supporting facts found: )"
)


def _search_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if SEARCH_LINE.match(line)]


@pytest.mark.slow
def test_readme_transcript_is_the_demo_output(capsys) -> None:
    demo.main(["--reader", "none"])  # the default model, no reader LLM: the same search
    printed = _search_lines(capsys.readouterr().out)
    shown = _search_lines(README.read_text(encoding="utf-8"))
    assert len(printed) >= 2 * 3 + 4  # three steps in each framework, header, facts found
    assert shown == printed
