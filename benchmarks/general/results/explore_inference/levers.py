"""Exploration (session 42): search-time levers over the shipped weights, run through the
benchmark's own episodes (patches ``MultiStepSearcher.search_each``, which the benchmark's
multi-step method calls, then runs ``benchmarks.general.run`` with the arguments given).

Environment:
    BEAM_WIDTH: sequences kept per step (1: greedy, the shipped search).
    BEAM_SCORE: ``logp`` = sum of log-softmax(Q / BEAM_TAU) over the untaken chunks (the
        next-hop training's softmax); ``q`` = sum of Q.
    BEAM_TAU: that softmax's temperature (0.05, the training's).
    LEX_STATE: 1 = fused steps after the first rank BM25 by the state text (question and picks)
        instead of the bare question.
    LATER_DEPTH: fused steps after the first pick among Q's this many best (0: lexical_depth).
    BEAM_FROM: steps before this one keep one sequence (2: the first pick is the greedy one).

At ``BEAM_WIDTH=1`` with the other levers off it picks what the shipped search picks (every
fused step takes the reciprocal-rank-fusion best of Q's ``lexical_depth`` best, ties in Q order).
"""

import os
import sys

import torch

from qrag_integrations.core import search
from qrag_integrations.core.lexical import rrf_scores, top_by_q

WIDTH = int(os.environ.get("BEAM_WIDTH", "1"))
MODE = os.environ.get("BEAM_SCORE", "logp")
TAU = float(os.environ.get("BEAM_TAU", "0.05"))
LEX_STATE = os.environ.get("LEX_STATE", "0") == "1"
LATER = int(os.environ.get("LATER_DEPTH", "0"))
BEAM_FROM = int(os.environ.get("BEAM_FROM", "1"))


def expansions(searcher, cands, words, state, picked, depth, fused, width):
    """The ``width`` next picks of one sequence and the score each adds."""
    every = top_by_q(searcher, cands, state, picked, cands.n)
    if not every:
        return []
    qs = torch.tensor([q for _, q, _ in every])
    lse = float(torch.logsumexp(qs / TAU, 0))
    added = {r: (q / TAU - lse if MODE == "logp" else q) for r, q, _ in every}
    order = every
    if fused:
        depth = LATER if picked and LATER else depth
        dense = every[:depth]
        lex = [int(r) for r in words if int(r) not in set(picked)][:depth]
        score = rrf_scores([r for r, _, _ in dense], lex)
        in_q = {r: i for i, (r, _, _) in enumerate(dense)}
        best = sorted((r for r in score if r in in_q), key=lambda r: (-score[r], in_q[r]))
        order = [dense[in_q[r]] for r in best]
    return [(hit, added[hit[0]]) for hit in order[:width]]


def search_each(self, queries, indexes, k, stop_threshold=None):
    model = self.model
    cands = [self._searched.candidates(i.snapshot(), None, keep=False) for i in indexes]
    depth = self._lexical_depth(cands)
    fused_steps = min(k, self.settings.lexical_steps or model.config.lexical_steps or k)
    words = {}
    if depth:
        for b, query in enumerate(queries):
            words[b] = self._lexical.ranking(cands[b], query, depth + fused_steps)
    with torch.inference_mode():
        questions = model.embed_states(list(queries)).float()
    beams = [[((), (), 0.0)] for _ in queries]  # (picked ranks, hits, score)
    for step in range(1, k + 1):
        width = WIDTH if step >= BEAM_FROM else 1
        flat = [(b, s) for b in range(len(queries)) for s in beams[b] if len(s[0]) < cands[b].n]
        if not flat:
            break
        states = questions
        if step > 1:
            texts = [self._state_text(queries[b], cands[b], list(s[0])) for b, s in flat]
            with torch.inference_mode():
                states = model.embed_states(texts).float()
                states = model.anchor_states(states, questions[[b for b, _ in flat]])
        grown = [[] for _ in queries]
        for (b, (picked, hits, score)), state in zip(flat, states):
            fused = depth is not None and step <= fused_steps
            lex = words.get(b, [])
            if fused and step > 1 and LEX_STATE:
                text = self._state_text(queries[b], cands[b], list(picked))
                lex = self._lexical.ranking(cands[b], text, depth + fused_steps)
            for (rank, q, pos), add in expansions(
                self, cands[b], lex, state, list(picked), depth or 0, fused, width
            ):
                hit = search.Hit(cands[b].chunk(rank), step, q, cands[b].position(rank, pos))
                grown[b].append((picked + (rank,), hits + (hit,), score + add))
        for b in range(len(queries)):
            seen, keep = set(), []
            for seq in sorted(grown[b], key=lambda s: -s[2]):
                key = frozenset(seq[0]) if model.config.state_order.value == "document" else seq[0]
                if key not in seen:
                    seen.add(key)
                    keep.append(seq)
            beams[b] = keep[:width] or beams[b]
    return [list(max(seqs, key=lambda s: s[2])[1]) for seqs in beams]


search.MultiStepSearcher.search_each = search_each

if __name__ == "__main__":
    from benchmarks.general.run import main

    main(sys.argv[1:])
