# Last-pick state pilot (session 45): the shipped default continued on the 2 CPU cores with
# QRAGConfig.state_at_last_pick (see decision_rule.md). OUT names the run folder; pilot 2:
# HARD=16 HOP=8 (its amendment).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=training:.
OUT=${OUT:-/work/runs/s45/lastpick}
INIT=${INIT:-$OUT.init}
[ -d "$INIT" ] || .venv/bin/python - "$INIT" <<'PY'
import sys
from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.loading import load_model
model = load_model("packaged:qrag-general-minilm")
model.config.state_at_last_pick = True
save_pretrained(model, sys.argv[1])
PY
N='${env.noise}'
HP="name:hotpotqa,split:train"
PARTS="[{$HP,weight:1,one_document:true},{$HP,weight:1},\
{name:babilong,weight:2,task:[qa1,qa1,qa2,qa2,qa2,qa3,qa3,qa3,qa4,qa5],target_tokens:[1000,2000,4000],noise_kind:'$N',seed:0},\
{name:ruler,weight:0.5,variant:niah_multikey,target_tokens:2000,noise_kind:'$N',seed:0},\
{name:ruler,weight:0.5,variant:niah_multivalue,target_tokens:2000,noise_kind:'$N',seed:0}]"
.venv/bin/qrag-train preset=general_cpu out_dir="$OUT" init_from="$INIT" "env.train.parts=$PARTS" \
  env.position_mode=document model.rope_theta=100000000.0 model.rope_max_frequency=0.17453292519943295 \
  model.question_weight=1.0 model.trainable_layers=2 model.state_at_last_pick=true \
  algo.anchor_states=true algo.lr=3e-5 algo.distill_weight=1.0 algo.distill_teacher=init \
  algo.warmup=10 algo.hard_negatives=${HARD:-24} algo.random_negatives=8 algo.hop_negatives=${HOP:-0} steps=300 \
  time_budget_minutes=30 eval_interval=1000 eval_episodes=200 eval_at_start=false final_report=false \
  torch_threads=2 "$@"
