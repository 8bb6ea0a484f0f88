"""Reader LLMs: a batch of prompts in, answers out (framework-free; backends import lazily).

:class:`Reader` is the one interface every backend implements. :mod:`.answers` holds the answer
metrics (exact match / F1 with the usual normalisation) and :mod:`.prompts` the prompt that turns
a question and retrieved chunks into reader input.
"""

from qrag_integrations.readers.answers import answer_em, answer_f1, normalize_answer
from qrag_integrations.readers.base import Reader, ReaderError, ReaderUnavailable
from qrag_integrations.readers.prompts import DEFAULT_TEMPLATE, build_prompt

__all__ = [
    "DEFAULT_TEMPLATE",
    "Reader",
    "ReaderError",
    "ReaderUnavailable",
    "answer_em",
    "answer_f1",
    "build_prompt",
    "normalize_answer",
]
