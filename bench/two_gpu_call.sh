#!/usr/bin/env bash
# One device call on two GPUs (nvidia-h200-x2), each GPU with its own 16 cores:
#   GPU 0: our module's per-call cost, static vs shared CUDA runtime (writes out/cudart), then the
#          library slice EVAL_IDS of level 1 built with the faster runtime, then the contrastive arm.
#   GPU 1: decode speed with and without CUDA graphs (graphs are used below only if greedy answers
#          match), stages 1-2 (out/sft), then the --plain arm from the same out/sft.
# Then results/train-h200.md from the two arms. results/, out/ (no weights) and logs come back in
# $OUT/g0, $OUT/g1.      OUT=... CUDAL1_COMMIT=... bash bench/two_gpu_call.sh     (~9 min)
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}
step() { bash bench/device_call.sh "$@"; }
rm -f out/sft.done out/graphs
(
  export CUDA_VISIBLE_DEVICES=0 OUT=$OUT/g0; mkdir -p "$OUT"; taskset -cp 0-15 $BASHPID > /dev/null
  step module-overhead
  CUDART=$(cat out/cudart 2>/dev/null || echo static) TASKS=kernelbench/level1 IDS=${EVAL_IDS:-8,9,85,86,87,88,94,95,96,97,98,99} \
    EVAL_FLAGS= TIME_BUDGET=0.5 BUDGET=150 step eval-fast
  while [ ! -e out/sft.done ]; do sleep 2; done
  RL_FLAGS="$(cat out/graphs)" ABLATION_MINUTES=${ABLATION_MINUTES:-2.5} BUDGET=200 step rl-contrastive
) > "$OUT/g0.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1 OUT=$OUT/g1; mkdir -p "$OUT"; taskset -cp 16-31 $BASHPID > /dev/null
  BUDGET=90 step sample-speed
  # CUDA graphs only where every greedy answer matched the eager decode
  python3 -c "import re,sys; t=open('results/h200-sample-speed.md').read(); m=re.findall(r'equal with and without: (\d+)/(\d+)', t); \
sys.exit(not (m and 'CUDA graph' in t and all(a == b for a, b in m)))" && echo --cuda-graphs > out/graphs || echo > out/graphs
  echo "graphs: $(cat out/graphs)"
  BUDGET=${SFT_BUDGET:-270} SFT_FLAGS="$(cat out/graphs) ${SFT_FLAGS:---report results/sft-h200 --steps 300 --round-steps 50 \
    --sample-tasks level1/19_ReLU.py,level1/23_Softmax.py,level1/40_LayerNorm.py,level1/97_CosineSimilarityLoss.py}" step sft
  touch out/sft.done
  RL_FLAGS="$(cat out/graphs)" ABLATION_MINUTES=${ABLATION_MINUTES:-2.5} BUDGET=200 step rl-plain
) > "$OUT/g1.log" 2>&1 &
wait
python3 bench/rl_report.py out/rl-contrastive out/rl-plain --out results/train-h200.md > "$OUT/report.log" 2>&1
tar czf "$OUT/final.tgz" --exclude='*.safetensors' results out 2>/dev/null
