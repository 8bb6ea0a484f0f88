"""qrag-eval's batched evaluation must pick exactly what the production search picks, stop rule
included (a threshold tuned with qrag-eval means the same in QRAGRetriever)."""

from __future__ import annotations

import pytest
import torch

from qrag_integrations import ChunkIndex, MultiStepSearcher, PositionMode, QRAGConfig, QRAGModel


@pytest.mark.parametrize("question_weight", [0.0, 0.7])
@pytest.mark.parametrize("mode", list(PositionMode))
def test_greedy_retrieve_equals_multistep_searcher(tiny_bert_dir, mode, question_weight):
    from qrag_training.baselines import greedy_retrieve
    from qrag_training.data import babilong_dataset

    torch.manual_seed(0)
    config = QRAGConfig(
        base_model=str(tiny_bert_dir), position_mode=mode, question_weight=question_weight
    )
    model = QRAGModel.from_base(config).eval()
    episodes = babilong_dataset("qa2", 4, 300, seed=7)
    picked_eval = [r.picked for r in greedy_retrieve(model, episodes, steps=4, batch_size=3)]
    for episode, expected in zip(episodes, picked_eval):
        index = ChunkIndex(model.embedding_dim)
        index.add(
            episode.chunks,
            model.embed_chunks(episode.chunks),
            ids=[str(i) for i in range(len(episode.chunks))],
        )
        hits = MultiStepSearcher(model, index).search([episode.question], k=4)[0]
        assert [int(h.chunk.id) for h in hits] == expected


def test_greedy_retrieve_stops_where_the_retriever_stops(tiny_bert_dir):
    from qrag_training.baselines import greedy_retrieve
    from qrag_training.data import babilong_dataset

    torch.manual_seed(0)
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir))).eval()
    episodes = babilong_dataset("qa2", 6, 300, seed=11)
    searchers = []
    for episode in episodes:
        index = ChunkIndex(model.embedding_dim)
        index.add(
            episode.chunks,
            model.embed_chunks(episode.chunks),
            ids=[str(i) for i in range(len(episode.chunks))],
        )
        searchers.append((episode, MultiStepSearcher(model, index)))
    # a threshold inside the spread of the Q-values, so some searches stop early and some do not
    q = sorted(h.q_value for e, s in searchers for h in s.search([e.question], k=3)[0])
    threshold = q[len(q) // 3]
    results = greedy_retrieve(model, episodes, steps=3, batch_size=4, stop_threshold=threshold)
    lengths = set()
    for (episode, searcher), result in zip(searchers, results):
        hits = searcher.search([episode.question], k=3, stop_threshold=threshold)[0]
        assert result.picked == [int(h.chunk.id) for h in hits]
        assert result.scores == pytest.approx([h.q_value for h in hits])
        lengths.add(len(hits))
    assert len(lengths) > 1  # the threshold did cut some searches and not others
