# Round 10 on the CPU (session 38): round9_onedoc/t9cpu_train.sh with rope_max_frequency = pi/18
# (only feature pairs slower than pi/18 rad per position turn). The init is the packaged default
# saved with position_mode=document, rope_theta=1e8, rope_max_frequency=pi/18.
cd /work/main
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
NOISE='${env.noise}'
PARTS="[{name:hotpotqa,weight:1,split:train,one_document:true},{name:hotpotqa,weight:1,split:train},\
{name:babilong,weight:2,task:[qa1,qa2,qa2,qa3,qa3,qa4,qa5],target_tokens:[1000,2000,4000],noise_kind:'$NOISE',seed:0},\
{name:ruler,weight:0.5,variant:niah_multikey,target_tokens:2000,noise_kind:'$NOISE',seed:0},\
{name:ruler,weight:0.5,variant:niah_multivalue,target_tokens:2000,noise_kind:'$NOISE',seed:0}]"
.venv/bin/qrag-train preset=general_cpu out_dir=/work/runs/s38/t10cpu init_from=/work/runs/s38/init_c8 \
  "env.train.parts=$PARTS" \
  env.position_mode=document model.rope_theta=100000000.0 model.rope_max_frequency=0.17453292519943295 \
  model.question_weight=1.0 algo.anchor_states=true \
  algo.lr=6e-5 algo.distill_weight=0.5 algo.distill_teacher=init algo.warmup=10 steps=200 \
  time_budget_minutes=20 eval_interval=1000 eval_episodes=100 eval_at_start=false final_report=false torch_threads=2
