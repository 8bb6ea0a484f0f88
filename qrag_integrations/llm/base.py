"""The reader interface and its errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from qrag_integrations.core.errors import QRAGError


class ReaderError(QRAGError):
    """A reader could not answer (bad settings, a failed or timed-out request, a bad reply)."""


class ReaderUnavailable(ReaderError):
    """A reader backend cannot run here (package missing, no GPU for the engine, ...)."""


@runtime_checkable
class Reader(Protocol):
    """Answers a batch of prompts; ``generate(prompts)[i]`` is the answer to ``prompts[i]``.

    Implementations batch internally as their backend prefers, are deterministic where the
    backend allows (greedy decoding by default), and raise :class:`ReaderError` /
    :class:`ReaderUnavailable` with the cause instead of backend-internal exceptions.
    """

    name: str
    """Short description for logs and result files, e.g. ``"transformers:SmolLM2-135M"``."""

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """One answer per prompt, in order (an empty batch gives an empty list)."""
        ...


def chat_messages(prompt: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The prompt as one user turn of a chat, after a system turn when ``system_prompt`` is set."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": prompt}]


def first_line(text: str) -> str:
    """The first non-empty line of a generation, stripped (``""`` when there is none).

    Readers are asked for a word or a short phrase; models often go on with an explanation on
    the next lines, which would only dilute answer EM / F1.
    """
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
