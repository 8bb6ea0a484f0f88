"""QRAGRetriever in a LlamaIndex query engine (runs offline with the default model).

python examples/llama_index_query_engine.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine

from qrag_integrations import QRAGRetriever

story = (
    "John went to the office. The weather was mild that spring. John picked up the football there. "
    "Mary moved to the kitchen. John travelled to the garden. Bread and wine were set upon the table."
)
documents = [Document(text=story, id_="story-1")]

# Two lines to swap it into an existing query engine.
retriever = QRAGRetriever.from_documents(
    documents, text_splitter=SentenceSplitter(chunk_size=24, chunk_overlap=0), k=3
)
engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())  # any LlamaIndex LLM

response = engine.query("Where is the football?")
for n in response.source_nodes:
    print(f"step {n.node.metadata['qrag_step']}  score={n.score:+.3f}  {n.node.get_content()}")
