"""Readers <-> LangChain and LlamaIndex, both ways; ``qrag_integrations.llm`` alone imports
neither framework."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import pytest
from langchain_core.language_models import FakeListChatModel, FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM

from qrag_integrations.llm import DEFAULT_TEMPLATE, Reader, ReaderError
from qrag_integrations.llm.frameworks import (
    LangChainReader,
    LlamaIndexReader,
    as_langchain_runnable,
    as_llama_index_llm,
)


class RecordingReader:
    """Answers ``"<n words>"`` and records every batch it is given."""

    name = "recording"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def generate(self, prompts: Sequence[str]) -> list[str]:
        self.batches.append(list(prompts))
        return [f"{len(p.split())} words" for p in prompts]


def test_langchain_chat_model_and_llm_as_readers() -> None:
    chat = LangChainReader(
        FakeListChatModel(responses=["kitchen\nbecause", "garden"]), max_concurrency=1
    )
    assert isinstance(chat, Reader)
    assert chat.generate(["Where is the apple?", "Where is Mary?"]) == ["kitchen", "garden"]
    assert chat.generate([]) == []
    assert LangChainReader(FakeListLLM(responses=[" hallway "])).generate(["q"]) == ["hallway"]


def test_langchain_failures_and_non_text_outputs_are_reader_errors() -> None:
    from langchain_core.runnables import RunnableLambda

    with pytest.raises(ReaderError, match="returned int"):
        LangChainReader(RunnableLambda(len)).generate(["q"])
    with pytest.raises(ReaderError, match="ZeroDivisionError"):
        LangChainReader(RunnableLambda(lambda p: 1 / 0)).generate(["q"])


def test_llama_index_llm_as_reader() -> None:
    reader = LlamaIndexReader(MockLLM())  # MockLLM echoes its prompt
    assert isinstance(reader, Reader)
    assert reader.generate(["kitchen\nrest", "garden"]) == ["kitchen", "garden"]
    with pytest.raises(ReaderError, match="llama_index:"):
        LlamaIndexReader(MockLLM()).generate([None])  # type: ignore[list-item]


def test_our_reader_ends_a_langchain_chain() -> None:
    reader = RecordingReader()
    chain = (
        ChatPromptTemplate.from_template(DEFAULT_TEMPLATE)
        | as_langchain_runnable(reader)
        | StrOutputParser()
    )
    answer = chain.invoke({"context": "Mary went to the kitchen.", "question": "Where is Mary?"})
    ((prompt,),) = reader.batches
    assert prompt.startswith("Answer the question from the context.") and "Where is Mary?" in prompt
    assert answer == f"{len(prompt.split())} words"
    assert as_langchain_runnable(reader).invoke("three small words") == "3 words"


def test_our_reader_answers_in_a_llama_index_query_engine() -> None:
    reader = RecordingReader()
    llm = as_llama_index_llm(reader, context_window=1024, num_output=16)
    assert llm.metadata.model_name == "recording" and llm.metadata.context_window == 1024
    assert llm.complete("a b").text == "2 words"
    assert [r.text for r in llm.stream_complete("a b c")] == ["3 words"]
    docs = [Document(text="Mary went to the kitchen."), Document(text="John is in the garden.")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    response = index.as_query_engine(llm=llm, similarity_top_k=2).query("Where is Mary?")
    assert str(response) == reader.generate(reader.batches[-1])[0]
    assert (
        "Mary went to the kitchen." in reader.batches[-1][0]
        and "Where is Mary?" in reader.batches[-1][0]
    )


PROBE = """
import json, sys
import qrag_integrations.llm
from qrag_integrations.llm import build_reader, TransformersReader, OpenAICompatibleReader, VLLMReader
seen = sorted({m.split(".")[0] for m in sys.modules} & {"langchain", "langchain_core", "llama_index", "vllm", "httpx"})
print(json.dumps(seen))
"""


def test_importing_the_readers_imports_no_framework_nor_backend() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
