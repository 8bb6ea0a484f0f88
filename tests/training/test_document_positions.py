"""Position mode ``document`` in training: an episode's documents, sampled negatives keep their
positions, and the next-hop learner scores what the search scores."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from qrag_training.data.episode import Episode
from qrag_training.data.mixture import mixture_dataset
from qrag_training.documents import LAYOUT_KEY, episode_doc_ids, positions_for
from qrag_training.negatives import NegativeSampler
from qrag_training.next_hop import NextHopConfig, NextHopLearner

from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.model import QRAGModel

DOC = QRAGConfig(position_mode=PositionMode.DOCUMENT)


def _story(n: int = 10, titles: list[str] | None = None) -> Episode:
    return Episode(
        id="s",
        question="where is mary",
        chunks=[f"sentence {i} " + "x " * i for i in range(n)],
        support=[n - 1],
        titles=titles,
    )


def _random_sampler(hard: int, random: int) -> NegativeSampler:
    """A sampler whose "base encoder" embeds at random."""

    def embed(texts):
        return torch.nn.functional.normalize(torch.randn(len(texts), 8), dim=-1)

    return NegativeSampler(embed, embed, hard=hard, random=random)


def test_documents_are_runs_of_titles_or_the_whole_episode() -> None:
    assert episode_doc_ids(_story(3)) == ["0", "0", "0"]
    assert episode_doc_ids(_story(5, ["a", "a", "b", "a", "a"])) == ["0", "0", "1", "2", "2"]
    assert positions_for(_story(10), DOC, [3]).tolist() == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert positions_for(_story(3, ["a", "b", "c"]), DOC, []).tolist() == [0, 0, 0]
    relative = QRAGConfig(position_mode=PositionMode.RELATIVE)
    assert positions_for(_story(10), relative, [3]).tolist()[4] == 23  # a pick opens a segment


def test_a_mixture_part_can_make_a_titled_episode_one_document() -> None:
    titled = _story(10, [str(i) for i in range(10)])
    loaders = {"gen": lambda n=1, **_: [titled] * n}
    (one,) = mixture_dataset([{"name": "gen", "one_document": True}], n=1, loaders=loaders)
    (apart,) = mixture_dataset([{"name": "gen"}], n=1, loaders=loaders)
    assert episode_doc_ids(one) == ["0"] * 10 and positions_for(one, DOC, []).max() == 18
    assert episode_doc_ids(apart) == [str(i) for i in range(10)]
    assert positions_for(apart, DOC, []).tolist() == [0] * 10
    with pytest.raises(ValueError, match="part 0: one_document must be true or false"):
        mixture_dataset([{"name": "gen", "one_document": "yes"}], n=1, loaders=loaders)


def test_sampled_negatives_keep_their_positions_in_the_full_episode() -> None:
    story = _story(30)
    full = positions_for(story, DOC, [])
    sampler = _random_sampler(hard=3, random=2)
    (small,) = sampler([story], np.random.default_rng(0))
    assert len(small.chunks) == 6 and LAYOUT_KEY not in story.meta
    rows = [story.chunks.index(c) for c in small.chunks]
    assert positions_for(small, DOC, []).tolist() == full[rows].tolist()


def test_next_hop_on_one_chunk_documents_equals_none_mode(tiny_bert_dir: Path) -> None:
    """Titled one-chunk documents sit at 0: the same loss as mode none, in-batch negatives on."""
    episodes = [_story(6, [f"t{i}" for i in range(6)]) for _ in range(2)]
    losses = {}
    for mode in (PositionMode.NONE, PositionMode.DOCUMENT):
        torch.manual_seed(0)
        model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), position_mode=mode))
        cfg = NextHopConfig(questions_per_step=2, dropout=False, warmup=1)
        cycle = itertools.cycle(episodes)
        losses[mode] = NextHopLearner(model, cfg, seed=0).step(lambda c=cycle: next(c))["loss"]
    assert losses[PositionMode.DOCUMENT] == losses[PositionMode.NONE]
    # one untitled story: its chunks are rotated, so the loss changes
    torch.manual_seed(0)
    model = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), position_mode=PositionMode.DOCUMENT)
    )
    it = itertools.cycle([_story(6), _story(6)])
    cfg = NextHopConfig(questions_per_step=2, dropout=False, warmup=1)
    loss = NextHopLearner(model, cfg, seed=0).step(lambda: next(it))["loss"]
    assert np.isfinite(loss) and loss != losses[PositionMode.NONE]


def test_next_hop_scores_states_at_their_last_pick_as_the_search(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``state_at_last_pick`` the learner's Q of every state is the search's: the state
    (anchored) rotated by its latest pick's fixed position, against chunks at theirs."""
    from qrag_training import next_hop
    from qrag_training.hop_states import HopState
    from search_reference import step_q_values

    from qrag_integrations.core.positions import rotate_as

    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir),
        position_mode=PositionMode.DOCUMENT,
        question_weight=0.7,
        state_at_last_pick=True,
    )
    model = QRAGModel.from_base(cfg).eval()
    story = _story(10)
    states = [HopState(0, [], [2, 7]), HopState(0, [7], [2]), HopState(0, [2, 5], [7])]
    monkeypatch.setattr(next_hop, "hop_states", lambda *_: states)
    seen = []
    loss = next_hop.next_hop_loss
    monkeypatch.setattr(next_hop, "next_hop_loss", lambda q, *a: seen.append(q) or loss(q, *a))
    learner = NextHopLearner(
        model,
        NextHopConfig(
            questions_per_step=1,
            in_batch_negatives=False,
            anchor_states=True,
            dropout=False,
            lr=0.0,
        ),
    )
    learner.step(lambda: story)
    fixed = positions_for(story, cfg, [])
    with torch.no_grad():
        emb = rotate_as(cfg, model.embed_chunks(story.chunks), torch.from_numpy(fixed))
    for row, s in enumerate(states):
        last = int(fixed[s.picked[-1]]) if s.picked else None
        expected, _ = step_q_values(model, story.question, story.chunks, emb, s.picked, last)
        free = [j for j in range(10) if j not in s.picked]
        assert torch.allclose(seen[0][row, free].detach(), expected[free], atol=1e-5)
    # the rotation is what the learner scores: without it the later states' Q differ
    unrotated = step_q_values(model, story.question, story.chunks, emb, [2, 5], 0)[0]
    assert not torch.allclose(seen[0][2, [7]].detach(), unrotated[[7]], atol=1e-3)


