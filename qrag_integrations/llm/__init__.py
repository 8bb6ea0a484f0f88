"""Reader LLMs: a batch of prompts in, answers out (framework-free; backends import lazily).

:class:`Reader` is the one interface every backend implements: :class:`TransformersReader`
(:mod:`.local`), :class:`OpenAICompatibleReader` (:mod:`.openai_http`), :class:`VLLMReader`
(:mod:`.vllm_engine`), and the LangChain / LlamaIndex adapters of :mod:`.frameworks` (import
that module yourself: it is the only one that imports the frameworks). :func:`build_reader`
makes one from a spec string. :mod:`.answers` holds the answer metrics (exact match / F1 with the
usual normalisation) and :mod:`.prompts` the prompt that turns a question and retrieved chunks
into reader input.
"""

from qrag_integrations.llm.answers import answer_em, answer_f1, normalize_answer
from qrag_integrations.llm.base import Reader, ReaderError, ReaderUnavailable, first_line
from qrag_integrations.llm.factory import KNOWN_SPECS, build_reader
from qrag_integrations.llm.local import TransformersReader, smollm2_path
from qrag_integrations.llm.openai_http import OpenAICompatibleReader
from qrag_integrations.llm.prompts import DEFAULT_TEMPLATE, build_prompt
from qrag_integrations.llm.vllm_engine import VLLMReader

__all__ = [
    "DEFAULT_TEMPLATE",
    "KNOWN_SPECS",
    "OpenAICompatibleReader",
    "Reader",
    "ReaderError",
    "ReaderUnavailable",
    "TransformersReader",
    "VLLMReader",
    "answer_em",
    "answer_f1",
    "build_prompt",
    "build_reader",
    "first_line",
    "normalize_answer",
    "smollm2_path",
]
