"""Offline screen of later-step BM25 fusion gated by Q's gap (session 47, validation only), over
the shipped search's logs (``log_steps.py``, one JSON per cell in ``LOGS``). At each logged step
after the first where Q's two best untaken lie within the gap, the pick becomes the reciprocal
rank fusion of Q's 10 best and BM25's 10 best by one of three rankings:

- ``question``: BM25 of the question (what ``gate.py`` runs);
- ``novel``: the same, counting only chunks that name a question term no pick names yet;
- ``residual``: BM25 of only the question terms no pick names yet.

Approximate: after a changed pick, later steps keep the logged Q ranking, and the bAbI logs' picks
leave out the supersede rule (its baseline here, gap 0, is 0.700 / 0.890, not the search's 0.760 /
0.960), so only differences count. From the repository root::

    LOGS=/tmp PYTHONPATH=training:. python benchmarks/general/results/explore_confgate/screen.py \\
        question,novel,residual 0,0.01,0.02,0.03,0.05,10
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

from benchmarks.general.run import cell_episodes
from qrag_integrations.core import lexical

LOGS = Path(os.environ.get("LOGS", "."))
RRF = 60
DEPTH = 10
CELLS = {
    "squad": (400, [1, 3]),
    "hotpotqa": (None, [2, 4]),
    "babilong-mixed-4000": (60, ["facts", 6]),
}


def terms(text: str) -> set[str]:
    return set(lexical.bm25_query(text)[0])


def fused(dense: list, words: list[int], taken: set[int]) -> int:
    d = [r for r, _ in dense if r not in taken][:DEPTH]
    w = [r for r in words if r not in taken][:DEPTH]
    score: dict[int, float] = {}
    for ranking in (d, w):
        for i, r in enumerate(ranking):
            score[r] = score.get(r, 0) + 1 / (RRF + i + 1)
    best = max(score[r] for r in d)
    return next(r for r in d if score[r] == best)


def later_words(variant: str, row: dict, step: dict, episode, picks: list[int], index) -> list:
    if variant == "question":
        return step["words"]
    rest = terms(episode.question).difference(*(terms(episode.chunks[j]) for j in picks))
    if variant == "novel":
        return [j for j, _ in row["bm25"] if j not in picks and terms(episode.chunks[j]) & rest]
    if not rest:
        return []
    scores = np.asarray(index().get_scores(sorted(rest)))
    return [int(j) for j in np.argsort(-scores, kind="stable")[:40] if scores[j] > 0]


def screen(cell: str, rows: list, episodes: list, variant: str, gap: float) -> dict:
    out: dict = {m: [] for m in CELLS[cell][1]}
    for row, episode in zip(rows, episodes):
        built: list = []

        def index(built=built, episode=episode):
            if not built:
                built.append(lexical.bm25_index(episode.chunks))
            return built[0]

        picks = [row["picked"][0]]
        for step in row["steps"]:
            dense = [(a, q) for a, q in step["dense"] if a not in picks]
            if not dense:
                break
            pick = dense[0][0]
            if len(dense) > 1 and dense[0][1] - dense[1][1] < gap:
                words = later_words(variant, row, step, episode, picks, index)
                if words:
                    pick = fused(step["dense"], words, set(picks))
            picks.append(pick)
        for m, hits in out.items():
            k = len(episode.support) if m == "facts" else m
            hits.append(float(set(episode.support) <= set(picks[:k])))
    return {m: round(sum(v) / len(v), 3) for m, v in out.items()}


if __name__ == "__main__":
    data = {}
    for cell, (n, _) in CELLS.items():
        rows = json.loads((LOGS / f"log_{cell}.json").read_text())
        data[cell] = (rows, cell_episodes(cell, "val", n, 555555))
    for variant in sys.argv[1].split(","):
        for gap in map(float, sys.argv[2].split(",")):
            cells = [f"{c} {screen(c, r, e, variant, gap)}" for c, (r, e) in data.items()]
            print(variant, gap, " | ".join(cells), flush=True)
