#!/usr/bin/env bash
# One device call on two GPUs (nvidia-h200-x2), each GPU with its own 16 cores:
#   GPU 0: `make train` end to end on its bundled default, timed; its stage 3 (out/rl) is the
#          contrastive arm of the paper's ablation.
#   GPU 1: the GPU-only judge tests, PROFILE (bench/profile_solution.py: task then solutions) and
#          the library's level-1 tasks EVAL_IDS (into results/h200-rejudge: a fresh file, so edited
#          solutions are judged again), if set, then, from the same
#          out/sft as soon as GPU 0's stage 3 starts, the --plain arm with the same defaults and
#          time limit (out/rl-plain).
# Then results/train-h200.md from both arms. results/ and out/ (no weights) come back in $OUT.
#   OUT=... CUDAL1_COMMIT=... bash bench/train_call.sh        (~9 min)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
T0=$(date +%s)  # everything ends by T0 + 580 s: the device's limit per call is 600
mkdir -p "$OUT" out results/logs
rm -rf out/sft out/rl out/rl-plain
(
  export CUDA_VISIBLE_DEVICES=0; taskset -cp 0-15 $BASHPID > /dev/null
  start=$(date +%s)
  timeout $(( T0 + 570 - $(date +%s) )) make -s train SFT_FLAGS="--report results/sft-h200"
  echo "=== make train: rc $? after $(( $(date +%s) - start )) s"
) > "$OUT/g0.log" 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1; taskset -cp 16-31 $BASHPID > /dev/null
  timeout 90 python3 -m pytest -q -m gpu -s tests/test_judge.py 2>&1 | tail -4
  [ -n "${PROFILE:-}" ] && timeout 90 python3 bench/profile_solution.py $PROFILE > results/h200-profile.md 2>&1
  [ -n "${EVAL_IDS:-}" ] && timeout 150 python3 evaluate.py --tasks kernelbench/level1 --ids "$EVAL_IDS" --solutions kernels \
    --gpu h200 --time-budget 0.5 --out results/h200-rejudge 2>&1 | tail -2
  while [ ! -d out/rl ]; do sleep 2; done
  echo "=== plain arm from out/sft at $(date +%T)"
  timeout $(( T0 + 575 - $(date +%s) )) python3 train_rl.py --init out/sft --out out/rl-plain --plain 2>&1 | tail -25
) > "$OUT/g1.log" 2>&1 &
wait
python3 bench/rl_report.py out/rl out/rl-plain --out results/train-h200.md > "$OUT/report.log" 2>&1
cp "$OUT/g0.log" "results/logs/h200-make-train-${CUDAL1_COMMIT:-unknown}.log"
tar czf "$OUT/results.tgz" --exclude='*.safetensors' results out 2>/dev/null