def test_state_at_last_pick_needs_document_positions_and_the_next_hop_learner(
    tiny_bert_dir: Path,
) -> None:
    with pytest.raises(ValueError, match="state_at_last_pick needs position_mode document"):
        QRAGConfig(position_mode=PositionMode.RELATIVE, state_at_last_pick=True)
    from qrag_training.pqn import PQNAgent, PQNConfig

    cfg = QRAGConfig(
        base_model=str(tiny_bert_dir), position_mode=PositionMode.DOCUMENT, state_at_last_pick=True
    )
    with pytest.raises(ValueError, match="PQN does not train state_at_last_pick"):
        PQNAgent(QRAGModel.from_base(cfg), PQNConfig())


def test_document_relative_lays_out_only_the_documents_holding_picks() -> None:
    from qrag_integrations.core.positions import relative_layout

    story = _story(8, ["a"] * 4 + ["b"] * 4)
    cfg = QRAGConfig(position_mode=PositionMode.DOCUMENT_RELATIVE)
    fixed = positions_for(story, DOC, [])
    assert positions_for(story, cfg, []).tolist() == fixed.tolist()
    got = positions_for(story, cfg, [1])
    assert got[4:].tolist() == fixed[4:].tolist()  # document b holds no pick
    assert got[:4].tolist() == relative_layout(4, [1], 20, 0.9).tolist() == [0, 20, 29, 38]


def test_sampled_negatives_keep_their_document_relative_positions() -> None:
    """A shrunk episode's chunks sit where they sit in the full one, around the picks too."""
    story = _story(30, ["a"] * 15 + ["b"] * 15)
    story = Episode(id="s", question="q", chunks=story.chunks, support=[3, 25], titles=story.titles)
    rel = QRAGConfig(position_mode=PositionMode.DOCUMENT_RELATIVE)
    sampler = _random_sampler(hard=4, random=4)
    (small,) = sampler([story], np.random.default_rng(1))
    rows = [story.chunks.index(c) for c in small.chunks]
    assert len(rows) < 30 and {3, 25} <= set(rows)
    for picked in ([], [3], [25], [3, 25]):
        full = positions_for(story, rel, picked)
        got = positions_for(small, rel, [rows.index(p) for p in picked])
        assert got.tolist() == full[rows].tolist()
    assert positions_for(story, rel, [3]).tolist() != positions_for(story, rel, []).tolist()


def test_in_batch_negatives_keep_their_fixed_place_with_document_relative_positions(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each state's own episode is laid out around its picks; the other episode's chunks (a
    document without the state's picks) at their fixed places, as the search places them."""
    from qrag_training import next_hop
    from qrag_training.hop_states import HopState

    cfg = QRAGConfig(base_model=str(tiny_bert_dir), position_mode=PositionMode.DOCUMENT_RELATIVE)
    model = QRAGModel.from_base(cfg)
    first = Episode(id="a", question="where", chunks=_story(8).chunks, support=[2, 6])
    second = Episode(id="b", question="who", chunks=[f"other {i} " for i in range(5)], support=[4])
    states = [HopState(0, [], [2, 6]), HopState(0, [2], [6]), HopState(1, [4], [0])]
    monkeypatch.setattr(next_hop, "hop_states", lambda *_: states)
    seen: list[torch.Tensor] = []
    rotate = model.rotate_chunks
    monkeypatch.setattr(model, "rotate_chunks", lambda c, p: seen.append(p) or rotate(c, p))
    it = iter([first, second])
    learner = NextHopLearner(model, NextHopConfig(questions_per_step=2, dropout=False, warmup=1))
    assert np.isfinite(learner.step(lambda: next(it))["loss"])
    (positions,) = seen
    fixed = [positions_for(e, cfg, []).tolist() for e in (first, second)]
    assert positions[0].tolist() == fixed[0] + fixed[1]
    assert positions[1].tolist() == positions_for(first, cfg, [2]).tolist() + fixed[1]
    assert positions[2].tolist() == fixed[0] + positions_for(second, cfg, [4]).tolist()
    assert positions[1].tolist() != positions[0].tolist()
