"""Store-backed search: chunks that live in a vector store (Qdrant, LangChain / LlamaIndex
in-memory stores), their rows and per-step candidates, re-scored exactly by the core search."""
