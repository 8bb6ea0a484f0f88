# Round 10 on the CPU (session 38): round9_onedoc/t9cpu_train.sh with rope_max_frequency = pi/18
# (only feature pairs slower than pi/18 rad per position turn). The init is the packaged default
# saved with position_mode=document, rope_theta=1e8, rope_max_frequency=pi/18.
# t11cpu: the same with algo.lr=3e-5 algo.distill_weight=1.0 (c64_da's own lr and weight), OUT=.../t11cpu.
cd /work/main
OUT=${OUT:-/work/runs/s38/t10cpu} INIT=${INIT:-/work/runs/s38/init_c8} \
  bash benchmarks/general/results/round9_onedoc/t9cpu_train.sh model.rope_max_frequency=0.17453292519943295 "$@"
