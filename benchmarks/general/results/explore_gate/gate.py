"""Exploration (session 43): a question gate on the later picks over the shipped weights, run
through the benchmark's own episodes (patches ``MultiStepSearcher.search_each``, which the
benchmark's multi-step method calls, then runs ``benchmarks.general.run`` with the arguments).

Environment:
    GATE_DELTA: later picks are ranked by ``max(Q(state, c), Q(question, c) - GATE_DELTA)``
        (unset or ``inf``: the shipped search).
    GATE_QUESTION_ONLY: 1 = later picks by ``Q(question, c)`` alone (a diagnostic: the trained
        question encoder's own single-step ranking after the shipped first pick).
    GATE_FUSED: comma-separated steps fused with the question's BM25 ranking (e.g. ``1,3``: the
        first and the third; unset: the shipped ``lexical_steps``).

Fused steps (``lexical_steps``) are as shipped; the gate acts on the plain steps after them.
Document mode only (the shipped default): a chunk's position does not move with the picks, so
the first step's Q-values of the bare question serve every later step.
"""

import math
import os
import sys

import torch

from qrag_integrations.core import search
from qrag_integrations.core.lexical import fused_best, top_by_q

DELTA = float(os.environ.get("GATE_DELTA", "inf"))
QUESTION_ONLY = os.environ.get("GATE_QUESTION_ONLY", "0") == "1"
FUSED = os.environ.get("GATE_FUSED", "")


def all_q(searcher, cands, state, picked):
    """Q of every untaken candidate as a dense tensor (-inf where taken)."""
    q = torch.full((cands.n,), -math.inf)
    for rank, value, _ in top_by_q(searcher, cands, state, picked, cands.n):
        q[rank] = value
    return q


def search_each(self, queries, indexes, k, stop_threshold=None):
    model = self.model
    cands = [self._searched.candidates(i.snapshot(), None, keep=False) for i in indexes]
    depth = self._lexical_depth(cands)
    fused_steps = min(k, self.settings.lexical_steps or model.config.lexical_steps or k)
    words = {}
    if depth:
        for b, query in enumerate(queries):
            words[b] = self._lexical.ranking(cands[b], query, depth + k)
    with torch.inference_mode():
        questions = model.embed_states(list(queries)).float()
    picked = [[] for _ in queries]
    results = [[] for _ in queries]
    q_question = {}
    for step in range(1, k + 1):
        active = [b for b in range(len(queries)) if len(picked[b]) < cands[b].n]
        if not active:
            break
        states = questions[active]
        if step > 1:
            texts = [self._state_text(queries[b], cands[b], picked[b]) for b in active]
            with torch.inference_mode():
                states = model.embed_states(texts).float()
                states = model.anchor_states(states, questions[active])
        for b, state in zip(active, states):
            if step == 1 and (DELTA != math.inf or QUESTION_ONLY):
                q_question[b] = all_q(self, cands[b], questions[b], [])
            fused = step in {int(x) for x in FUSED.split(",")} if FUSED else step <= fused_steps
            if depth is not None and fused:
                rank, q, pos = fused_best(self, cands[b], words[b], state, picked[b], depth)
            else:
                q_state = all_q(self, cands[b], state, picked[b])
                score = q_state
                if QUESTION_ONLY:
                    score = q_question[b].clone()
                    score[torch.tensor(picked[b], dtype=torch.long)] = -math.inf
                elif DELTA != math.inf:
                    gated = q_question[b].clone()
                    gated[torch.tensor(picked[b], dtype=torch.long)] = -math.inf
                    score = torch.maximum(q_state, gated - DELTA)
                rank = int(torch.argmax(score))
                q, pos = float(q_state[rank]), 0
            picked[b].append(rank)
            results[b].append(
                search.Hit(cands[b].chunk(rank), step, q, cands[b].position(rank, pos))
            )
    return results


search.MultiStepSearcher.search_each = search_each

if __name__ == "__main__":
    from benchmarks.general.run import main

    main(sys.argv[1:])
