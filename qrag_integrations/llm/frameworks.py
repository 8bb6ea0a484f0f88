"""Readers <-> LangChain and LlamaIndex, both ways.

- :class:`LangChainReader` / :class:`LlamaIndexReader`: any LangChain chat model, LLM or
  Runnable, or any LlamaIndex ``LLM``, used as a :class:`~qrag_integrations.llm.Reader`.
- :func:`as_langchain_runnable` / :func:`as_llama_index_llm`: one of our readers used inside a
  LangChain chain or a LlamaIndex query engine.

The only module of :mod:`qrag_integrations.llm` that imports the frameworks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableLambda
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import Field

from qrag_integrations.llm.base import Reader, ReaderError, first_line


def _message_text(message: BaseMessage) -> str:
    """A message's text: its string content, or the text blocks of a list content."""
    if isinstance(message.content, str):
        return message.content
    blocks = [
        b if isinstance(b, str) else b.get("text", "")
        for b in message.content
        if isinstance(b, (str, dict))
    ]
    return "".join(blocks)


class LangChainReader:
    """Any LangChain chat model, LLM or Runnable (string in, string or message out) as a reader.

    Usage:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> LangChainReader(FakeListChatModel(responses=["kitchen"])).generate(["Where?"])
        ['kitchen']

    A batch is one ``runnable.batch(prompts)`` call (chat models get each prompt as a human
    message); answers are the first non-empty line of the text.
    """

    def __init__(self, runnable: Runnable[Any, Any], *, max_concurrency: int | None = None) -> None:
        """Wrap a runnable.

        Args:
            runnable: the model or chain.
            max_concurrency: most prompts in flight in ``batch`` (``None``: LangChain's default).
        """
        self.runnable = runnable
        self.max_concurrency = max_concurrency
        self.name = f"langchain:{getattr(runnable, 'model_name', None) or type(runnable).__name__}"

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """One answer per prompt, in order."""
        if not prompts:
            return []
        config = {"max_concurrency": self.max_concurrency} if self.max_concurrency else None
        try:
            outputs = self.runnable.batch(list(prompts), config=config)
        except Exception as exc:
            raise ReaderError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        answers = []
        for out in outputs:
            if isinstance(out, BaseMessage):
                out = _message_text(out)
            if not isinstance(out, str):
                raise ReaderError(
                    f"{self.name} returned {type(out).__name__}, not a string or a message"
                )
            answers.append(first_line(out))
        return answers


class LlamaIndexReader:
    """Any LlamaIndex ``LLM`` as a reader: ``llm.complete(prompt).text`` per prompt, in turn.

    Usage:
        >>> from llama_index.core.llms import MockLLM
        >>> LlamaIndexReader(MockLLM()).generate(["kitchen"])   # MockLLM echoes the prompt
        ['kitchen']
    """

    def __init__(self, llm: LLM) -> None:
        """Wrap an LLM.

        Args:
            llm: the LlamaIndex LLM.
        """
        self.llm = llm
        self.name = f"llama_index:{llm.metadata.model_name}"

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """One answer per prompt, in order."""
        try:
            return [first_line(self.llm.complete(p).text) for p in prompts]
        except Exception as exc:
            raise ReaderError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc


def _prompt_text(value: Any) -> str:
    """Reader input from what a LangChain prompt step hands on: the messages' text, joined."""
    if isinstance(value, PromptValue):
        return "\n\n".join(_message_text(m) for m in value.to_messages())
    if isinstance(value, BaseMessage):
        return _message_text(value)
    return str(value)


def as_langchain_runnable(reader: Reader) -> RunnableLambda[Any, str]:
    """``reader`` as a LangChain Runnable: a prompt value, message or string in, the answer out.

    A chat prompt's messages reach the reader as their text joined by blank lines (no
    ``Human:`` prefixes; the reader applies its own chat template). ``chain.batch`` calls the
    reader once per input, in LangChain's thread pool; to batch inside the reader's model, call
    ``reader.generate`` on the formatted prompts.

    Example:
        >>> chain = prompt | as_langchain_runnable(TransformersReader()) | StrOutputParser()
    """
    return RunnableLambda(lambda value: reader.generate([_prompt_text(value)])[0], name=reader.name)


class ReaderLLM(CustomLLM):
    """One of our readers as a LlamaIndex ``LLM`` (completion only; chat goes through the
    LLM's ``messages_to_prompt``). Build it with :func:`as_llama_index_llm`."""

    reader: Any = Field(exclude=True, description="The wrapped reader.")
    context_window: int = Field(default=2048, description="Prompt tokens the reader's model takes.")
    num_output: int = Field(default=32, description="Tokens the reader generates at most.")

    @classmethod
    def class_name(cls) -> str:
        return "QRAGReaderLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.num_output,
            model_name=self.reader.name,
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.reader.generate([prompt])[0])

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self.reader.generate([prompt])[0]
        yield CompletionResponse(text=text, delta=text)


def as_llama_index_llm(
    reader: Reader, *, context_window: int = 2048, num_output: int = 32
) -> ReaderLLM:
    """``reader`` as a LlamaIndex ``LLM``, e.g. for ``RetrieverQueryEngine.from_args(r, llm=...)``.

    Args:
        reader: any :class:`~qrag_integrations.llm.Reader`.
        context_window: prompt tokens its model takes (LlamaIndex packs context up to this).
        num_output: tokens it generates at most (LlamaIndex reserves room for them).
    """
    return ReaderLLM(reader=reader, context_window=context_window, num_output=num_output)
