"""The reader prompt: a question and the retrieved chunks, in retrieval order."""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_TEMPLATE = (
    "Answer the question from the context. Reply with the answer only: a word or a short phrase.\n"
    "Context:\n{context}\n"
    "Question: {question}\n"
    "Answer:"
)
"""Placeholders: ``{context}`` (chunks, one per line) and ``{question}``."""


def build_prompt(question: str, chunks: Sequence[str], template: str = DEFAULT_TEMPLATE) -> str:
    """Fill ``template`` with the question and the chunks joined one per line.

    Raises:
        ValueError: the template lacks ``{context}`` or ``{question}``.
    """
    for field in ("{context}", "{question}"):
        if field not in template:
            raise ValueError(f"reader prompt template must contain {field}; got {template!r}")
    return template.replace("{context}", "\n".join(chunks)).replace("{question}", question)
