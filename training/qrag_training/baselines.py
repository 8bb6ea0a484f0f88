"""The retrievers ``qrag-eval`` and the benchmarks compare: greedy multi-step Q-RAG (the product's
search: :class:`~qrag_integrations.core.search.MultiStepSearcher`), single-step dense top-k,
single-step BM25 top-k and their reciprocal-rank fusion (dense+BM25, what LangChain's
``EnsembleRetriever`` returns); over each episode's own chunks (``*_retrieve``) or over one pool of
texts that every question searches (``*_retrieve_pooled``, ids = positions in the pool)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel, eval_mode
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.rules import bm25_index, bm25_query, rrf_scores
from qrag_integrations.core.search import MultiStepSearcher, SearchSettings
from qrag_training.data.episode import Episode
from qrag_training.documents import episode_doc_ids
from qrag_training.metrics import Retrieval

#: ``--baseline`` choices of ``qrag-eval``.
BASELINES = ("base", "dense", "bm25", "hybrid", "none")
#: Baselines whose scores are not Q-values (a ``q>=T`` chunk selection is refused for them).
NOT_Q_VALUES = ("dense", "bm25", "hybrid", "none")
#: Candidates per ranking that the dense+BM25 baseline fuses (fused as LangChain's
#: ``EnsembleRetriever`` fuses its retrievers by default: c = 60, equal weights; ``rrf_scores``).
HYBRID_DEPTH = 50
#: Chunk texts -> ``(len(texts), D)`` chunk embeddings.
ChunkEmbedder = Callable[[Sequence[str]], torch.Tensor]


def _chunk_embedder(model: QRAGModel, batch_size: int) -> ChunkEmbedder:
    """The model's own chunk encoder, ``batch_size`` chunks per forward pass."""
    return lambda texts: model.embed_chunks(texts, batch_size=batch_size)


def distinct_text_embedder(
    model: QRAGModel, batch_size: int = 128, max_texts: int = 200_000
) -> ChunkEmbedder:
    """The model's chunk encoder, computing each distinct text once and remembering it: for
    episodes that share chunks (questions about one article). It forgets everything when it
    holds more than ``max_texts`` (bounded memory for long haystacks, which share nothing). Make
    a new one whenever the chunk encoder changes (e.g. per evaluation during training)."""
    cache: dict[str, torch.Tensor] = {}

    def embed(texts: Sequence[str]) -> torch.Tensor:
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new and len(cache) + len(new) > max_texts:
            cache.clear()
            new = list(dict.fromkeys(texts))
        if new:
            with torch.inference_mode():
                cache.update(zip(new, model.embed_chunks(new, batch_size=batch_size)))
        return torch.stack([cache[t] for t in texts])

    return embed


@torch.inference_mode()
def greedy_retrieve(
    model: QRAGModel,
    episodes: Sequence[Episode],
    steps: int,
    batch_size: int = 16,
    stop_threshold: float | None = None,
    embed_batch_size: int = 128,
    embed: ChunkEmbedder | None = None,
    policy: SearchPolicy | None = None,
    threads: int | None = None,
) -> list[Retrieval]:
    """Greedy multi-step Q-RAG retrieval with the retriever's own search
    (:meth:`MultiStepSearcher.search_each`), ``batch_size`` episodes at a time.

    Args:
        model: the Q-RAG model (its config fixes positions and the state text).
        episodes: episodes to retrieve for; each one's chunks form its own index, its documents
            the runs of equal titles (:func:`~qrag_training.documents.episode_doc_ids`).
        steps: maximum picks per episode.
        batch_size: episodes whose states are embedded together.
        stop_threshold: if set, stop an episode before a pick whose Q-value is below it (as
            ``QRAGRetriever(stop_threshold=...)``; an episode can then pick nothing).
        embed_batch_size: chunks per forward pass when embedding.
        embed: chunk texts -> their embeddings with this model's chunk encoder, instead of
            ``model.embed_chunks`` (e.g. a benchmark's cache of pre-embedded noise sentences).
        policy: the search rules (e.g. BM25 fusion); default the model checkpoint's.
        threads: threads of the searches (``SearchSettings.threads``).
    """
    embed = embed or _chunk_embedder(model, embed_batch_size)
    settings = SearchSettings(threads=threads)
    results: list[Retrieval] = []
    with eval_mode(model):
        for start in range(0, len(episodes), batch_size):
            batch = list(episodes[start : start + batch_size])
            sizes = [len(e.chunks) for e in batch]
            chunk_emb = embed([c for e in batch for c in e.chunks]).split(sizes)
            indexes = []
            for episode, emb in zip(batch, chunk_emb):
                index = ChunkIndex(model.embedding_dim, device=model.device)
                ids = [str(i) for i in range(len(episode.chunks))]
                index.add(episode.chunks, emb, ids=ids, doc_ids=episode_doc_ids(episode))
                indexes.append(index)
            searcher = MultiStepSearcher(model, indexes[0], settings, policy)
            hits = searcher.search_each([e.question for e in batch], indexes, steps, stop_threshold)
            results += [
                Retrieval([int(h.chunk.id) for h in row], [h.q_value for h in row]) for row in hits
            ]
    return results


