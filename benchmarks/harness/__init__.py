"""What every benchmark shares: result header and JSON (:mod:`.results`), cached pool
embeddings (:mod:`.embedding_cache`), process statistics (:mod:`.proc_stats`), real texts
(:mod:`.texts`)."""
