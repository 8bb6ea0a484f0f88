cd /work/main
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/qrag-train preset=general_cpu out_dir=/work/runs/s37/t8cpu init_from=/work/runs/s37/init_t8 \
  env.position_mode=document model.rope_theta=100000000.0 model.question_weight=1.0 algo.anchor_states=true \
  algo.lr=6e-5 algo.distill_weight=0.5 algo.distill_teacher=init algo.warmup=10 steps=200 \
  time_budget_minutes=20 eval_interval=1000 eval_episodes=100 eval_at_start=false final_report=false torch_threads=2
