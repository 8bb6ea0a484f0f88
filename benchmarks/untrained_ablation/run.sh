#!/usr/bin/env bash
# BabiLong qa2 at ~4K tokens, 100 episodes of seed 424242, 6 picks: the untrained MiniLM with the
# paper's settings, with our untrained settings without question anchoring, and with it (w=3).
# Summaries: benchmarks/untrained_ablation/results/babi_untrained_ablation/*.json
cd "$(dirname "$0")/.."
common="--env babilong --set env.task=qa2 --set env.eval_target_tokens=4000 --n 100 --seed 424242 --threads 1 --steps 6"
new="--set model.normalize=true --set env.position_mode=none --set env.state_order=pick --set env.max_state_tokens=256 --set env.max_chunk_tokens=256"
.venv/bin/qrag-eval --baseline base $common --out runs/babi_ablate/paper_untrained
.venv/bin/qrag-eval --baseline base $common $new --out runs/babi_ablate/new_w0
.venv/bin/qrag-eval --baseline base $common $new --set model.question_weight=3 --out runs/babi_ablate/new_w3
