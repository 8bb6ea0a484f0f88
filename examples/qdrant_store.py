"""QRAGRetriever over chunks that live in Qdrant (embedded local mode; runs offline).

Writes the bundled demo sample (bAbI facts hidden among noise sentences) into a Qdrant collection
through Qdrant's own client, then runs the learned multi-step search over the collection in place:
each step asks Qdrant for candidates and re-scores them exactly. The same code takes a server
(``QdrantClient(url="http://localhost:6333")``).

    pip install "qrag-integrations[stores]"
    python examples/qdrant_store.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from qdrant_client import QdrantClient

from qrag_integrations import QRAGRetriever
from qrag_integrations.demo import load_sample

sample = load_sample()
client = QdrantClient(":memory:")  # or QdrantClient(path="qdrant_data"), or url=... for a server
# check_exact=True also scores every chunk each step to count how often the candidates held the
# exact arg-max (the "store stats" line below): fine for this 160-chunk sample, a full scan per step
# on a big collection. Leave it off (the default) in production.
retriever = QRAGRetriever.from_store(
    client,
    collection_name="story",
    k=3,
    candidates_per_step=64,
    check_exact=True,
)
retriever.add_texts(
    sample["chunks"], ids=[f"s{i}" for i in range(len(sample["chunks"]))], doc_id="story"
)

print(f"question: {sample['question']}   (answer: {sample['answer']})")
for doc in retriever.invoke(sample["question"]):
    print(
        f"  step {doc.metadata['qrag_step']}  Q={doc.metadata['qrag_q_value']:+.3f}  {doc.page_content}"
    )
print("store stats:", retriever.stats)
