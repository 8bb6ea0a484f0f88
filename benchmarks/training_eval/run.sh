#!/usr/bin/env bash
# Final held-out test: BabiLong qa2 at ~4K tokens, 200 episodes from seed 424242, a seed used by
# neither training (seed*1000+pass) nor checkpoint selection (eval_seed 999999).
# Usage: benchmarks/training_eval/run.sh "<methods>"   (methods: bm25 dense base best last)
# Checkpoints are read from RUN (default runs/cpu-qa2-full), results go to OUT (default runs/eval).
set -e
cd "$(dirname "$0")/.." && . .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
common=(--env babilong --set env.task=qa2 --set env.eval_target_tokens=4000 --n 200 --seed 424242 --threads 1)
for steps in 6 2; do
  for m in $1; do
    case $m in
      best|last) qrag-eval ${RUN:-runs/cpu-qa2-full}/$m "${common[@]}" --steps $steps --out ${OUT:-runs/eval}/qa2-4k-qrag-$m-k$steps ;;
      *) qrag-eval --baseline $m "${common[@]}" --steps $steps --out ${OUT:-runs/eval}/qa2-4k-$m-k$steps ;;
    esac
  done
done
