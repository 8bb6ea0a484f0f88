"""Questions written by a reader LLM (:mod:`qrag_integrations.llm`: SmolLM2, any OpenAI-compatible
server, vLLM) for answers the rules chose.

The answer comes first, as in answer-aware question generation: the rules pick a name or number
of the chunk (for a bridge, also the linking name), and the reader is asked for one question with
that answer. The reply is the first line of the generation (every reader returns that), so the
answer is known to be in the chunk and each question can be checked
(:func:`qrag_training.questions.drafts.question_problem`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from qrag_integrations.llm.base import Reader, ReaderError
from qrag_training.questions.corpus import Corpus
from qrag_training.questions.drafts import BRIDGE, Draft, clean_question
from qrag_training.questions.errors import QuestionGenerationError

logger = logging.getLogger(__name__)

SINGLE_PROMPT = (
    "Write one question that can be answered from the passage alone and whose answer is "
    '"{answer}". Do not write "{answer}" in the question. Reply with the question only.\n'
    "Passage:\n{passage}\n"
    "Question:"
)
"""Placeholders: ``{answer}``, ``{passage}``."""

BRIDGE_PROMPT = (
    'Write one question whose answer is "{answer}" and that needs both passages: refer to '
    '"{name}" only by what passage 1 says about it. Write neither "{name}" nor "{answer}" in the '
    "question. Reply with the question only.\n"
    "Passage 1:\n{first}\n"
    "Passage 2:\n{second}\n"
    "Question:"
)
"""Placeholders: ``{answer}``, ``{name}``, ``{first}``, ``{second}``."""


def prompt_for(draft: Draft, corpus: Corpus) -> str:
    """The reader prompt asking for ``draft``'s question (its answer, chunks and bridge name)."""
    texts = [corpus.chunks[c].text for c in draft.chunks]
    if draft.kind == BRIDGE:
        return (
            BRIDGE_PROMPT.replace("{answer}", str(draft.answer))
            .replace("{name}", str(draft.name))
            .replace("{first}", texts[0])
            .replace("{second}", texts[1])
        )
    return SINGLE_PROMPT.replace("{answer}", str(draft.answer)).replace("{passage}", texts[0])


def reader_questions(
    drafts: Sequence[Draft], corpus: Corpus, reader: Reader, batch_size: int
) -> list[Draft]:
    """Each draft with the reader's question in place of the rules' (same answer and chunks).

    Raises:
        QuestionGenerationError: the reader failed (its error named) or answered a batch with
            the wrong number of replies.
    """
    out: list[Draft] = []
    for start in range(0, len(drafts), batch_size):
        batch = drafts[start : start + batch_size]
        try:
            replies = reader.generate([prompt_for(d, corpus) for d in batch])
        except ReaderError as err:
            raise QuestionGenerationError(f"reader {reader.name} failed: {err}") from err
        if len(replies) != len(batch):
            raise QuestionGenerationError(
                f"reader {reader.name} gave {len(replies)} replies for {len(batch)} prompts"
            )
        out += [d.with_question(clean_question(r), reader.name) for d, r in zip(batch, replies)]
        logger.info("reader questions: %d / %d", len(out), len(drafts))
    return out
