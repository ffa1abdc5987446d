#!/usr/bin/env bash
# One device call on two GPUs (nvidia-h200-x2): the kernel library judged on both, the RL ablation
# (contrastive on GPU 0, --plain on GPU 1, from one out/sft made on GPU 1) around it. Each GPU gets
# its own 16 cores; results/, out/ (no weights) and logs come back in $OUT/g0, $OUT/g1.
#   OUT=... bash bench/two_gpu_call.sh          (~8 min; set CUDAL1_COMMIT, the machine has no .git)
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}
L1=kernelbench/level1
step() { bash bench/device_call.sh "$@"; }
rm -f out/sft.done
(
  export CUDA_VISIBLE_DEVICES=0 OUT=$OUT/g0; mkdir -p "$OUT"; taskset -cp 0-15 $BASHPID > /dev/null
  NOISE_TASKS="$L1/19_ReLU.py $L1/1_Square_matrix_multiplication_.py" BUDGET=60 step noise
  TASKS=$L1 IDS=$(seq -s, 1 65) EVAL_FLAGS= TIME_BUDGET=0.5 EVAL_OUT=results/h200-part0 BUDGET=260 step eval-fast
  while [ ! -e out/sft.done ]; do sleep 2; done
  ABLATION_MINUTES=${ABLATION_MINUTES:-2.5} BUDGET=200 step rl-contrastive
) > "$OUT/g0.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1 OUT=$OUT/g1; mkdir -p "$OUT"; taskset -cp 16-31 $BASHPID > /dev/null
  BUDGET=${SFT_BUDGET:-190} SFT_FLAGS="${SFT_FLAGS:---report results/sft-h200 --steps 300 --round-steps 50 \
    --sample-tasks level1/19_ReLU.py,level1/23_Softmax.py,level1/40_LayerNorm.py,level1/97_CosineSimilarityLoss.py}" step sft
  touch out/sft.done
  ABLATION_MINUTES=${ABLATION_MINUTES:-2.5} BUDGET=200 step rl-plain
  TASKS=$L1 IDS=$(seq -s, 66 100) EVAL_FLAGS= TIME_BUDGET=0.5 EVAL_OUT=results/h200-part1 BUDGET=130 step eval-fast
  TASKS=kernelbench/level2 EVAL_FLAGS= TIME_BUDGET=0.5 EVAL_OUT=results/h200-part1 BUDGET=40 step eval-fast
) > "$OUT/g1.log" 2>&1 &
wait
