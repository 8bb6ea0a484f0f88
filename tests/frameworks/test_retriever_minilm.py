"""``QRAGRetriever`` with the packaged default model on a small bAbI-like story (slow: loads
MiniLM).

Without a shipped demo checkpoint the default model is the packaged all-MiniLM-L6-v2, untrained
for Q-RAG: it acts as an *iterative* dense retriever. That is enough for the classic two-hop
question "Where is the football?": step 1 finds "John picked up the football." (the only chunk
about the football); step 2 encodes the question *plus that chunk*, and "John went to the
garden." becomes the best match - while for the question alone it ranks only 5th of 10 (checked
below), so a one-step top-3 would miss it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from qrag_integrations import QRAGRetriever
from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.defaults import default_checkpoint

pytestmark = pytest.mark.slow

QUESTION = "Where is the football?"
FOOTBALL = "John picked up the football."
GARDEN = "John went to the garden."
STORY = [
    "Mary moved to the bathroom.",
    "Sandra journeyed to the bedroom.",
    FOOTBALL,
    "Mary went back to the kitchen.",
    "Daniel travelled to the office.",
    GARDEN,
    "Sandra went to the hallway.",
    "Daniel picked up the milk.",
    "The sky is blue.",
    "Fred dropped the apple.",
]


def texts(docs) -> list[str]:
    return [d.page_content for d in docs]


@pytest.fixture(scope="module")
def default_retriever() -> QRAGRetriever:
    return QRAGRetriever.from_texts(STORY, k=2)


@pytest.fixture(scope="module")
def untrained(default_retriever) -> QRAGRetriever:
    """The packaged MiniLM explicitly (the default unless a demo checkpoint is shipped)."""
    if default_retriever.checkpoint == PACKAGED_MINILM:
        return default_retriever
    return QRAGRetriever.from_texts(STORY, checkpoint=PACKAGED_MINILM, k=2)


def test_default_model_finds_both_facts(default_retriever):
    assert default_retriever.checkpoint == default_checkpoint()
    assert default_retriever.model.embedding_dim == 384
    docs = default_retriever.invoke(QUESTION, k=3)
    assert [d.metadata["qrag_step"] for d in docs] == [1, 2, 3]
    assert docs[0].page_content == FOOTBALL
    assert GARDEN in texts(docs)


def test_untrained_minilm_hops_from_the_football_to_the_garden(untrained):
    assert texts(untrained.invoke(QUESTION)) == [FOOTBALL, GARDEN]
    # For the question alone the garden fact is far down: a one-step top-3 would miss it.
    with torch.inference_mode():
        state = untrained.model.embed_states([QUESTION])[0]
    scores = untrained.index.snapshot().embeddings @ state
    chunks = untrained.index.snapshot().chunks  # rows by document id, not in story order
    one_step_top3 = [chunks[i].text for i in scores.argsort(descending=True)[:3].tolist()]
    assert one_step_top3[0] == FOOTBALL
    assert GARDEN not in one_step_top3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_hop_does_not_depend_on_story_order(untrained, seed):
    story = STORY[:]
    random.Random(seed).shuffle(story)
    r = QRAGRetriever(model=untrained.model, checkpoint=PACKAGED_MINILM, k=2)
    r.add_texts(story)
    assert texts(r.invoke(QUESTION)) == [FOOTBALL, GARDEN]


def test_langchain_chain_and_llamaindex_engine_with_the_real_model(default_retriever):
    expected = default_retriever.invoke(QUESTION, k=3)

    prompts: list[str] = []

    class CapturePrompts(BaseCallbackHandler):
        def on_llm_start(self, serialized: Any, prompts_: list[str], **kwargs: Any) -> None:
            prompts.extend(prompts_)

    def format_docs(docs) -> str:
        return "\n".join(d.page_content for d in docs)

    chain = (
        {"context": default_retriever | format_docs, "question": RunnablePassthrough()}
        | ChatPromptTemplate.from_template(
            "Facts:\n{context}\nQuestion: {question}\nAnswer in one word."
        )
        | FakeListLLM(responses=["garden"])
        | StrOutputParser()
    )
    assert chain.invoke(QUESTION, config={"callbacks": [CapturePrompts()]}) == "garden"
    assert len(prompts) == 1
    assert FOOTBALL in prompts[0] and GARDEN in prompts[0]

    default_retriever.k = 3
    try:
        response = RetrieverQueryEngine.from_args(default_retriever, llm=MockLLM()).query(QUESTION)
    finally:
        default_retriever.k = 2
    sources = response.source_nodes
    assert [s.node.get_content() for s in sources] == texts(expected)
    assert sources[0].node.get_content() == FOOTBALL
    assert [s.score for s in sources] == [s.node.metadata["qrag_q_value"] for s in sources]
    assert [s.score for s in sources] == pytest.approx(
        [d.metadata["qrag_q_value"] for d in expected], rel=1e-5
    )
    assert FOOTBALL in str(response) and GARDEN in str(response)
