"""Scripted readers for tests: no model, answers decided by what the prompt holds.

Importable as ``scripted_readers`` from any test (``tests/`` is on ``sys.path``).
:func:`install_factory` puts a stand-in ``qrag_integrations.llm.factory`` module into
``sys.modules`` whose ``build_reader`` returns a given reader, so the code paths that build a
reader from a spec (``qrag-eval --reader``, ``feedback=llm``) run unchanged.
:func:`write_unlabeled` writes a custom-format corpus with answers and no supporting labels.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from qrag_training.data.episode import Episode

FACTORY = "qrag_integrations.llm.factory"
WRONG = "nowhere"


class ScriptedReader:
    """Answers each prompt with ``answer(prompt)``; records every ``generate`` batch."""

    def __init__(self, answer: Callable[[str], str], name: str = "scripted") -> None:
        self.answer = answer
        self.name = name
        self.batches: list[list[str]] = []

    def generate(self, prompts: Sequence[str]) -> list[str]:
        self.batches.append(list(prompts))
        return [self.answer(p) for p in prompts]

    @property
    def prompts(self) -> list[str]:
        """Every prompt answered, in order."""
        return [p for batch in self.batches for p in batch]


def context_of(prompt: str) -> str:
    """The context block of a prompt built from the default or bAbI template."""
    return prompt.split("Context:\n", 1)[1].split("\nQuestion:", 1)[0]


def gold_fact_reader(
    episodes: Sequence[Episode], facts: dict[str, Sequence[str]] | None = None
) -> ScriptedReader:
    """Answers an episode's gold answer iff its question and every one of its key facts (default:
    the supporting chunks; ``facts[episode.id]`` overrides) are in the prompt, else ``nowhere``.
    The episode is the first whose question is the prompt's and whose chunks hold every context
    line (bAbI questions and sentences repeat across episodes)."""

    def answer(prompt: str) -> str:
        lines = [line for line in context_of(prompt).split("\n") if line]
        for e in episodes:
            needed = facts[e.id] if facts is not None else e.supporting_chunks
            if f"Question: {e.question}\n" not in prompt or not set(lines) <= set(e.chunks):
                continue
            if needed and all(any(f in line for line in lines) for f in needed):
                return str(e.answer)
        return WRONG

    return ScriptedReader(answer, name="gold-fact")


def install_factory(monkeypatch: pytest.MonkeyPatch, reader: Any) -> list[tuple[str, dict]]:
    """Make ``build_reader(spec, **options)`` return ``reader``; returns the calls it gets."""
    calls: list[tuple[str, dict]] = []

    def build_reader(spec: str, **options: Any) -> Any:
        calls.append((spec, options))
        return reader

    module = types.ModuleType(FACTORY)
    module.build_reader = build_reader  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, FACTORY, module)
    return calls


def write_unlabeled(path: Path, n: int = 30) -> dict[str, list[str]]:
    """``n`` questions with an answer and no support; returns each one's key fact."""
    facts = {}
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fact = f"the apple {i} is in the garden {i}."
            chunks = [
                f"the cat {i} sat.",
                f"the dog {i} ran.",
                fact,
                f"the sky {i} is blue.",
                f"john {i} left.",
            ]
            facts[f"q{i}"] = [fact]
            fh.write(
                json.dumps(
                    {
                        "id": f"q{i}",
                        "question": f"where is the apple {i}?",
                        "answer": f"garden {i}",
                        "chunks": chunks,
                    }
                )
                + "\n"
            )
    return facts