@torch.inference_mode()
def dense_retrieve(
    model: QRAGModel,
    episodes: Sequence[Episode],
    k: int,
    embed_batch_size: int = 128,
    embed: ChunkEmbedder | None = None,
) -> list[Retrieval]:
    """Single-step dense top-``k`` by cosine of question vs chunk mean-pooled embeddings.

    The question goes through the state encoder and chunks through the chunk encoder (or
    ``embed``, as in :func:`greedy_retrieve`); for an untrained model both are the base encoder.
    """
    embed = embed or _chunk_embedder(model, embed_batch_size)
    results = []
    with eval_mode(model):
        for episode in episodes:
            chunks = torch.nn.functional.normalize(embed(episode.chunks).float(), dim=-1)
            query = torch.nn.functional.normalize(
                model.embed_states([episode.question]).float(), dim=-1
            )
            scores = (query @ chunks.T)[0]
            top = torch.topk(scores, min(k, len(episode.chunks)))
            results.append(Retrieval(top.indices.tolist(), top.values.tolist()))
    return results


def _bm25_top(retriever, question: str, k: int, n: int) -> Retrieval:
    """BM25 top-``min(k, n)`` of one question in an index of ``n`` texts (:func:`bm25_index`)."""
    docs, scores = retriever.retrieve(bm25_query(question), k=min(k, n), show_progress=False)
    return Retrieval([int(i) for i in docs[0]], [float(s) for s in scores[0]])


def bm25_retrieve(episodes: Sequence[Episode], k: int) -> list[Retrieval]:
    """Single-step BM25 top-``k`` over each episode's chunks (``bm25s``, English stop words)."""
    return [_bm25_top(bm25_index(e.chunks), e.question, k, len(e.chunks)) for e in episodes]


def fuse(dense: Sequence[Retrieval], lexical: Sequence[Retrieval], k: int) -> list[Retrieval]:
    """Reciprocal-rank fusion of two rankings per question with equal weights (what LangChain's
    ``EnsembleRetriever`` does), top ``k``; ties keep the dense ranking's order. The scores are
    the fused ones."""
    fused = []
    for a, b in zip(dense, lexical, strict=True):
        score = rrf_scores(a.picked, b.picked)
        order = sorted(score, key=lambda i: -score[i])[:k]
        fused.append(Retrieval(order, [score[i] for i in order]))
    return fused


def hybrid_retrieve(
    model: QRAGModel, episodes: Sequence[Episode], k: int, embed: ChunkEmbedder | None = None
) -> list[Retrieval]:
    """Dense+BM25 top-``k``: :func:`dense_retrieve` and :func:`bm25_retrieve`, each
    :data:`HYBRID_DEPTH` deep, fused by :func:`fuse`."""
    dense = dense_retrieve(model, episodes, HYBRID_DEPTH, embed=embed)
    return fuse(dense, bm25_retrieve(episodes, HYBRID_DEPTH), k)


# -- one pool of texts for every question ---------------------------------------------------------
@torch.inference_mode()
def greedy_retrieve_pooled(
    model: QRAGModel,
    questions: Sequence[str],
    texts: Sequence[str],
    steps: int,
    batch_size: int = 32,
    stop_threshold: float | None = None,
    embed: ChunkEmbedder | None = None,
    embed_batch_size: int = 128,
) -> list[Retrieval]:
    """Greedy multi-step Q-RAG of every question over one index of all ``texts`` (in their order,
    each its own document: pooled paragraphs), ``batch_size`` questions searched together
    (:meth:`MultiStepSearcher.search`); other arguments as :func:`greedy_retrieve`."""
    embed = embed or _chunk_embedder(model, embed_batch_size)
    results: list[Retrieval] = []
    with eval_mode(model):
        index = ChunkIndex(model.embedding_dim, device=model.device)
        ids = [str(i) for i in range(len(texts))]
        index.add(list(texts), embed(texts), ids=ids, doc_ids=ids)
        searcher = MultiStepSearcher(model, index)
        for start in range(0, len(questions), batch_size):
            hits = searcher.search(
                list(questions[start : start + batch_size]), steps, stop_threshold
            )
            results += [
                Retrieval([int(h.chunk.id) for h in row], [h.q_value for h in row]) for row in hits
            ]
    return results


@torch.inference_mode()
def dense_retrieve_pooled(
    model: QRAGModel,
    questions: Sequence[str],
    texts: Sequence[str],
    k: int,
    batch_size: int = 32,
    embed: ChunkEmbedder | None = None,
    embed_batch_size: int = 128,
) -> list[Retrieval]:
    """Single-step dense top-``k`` of every question over all ``texts`` (cosine, as
    :func:`dense_retrieve`), ``batch_size`` questions embedded together."""
    embed = embed or _chunk_embedder(model, embed_batch_size)
    results = []
    with eval_mode(model):
        chunks = torch.nn.functional.normalize(embed(texts).float(), dim=-1)
        for start in range(0, len(questions), batch_size):
            batch = list(questions[start : start + batch_size])
            query = torch.nn.functional.normalize(model.embed_states(batch).float(), dim=-1)
            for row in range(len(batch)):
                top = torch.topk(query[row] @ chunks.T, min(k, len(texts)))
                results.append(Retrieval(top.indices.tolist(), top.values.tolist()))
    return results


def bm25_retrieve_pooled(questions: Sequence[str], texts: Sequence[str], k: int) -> list[Retrieval]:
    """Single-step BM25 top-``k`` of every question over one index of all ``texts``."""
    retriever = bm25_index(texts)
    return [_bm25_top(retriever, q, k, len(texts)) for q in questions]


def hybrid_retrieve_pooled(
    model: QRAGModel,
    questions: Sequence[str],
    texts: Sequence[str],
    k: int,
    embed: ChunkEmbedder | None = None,
) -> list[Retrieval]:
    """Dense+BM25 top-``k`` of every question over all ``texts`` (:func:`hybrid_retrieve` over one
    pool)."""
    dense = dense_retrieve_pooled(model, questions, texts, HYBRID_DEPTH, embed=embed)
    return fuse(dense, bm25_retrieve_pooled(questions, texts, HYBRID_DEPTH), k)
