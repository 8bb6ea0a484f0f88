"""Training lines from raw documents: questions written by rules or a reader LLM, checked,
deduplicated and held out by document (``qrag-make-questions``, docs/training.md, "No questions?
Generate them").

:func:`make_questions` takes documents (strings, dicts, LangChain / LlamaIndex documents) and
returns custom-JSONL lines (:mod:`qrag_training.data.custom`) with a report; :func:`write_lines`
writes them; :func:`read_path` and :func:`call_loader` read a folder, a JSONL file or a Python
function's documents.
"""

from qrag_training.questions.errors import QuestionGenerationError
from qrag_training.questions.generate import GenerationReport, make_questions, write_lines
from qrag_training.questions.settings import QuestionSettings
from qrag_training.questions.sources import SourceDocument, call_loader, read_path

__all__ = [
    "GenerationReport",
    "QuestionGenerationError",
    "QuestionSettings",
    "SourceDocument",
    "call_loader",
    "make_questions",
    "read_path",
    "write_lines",
]
