"""A reader on vLLM's offline engine (``vllm.LLM``), for a GPU machine.

vLLM is the optional ``vllm`` extra. On a machine without a supported accelerator ``import vllm``
can succeed while creating the engine fails; both give :class:`ReaderUnavailable`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qrag_integrations.llm.base import (
    ReaderError,
    ReaderUnavailable,
    chat_messages,
    first_line,
)

VLLM_INSTALL = 'pip install "qrag-integrations[vllm]"'
"""What installs the pinned vLLM (a GPU machine is needed to run it)."""


class VLLMReader:
    """Greedy answers from a model served in this process by vLLM's offline engine.

    Setup:
        ``pip install "qrag-integrations[vllm]"`` on a machine vLLM supports (a CUDA GPU).

    Usage:
        >>> reader = VLLMReader("Qwen/Qwen2.5-7B-Instruct", engine_options={"max_model_len": 8192})
        >>> reader.generate(["Question: What colour is the sky?\\nAnswer:"])
        ['Blue']

    The whole batch goes to the engine at once (it schedules it); prompts are sent as one user
    message through the model's chat template (``chat=True``) or as plain text.
    """

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 32,
        chat: bool = True,
        system_prompt: str | None = None,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Start the engine.

        Args:
            model: hub name or local folder of the model (whatever ``vllm.LLM(model=...)`` takes).
            max_tokens: most tokens generated per answer.
            chat: send prompts through the chat template (``LLM.chat``) or as plain text
                (``LLM.generate``).
            system_prompt: system message prepended in chat mode.
            engine_options: more keyword arguments for ``vllm.LLM`` (``tensor_parallel_size``,
                ``gpu_memory_utilization``, ``max_model_len``, ``dtype``, ...).

        Raises:
            ReaderUnavailable: vLLM is not installed or not usable here, or the engine could
                not start (no GPU, out of memory, unknown model, ...).
        """
        if max_tokens < 1:
            raise ReaderError(f"max_tokens must be >= 1; got {max_tokens}")
        try:
            from vllm import LLM, SamplingParams
        except Exception as exc:  # ImportError, or RuntimeError from a CPU-only machine
            raise ReaderUnavailable(
                f"vLLM is not usable here ({type(exc).__name__}: {exc}); it needs {VLLM_INSTALL} "
                "on a machine with a supported GPU"
            ) from exc
        try:
            self._engine = LLM(model=model, **dict(engine_options or {}))
        except Exception as exc:
            raise ReaderUnavailable(
                f"vLLM engine could not start here: {type(exc).__name__}: {exc}"
            ) from exc
        self._params = SamplingParams(temperature=0, max_tokens=max_tokens)
        self.name = f"vllm:{model}"
        self.chat = chat
        self.system_prompt = system_prompt

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """One answer per prompt, in order (temperature 0, first line of each generation)."""
        if not prompts:
            return []
        try:
            if self.chat:
                conversations = [chat_messages(p, self.system_prompt) for p in prompts]
                outputs = self._engine.chat(
                    conversations, sampling_params=self._params, use_tqdm=False
                )
            else:
                outputs = self._engine.generate(
                    list(prompts), sampling_params=self._params, use_tqdm=False
                )
        except Exception as exc:
            raise ReaderError(
                f"{self.name} failed to generate: {type(exc).__name__}: {exc}"
            ) from exc
        if len(outputs) != len(prompts):
            raise ReaderError(
                f"{self.name} returned {len(outputs)} outputs for {len(prompts)} prompts"
            )
        return [first_line(out.outputs[0].text) for out in outputs]
