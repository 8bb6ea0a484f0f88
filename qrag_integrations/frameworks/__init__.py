"""The LangChain and LlamaIndex faces: ``QRAGRetriever``, conversions between framework objects
and chunks, and the ``Embeddings`` adapters."""
