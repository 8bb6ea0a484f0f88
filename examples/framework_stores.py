"""Search the stores users already have (runs offline).

1. A LangChain ``InMemoryVectorStore`` filled the LangChain way, with the checkpoint's chunk
   encoder as its ``Embeddings``: searched in place (chunk ids, documents and order derived as the
   in-memory index derives them).
2. A store of another embedding model (LangChain's deterministic fake stands in for yours):
   ``QRAGRetriever.adopt`` embeds its texts with the chunk encoder into a new store and searches
   that one; a Qdrant collection (``adopt(client, collection_name=...)``) is adopted the same way,
   resumably.

    pip install "qrag-integrations[stores]"
    python examples/framework_stores.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from qrag_integrations import QRAGRetriever
from qrag_integrations.demo import load_sample
from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

sample = load_sample()
docs = [
    Document(id=f"s{i}", page_content=text, metadata={"source": "story"})
    for i, text in enumerate(sample["chunks"])
]


def show(title: str, retriever: QRAGRetriever) -> None:
    print(f"{title}: {sample['question']}   (answer: {sample['answer']})")
    for doc in retriever.invoke(sample["question"]):
        print(f"  step {doc.metadata['qrag_step']}  {doc.page_content}")


embeddings = QRAGEmbeddings.from_checkpoint()  # the default model's chunk encoder
store = InMemoryVectorStore.from_documents(docs, embeddings)
show("in place", QRAGRetriever.from_store(store, model=embeddings.model, k=3))

theirs = InMemoryVectorStore.from_documents(docs, DeterministicFakeEmbedding(size=64))
show("adopted", QRAGRetriever.adopt(theirs, model=embeddings.model, k=3))
