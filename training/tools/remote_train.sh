#!/usr/bin/env bash
# One qrag-train preset on a lent GPU machine (no package index there, a small upload), then its
# export: bash training/tools/remote_train.sh PRESET [Hydra overrides...]
#
#   here, once:  python training/tools/remote_bundle.py pack .remote    (carried with the tree)
#   there:       OUT=... MIN=6.5 INIT=... bash training/tools/remote_train.sh general_gpu [overrides]
#   rehearsal:   DEV=cpu QUICK=1 MIN=0.3 OUT=/tmp/out bash training/tools/remote_train.sh babi_gpu
#
# The presets of the shipped checkpoints: general_gpu, hotpotqa_gpu, babi_gpu (conf/preset/).
# Environment: OUT (required) the folder whose files come back; DEV (cuda); MIN minutes of
# training (time_budget_minutes; unset: the preset's); NAME the run's name (PRESET); INIT a
# checkpoint folder to continue (init_from), its trained layers first re-attached to the remote
# base; QUICK=1 a seconds-long rehearsal at tiny sizes; UNPACK_ONLY=1 unpack the bundle and stop,
# so that a second call on the same warm machine can carry what the bundle left no room for (INIT);
# after it, runs sharing the GPU start side by side, each with its own NAME (`... &` then `wait`).
# No end-of-run report there (its BM25 baseline needs bm25s): qrag-eval --compare-baselines here.
# Back in OUT: NAME.tar (the exported checkpoint, fp16, its card from the run's record; in 14 MiB
# parts NAME.tar.part_* when larger) and NAME-record.tar.gz (metrics.jsonl, configs, log). Here:
#   tar xf NAME.tar && python -m qrag_training.export NAME DEST --base-model packaged:all-MiniLM-L6-v2
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root
PRESET=${1:?usage: remote_train.sh PRESET [overrides...]}; shift
OUT=${OUT:?set OUT to the folder whose files come back}
NAME=${NAME:-$PRESET} W=${W:-/tmp/qrag-remote} R=${R:-/tmp/qrag-runs} PY=${PY:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD:$PWD/training:$W/site${PYTHONPATH:+:$PYTHONPATH}"
[ -f "$W/.unpacked" ] || "$PY" training/tools/remote_bundle.py unpack .remote "$W"
[ -n "${UNPACK_ONLY:-}" ] && exit 0
mkdir -p "$R" "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || true

ARGS=("preset=$PRESET" "device=${DEV:-cuda}" "model.base_model=$W/base" "out_dir=$R/$NAME" final_report=false)
[ -n "${MIN:-}" ] && ARGS+=("time_budget_minutes=$MIN")
if [ -n "${INIT:-}" ]; then   # trained over the installed base: re-attached to this one first
  "$PY" -m qrag_training.export "$INIT" "$W/init-$NAME" --base-model "$W/base" --dtype fp32
  ARGS+=("init_from=$W/init-$NAME")
fi
[ -n "${QUICK:-}" ] && ARGS+=(steps=3 eval_interval=2 eval_episodes=8 algo.questions_per_step=2 ++env.pool_size=20)
"$PY" -m qrag_training.train "${ARGS[@]}" "$@" >"$R/$NAME.log" 2>&1 || echo "qrag-train exit $?"
grep -E "step [0-9]+ |time budget|Error" "$R/$NAME.log" | tail -20 || true
(cd "$R" && find "$NAME.log" "$NAME" -name '*.log' -o -name metrics.jsonl -o -name '*.yaml' 2>/dev/null \
  | tar -czf "$OUT/$NAME-record.tar.gz" -T -) || true

rm -rf "${R:?}/export/$NAME"
"$PY" -m qrag_training.export "$R/$NAME" "$R/export/$NAME"
tar -C "$R/export" -cf "$OUT/$NAME.tar" "$NAME"
if [ "$(stat -c %s "$OUT/$NAME.tar")" -gt 15000000 ]; then   # one returned file stays under ~16 MiB
  split -b 14m "$OUT/$NAME.tar" "$OUT/$NAME.tar.part_" && rm "$OUT/$NAME.tar"   # here: cat them | tar xf -
fi
ls -la "$OUT"
