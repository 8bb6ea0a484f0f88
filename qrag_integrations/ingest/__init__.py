"""Embedding a large corpus in shards, resumable, into an index folder or a store (``qrag-embed``)."""
