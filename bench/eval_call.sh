#!/usr/bin/env bash
# The whole library judged afresh in one device call on two GPUs (nvidia-h200-x2):
#   GPU 0: make eval GPU=h200 over level-1 tasks 1-50, then the A/A test (bench/judge_noise.py) on ReLU, Softmax
#   GPU 1: make eval GPU=h200 over level-1 tasks 51-100, then level 2
# Both append to a fresh results/h200.jsonl (a cut-off run resumes from it next call). Then the
# report from every record, with torch.compile's ratio taken from the reference-only records of
# results/h200-baseline.jsonl (references do not change; compiling all 103 again costs minutes).
# Last, bench/flush_probe.py (write vs read L2 flush) on GPU 0.
#   OUT=... CUDAL1_COMMIT=... bash bench/eval_call.sh          (~8 min)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
T0=$(date +%s)  # everything ends by T0 + 570 s: the device's limit per call is 600
mkdir -p "$OUT"
[ -n "${RESUME:-}" ] || rm -f results/h200.jsonl results/h200.md results/h200.json
half() {  # gpu cores ids: one make eval per GPU, each on its own 16 cores
  export CUDA_VISIBLE_DEVICES=$1
  taskset -cp "$2" $BASHPID > /dev/null
  timeout $(( T0 + 510 - $(date +%s) )) make -s eval GPU=h200 TASKS=kernelbench/level1 SOLUTIONS=kernels \
    IDS="$3" EVAL_FLAGS="--time-budget 0.5"
}
( half 0 0-15 "$(seq -s, 1 50)"
  rm -f results/h200-judge-noise.jsonl  # a fresh A/A run: judge_many would resume the old one
  timeout $(( T0 + 540 - $(date +%s) )) python3 bench/judge_noise.py --repeats 4 --time-budget 1 \
    kernelbench/level1/19_ReLU.py kernelbench/level1/23_Softmax.py 2>&1 | tail -4 ) > "$OUT/g0.log" 2>&1 &
( half 1 16-31 "$(seq -s, 51 100)"
  timeout $(( T0 + 510 - $(date +%s) )) make -s eval GPU=h200 TASKS=kernelbench/level2 SOLUTIONS=kernels \
    EVAL_FLAGS="--time-budget 0.5" ) > "$OUT/g1.log" 2>&1 &
wait
CUDA_VISIBLE_DEVICES=0 timeout 40 python3 bench/flush_probe.py > results/h200-flush-probe.md 2>&1
cat results/h200-flush-probe.md results/h200-judge-noise.md
tail -n 3 "$OUT/g0.log" "$OUT/g1.log"
python3 - <<'EOF'
import json
judged = {json.loads(line)["task"] for line in open("results/h200.jsonl")}
keep = [line for line in open("results/h200-baseline.jsonl")
        if json.loads(line)["task"] in judged and json.loads(line).get("solution") is None
        and json.loads(line).get("compile_ms")]
with open("results/h200.jsonl", "a") as f:
    f.writelines(keep)
print(f"{len(keep)} reference-only baseline records appended for {len(judged)} judged tasks")
EOF
python3 evaluate.py --report-only --out results/h200
sed -n '/^| tasks/,/^$/p' results/h200.md
tar czf "$OUT/results.tgz" results build/logs 2>/dev/null
echo "=== done after $(( $(date +%s) - T0 )) s"
