"""qrag-eval's batched greedy loop must pick exactly what the production search picks."""

from __future__ import annotations

import pytest
import torch

from qrag_integrations import ChunkIndex, MultiStepSearcher, PositionMode, QRAGConfig, QRAGModel


@pytest.mark.parametrize("question_weight", [0.0, 0.7])
@pytest.mark.parametrize("mode", [PositionMode.RELATIVE, PositionMode.ABSOLUTE, PositionMode.NONE])
def test_greedy_retrieve_equals_multistep_searcher(tiny_bert_dir, mode, question_weight):
    from qrag_training.data import babilong_dataset
    from qrag_training.evaluate import greedy_retrieve

    torch.manual_seed(0)
    config = QRAGConfig(base_model=str(tiny_bert_dir), position_mode=mode, question_weight=question_weight)
    model = QRAGModel.from_base(config).eval()
    episodes = babilong_dataset("qa2", 4, 300, seed=7)
    picked_eval = [r.picked for r in greedy_retrieve(model, episodes, steps=4, batch_size=3)]
    for episode, expected in zip(episodes, picked_eval):
        index = ChunkIndex(model.embedding_dim)
        index.add(episode.chunks, model.embed_chunks(episode.chunks), ids=[str(i) for i in range(len(episode.chunks))])
        hits = MultiStepSearcher(model, index).search([episode.question], k=4)[0]
        assert [int(h.chunk.id) for h in hits] == expected
