"""QRAGRetriever in a LangChain LCEL chain (runs offline with the default model).

python examples/langchain_chain.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_core.documents import Document
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from qrag_integrations import QRAGRetriever

docs = [
    Document(page_content="John went to the office.", metadata={"source": "story"}),
    Document(page_content="The weather was mild that spring.", metadata={"source": "noise"}),
    Document(page_content="John picked up the football there.", metadata={"source": "story"}),
    Document(page_content="Mary moved to the kitchen.", metadata={"source": "story"}),
    Document(page_content="John travelled to the garden.", metadata={"source": "story"}),
    Document(page_content="Bread and wine were set upon the table.", metadata={"source": "noise"}),
]

# Two lines to swap it into an existing chain: build it, use it where the old retriever was.
retriever = QRAGRetriever.from_documents(
    docs, k=3
)  # checkpoint="path/to/trained" for a trained model


def format_docs(found: list[Document]) -> str:
    return "\n".join(d.page_content for d in found)


prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
llm = FakeListLLM(responses=["garden"])  # replace with any LangChain chat model / LLM
chain = (
    {"context": retriever | format_docs, "question": RunnablePassthrough()}
    | prompt
    | llm
    | StrOutputParser()
)

question = "Where is the football?"
for d in retriever.invoke(question):
    print(f"step {d.metadata['qrag_step']}  Q={d.metadata['qrag_q_value']:+.3f}  {d.page_content}")
print("answer:", chain.invoke(question))
print(
    "filtered:",
    [d.page_content for d in retriever.invoke(question, k=2, filter={"source": "story"})],
)
