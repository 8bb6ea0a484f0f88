# Round 16 on the CPU (session 53): GPU round 16's r16_dr_b23 (training/tools/remote_train.sh
# ROUND=16) at CPU scale. The shipped default continued with the layout it searches with since
# session 51 (position_mode=document_relative: a document holding picks laid out around them), so
# that positions past 18 after a pick are trained; its mixture with qa2 / qa3 three times, lr 3e-5,
# distillation weight 1 toward its start, 32 questions a step, no in-batch or sampled negatives
# (moving positions: each state scores its own episode's chunks).
# OUT names the run folder; extra Hydra overrides follow as arguments. CPU round 17 (session 54,
# general/results/round17_cpu) is this script with OUT=/work/runs/s54/r17cpu MIN=80 and
# algo.in_batch_negatives=true algo.hard_negatives=8 algo.random_negatives=4 (allowed with
# document_relative positions since session 54).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=training:.
OUT=${OUT:-/work/runs/s53/r16cpu}
INIT=${INIT:-$OUT.init}
MIN=${MIN:-85}
[ -d "$INIT" ] || .venv/bin/python - "$INIT" <<'PY'
import sys
from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.loading import load_model
save_pretrained(load_model("packaged:qrag-general-minilm"), sys.argv[1])
PY
N='${env.noise}'
HP="name:hotpotqa,split:train"
PARTS="[{$HP,weight:1,one_document:true},{$HP,weight:1},\
{name:babilong,weight:2,task:[qa1,qa1,qa2,qa2,qa2,qa3,qa3,qa3,qa4,qa5],target_tokens:[2000,4000,8000],noise_kind:'$N',seed:0},\
{name:ruler,weight:0.5,variant:niah_multikey,target_tokens:2000,noise_kind:'$N',seed:0},\
{name:ruler,weight:0.5,variant:niah_multivalue,target_tokens:2000,noise_kind:'$N',seed:0}]"
.venv/bin/qrag-train preset=general_cpu out_dir="$OUT" init_from="$INIT" "env.train.parts=$PARTS" \
  env.position_mode=document_relative model.rope_theta=100000000.0 \
  model.rope_max_frequency=0.17453292519943295 model.question_weight=1.0 algo.anchor_states=true \
  algo.in_batch_negatives=false algo.hard_negatives=null algo.questions_per_step=32 \
  algo.lr=3e-5 algo.distill_weight=1.0 algo.distill_teacher=init algo.warmup=10 steps=300 \
  time_budget_minutes="$MIN" eval_interval=1000 save_interval=10 eval_episodes=200 \
  eval_at_start=false final_report=false torch_threads=2 "$@"
