# Round 9 on the CPU (session 38): as round8_doc/t8cpu_train.sh (the default's weights, document
# positions, RoPE base 1e8, 200 updates of 8 questions), but half the HotpotQA training episodes
# are one document of ten paragraphs (`one_document: true`), so training sees multi-chunk wiki
# documents whose order says nothing. The init is the packaged default saved with
# position_mode=document and rope_theta=1e8 (load_model + save_pretrained).
# OUT / INIT name the run folder and init; extra Hydra overrides follow as arguments.
cd /work/main
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
NOISE='${env.noise}'
PARTS="[{name:hotpotqa,weight:1,split:train,one_document:true},{name:hotpotqa,weight:1,split:train},\
{name:babilong,weight:2,task:[qa1,qa2,qa2,qa3,qa3,qa4,qa5],target_tokens:[1000,2000,4000],noise_kind:'$NOISE',seed:0},\
{name:ruler,weight:0.5,variant:niah_multikey,target_tokens:2000,noise_kind:'$NOISE',seed:0},\
{name:ruler,weight:0.5,variant:niah_multivalue,target_tokens:2000,noise_kind:'$NOISE',seed:0}]"
.venv/bin/qrag-train preset=general_cpu out_dir="${OUT:-/work/runs/s38/t9cpu}" init_from="${INIT:-/work/runs/s38/init_t9}" \
  "env.train.parts=$PARTS" \
  env.position_mode=document model.rope_theta=100000000.0 model.question_weight=1.0 algo.anchor_states=true \
  algo.lr=6e-5 algo.distill_weight=0.5 algo.distill_teacher=init algo.warmup=10 steps=200 \
  time_budget_minutes=20 eval_interval=1000 eval_episodes=100 eval_at_start=false final_report=false torch_threads=2 "$@"
