"""The unseen noise sources read the texts they name and nothing a training run reads."""

from __future__ import annotations

import json

from qrag_training.data.hotpotqa import default_path
from qrag_training.data.splits import EVAL, split_of

from benchmarks.general import run as bench_general
from benchmarks.harness import noise_sources


def test_wiki_noise_holds_no_sentence_of_a_training_or_validation_paragraph() -> None:
    records = json.loads(default_path().read_text(encoding="utf-8"))
    read_by_training = {
        s.strip()
        for r in records
        if split_of(str(r["_id"])) != EVAL
        for _, sentences in r["context"]
        for s in sentences
    }
    pool = noise_sources.wiki_noise()
    assert pool.kind == "wiki"
    # 1M tokens at 25 a sentence, without repeating the pool
    assert len(pool) >= 40_000
    assert not read_by_training & set(pool.sentences)
    assert all(5 <= len(s.split()) <= 60 for s in pool.sentences)


def test_every_unseen_source_is_a_babilong_cell() -> None:
    for name, source in noise_sources.UNSEEN_NOISE.items():
        pool = set(source().sentences)
        (episode,) = bench_general.cell_episodes(f"babilong-{name}-500", "val", 1, 3)[:1]
        story = set(episode.meta["story_positions"])
        noise = [c for i, c in enumerate(episode.chunks) if i not in story]
        assert noise and all(c in pool for c in noise), name
