#!/usr/bin/env bash
# One batched call on the lent GPU machine: everything a measurement needs, logs under $OUT.
#   bash bench/device_call.sh STEP...     steps: see the case below (info, test-gpu, eval-fast, noise, ...)
# Results land in results/ and are packed into $OUT/results.tgz (the device keeps nothing).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# the card this call got (h100 or h200: a call may come on either): the library's judging steps name their
# --gpu and results by it, so a comparison taken on an H100 never reads as the H200's
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -o 'H[12]00' | head -1 | tr H h)
CARD=${CARD:-h200}
STAMP=$(date +%m%d-%H%M)  # in the names of results a step writes afresh, so a second call that day keeps the first's
# results/, logs and out/ (no weights; out/*/generated, 274 MB at --generated 20000, the same seeds write
# again anywhere) packed into $OUT: at the end, and after each RL arm, so a call cut off by its time
# limit (whose $OUT still comes back) keeps every arm it finished
pack() { tar czf "$OUT/results${TAG:-}.tgz" --exclude='*.safetensors' --exclude='out/*/generated' results build/logs build/sft*.log out 2>/dev/null; }
# out/sft from carried/sft (a run with carry=["carried/sft","carried/rl-start"]) unless out/sft/.complete: a
# checkpoint unpacked whole, or a stage 1 that wrote its report (its last act), so one cut off by a call's
# end is not taken for a finished one
uncarry() {
  if ! test -f out/sft/.complete && test -d carried/sft; then
    rm -rf out/sft out/rl-start*; python3 bench/carry_checkpoint.py unpack carried/sft out/sft && touch out/sft/.complete
    # the start's held-out line only where it was measured on this kind of GPU: a line from another reads its speeds
    if test -f carried/rl-start/held_out.jsonl && python3 -c "import json, sys, cudal1
sys.exit(json.loads(open('carried/rl-start/held_out.jsonl').readline()).get('device') != cudal1.device_name('cuda'))"; then
      mkdir -p ${start:-out/rl-start}; cp carried/rl-start/held_out*.jsonl ${start:-out/rl-start}/
    else echo "carried/rl-start: measured on another GPU (or none named): the start is measured again here"; fi
  fi
}
for step in "$@"; do
  echo "=== $step $(date +%T)"
  case $step in
    info) nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv
          python3 -c "import torch, pybind11, safetensors, tqdm, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda)" ;;
    test-gpu) timeout "${TEST_BUDGET:-240}" python3 -m pytest -q -m gpu -s tests/test_judge.py tests/test_policy.py \
                tests/test_fastpath.py tests/test_fastpath_library.py 2>&1 | tail -25 ;;  # the cubin-launched kernels too
    drafts)  # drafts/LEVEL: solutions written without a GPU, judged here first (passing ones move to kernels/LEVEL)
          timeout "${BUDGET:-480}" python3 evaluate.py --tasks "kernelbench/${LEVEL:-level3}" --solutions "drafts/${LEVEL:-level3}" \
            --gpu $CARD --time-budget "${TIME_BUDGET:-0.5}" --out "results/$CARD-drafts-${LEVEL:-level3}-$STAMP" 2>&1 | tail -3 ;;
    drafts-vs-library)  # each drafts/LEVEL file beside the library's file for its task, in one run: a comparison
          # (then, here: python bench/promote_drafts.py results/CARD-drafts-vs-library-LEVEL-MMDD-HHMM.jsonl --apply)
          ids=$(ls "drafts/${LEVEL:-level2}" | grep -o '^[0-9]\+_' | tr -d _ | sort -un | paste -sd,)
          timeout "${BUDGET:-300}" python3 evaluate.py --tasks "kernelbench/${LEVEL:-level2}" --ids "$ids" \
            --solutions "kernels/${LEVEL:-level2},drafts/${LEVEL:-level2}" --gpu $CARD --time-budget "${TIME_BUDGET:-0.5}" \
            --out "results/$CARD-drafts-vs-library-${LEVEL:-level2}-$STAMP" 2>&1 | tail -3 ;;
    build-time) python3 bench/build_time.py 2>&1 | tail -3 ;;
    eval) make -s eval GPU=h200 TASKS=kernelbench SOLUTIONS=kernels 2>&1 | tail -3 ;;
    baseline)  # resumable: a cut-off run continues from results/h200-baseline.jsonl next call
          timeout "${BUDGET:-420}" python3 evaluate.py --tasks "${BASE_TASKS:-kernelbench}" --gpu h200 --compile \
            --time-budget 1 --out results/h200-baseline 2>&1 | tail -2 ;;
    compile-overhead) python3 bench/compile_overhead.py kernelbench/level1/19_ReLU.py 2>&1 | tail -4
          python3 bench/compile_overhead.py kernelbench/level1/1_Square_matrix_multiplication_.py 2>&1 | tail -4 ;;
    eval-fast)  # the library with 1 s of timed rounds per pair (TASKS, IDS pick a slice; EVAL_OUT splits runs over GPUs)
          case "${EVAL_OUT:-}" in *h100*|*h200*) [[ "$EVAL_OUT" == *"$CARD"* ]] || {
            echo "eval-fast: EVAL_OUT=$EVAL_OUT names another card than this call's $CARD; not run"; continue; } ;; esac
          timeout "${BUDGET:-420}" python3 evaluate.py --tasks "${TASKS:-kernelbench}" ${IDS:+--ids $IDS} --solutions kernels --gpu $CARD \
            ${EVAL_FLAGS---compile} --time-budget "${TIME_BUDGET:-1}" --out "${EVAL_OUT:-results/$CARD}" 2>&1 | tail -3 ;;
    eval-best)  # each level-1 task's best file in results/h200.jsonl, judged afresh -> results/h200-level1-best
          best=$(python3 -c "
import json, os
best = {}
for r in map(json.loads, open('results/h200.jsonl')):
    if r.get('correct') and r['task'].startswith('level1/') and os.path.exists(r['solution']) and r['speedup'] > best.get(r['task'], (0, ''))[0]:
        best[r['task']] = (r['speedup'], r['solution'])
print(','.join(s for _, s in best.values()))")
          timeout "${BUDGET:-480}" python3 evaluate.py --tasks kernelbench/level1 --solutions "$best" --gpu h200 \
            --time-budget "${TIME_BUDGET:-1}" --out results/h200-level1-best 2>&1 | tail -3 ;;
    noise-screen)  # A/A in RL's screening mode (evaluate.SCREEN): the noise the screen's 0.3 s budget leaves
          timeout "${BUDGET:-150}" python3 bench/judge_noise.py --screen --repeats 4 --out results/h200-judge-noise-screen \
            kernelbench/level1/19_ReLU.py kernelbench/level1/23_Softmax.py kernelbench/level1/1_Square_matrix_multiplication_.py 2>&1 | tail -7 ;;
    teacher|teacher-screen)  # the teacher's solutions of TEACHER_SEEDS judged (the JSONL resumes): teacher, the full
          # judge with a short timing (~215 a call: the >= 500-task check); teacher-screen, RL's screening mode (every
          # rule, 2 trials, 0.3 s of timing, builds beside measuring: 1.3 solutions a second, GPU-bound), for
          # the measured variants stage 1's contrastive pairs show. TEACHER_OUT names a fresh JSONL: the
          # judge resumes by solution name, so templates changed since (drawn names) need one to be judged again
          if [ $step = teacher ]; then seeds=0:720 out=teacher-h200 flags="--trials 4 --time-budget ${TIME_BUDGET:-0.1}"
          else seeds=720:2720 out=teacher-h200-screen flags=--screen; fi
          out=${TEACHER_OUT:-$out}
          python3 kernelbench/teacher.py --seeds "${TEACHER_SEEDS:-$seeds}" --out build/teacher > /dev/null
          timeout "${BUDGET:-540}" python3 evaluate.py --tasks build/teacher/tasks/levelG --solutions build/teacher/solutions/levelG \
            --gpu h200 $flags --out "results/$out" 2>&1 | tail -3 ;;
    teacher-heads)  # every teacher solution of HEAD_TASKS transposed-conv tasks beside its 3xTF32-head twin, one run
          timeout "${BUDGET:-300}" python3 bench/teacher_heads.py --tasks "${HEAD_TASKS:-24}" 2>&1 | tail -14 ;;
    throughput-*)  # issue 13's table over calls: throughput-cb, then throughput-a (results/h200-judge-throughput.{md,json} merge)
          timeout "${BUDGET:-570}" python3 bench/judge_throughput.py --arms "$(echo ${step#throughput-} | sed 's/./&,/g;s/,$//')" \
            ${THROUGHPUT_FLAGS:-} 2>&1 | tail -12 ;;
    noise)  # A/A: the reference judged as its own solution, 4 workers per task
          timeout "${BUDGET:-200}" python3 bench/judge_noise.py --repeats 4 --time-budget "${TIME_BUDGET:-1}" ${NOISE_TASKS:-kernelbench/level1/19_ReLU.py \
            kernelbench/level1/23_Softmax.py kernelbench/level2/12_Gemm_Multiply_LeakyReLU.py kernelbench/level1/1_Square_matrix_multiplication_.py} 2>&1 | tail -9 ;;
    flush-probe) timeout 60 python3 bench/flush_probe.py > results/h200-flush-probe.md 2>&1; cat results/h200-flush-probe.md ;;
    sample-speed) timeout "${BUDGET:-120}" python3 bench/sample_speed.py > results/h200-sample-speed.md 2>&1; cat results/h200-sample-speed.md ;;
    pretrained-shapes)  # Qwen2.5-Coder-0.5B/1.5B shapes: stage-1 MFU, decode, a stage-3 step (~2 min estimated) -> results/h200-pretrained-shapes.md
          timeout "${BUDGET:-420}" python3 bench/pretrained_shapes.py 2>&1 | tail -30 ;;
    rl-contrastive|rl-plain)  # one arm of the ablation from out/sft (which must exist), ABLATION_MINUTES long
          arm=${step#rl-}; timeout "${BUDGET:-300}" python3 train_rl.py --init out/sft --out out/rl-$arm $([ $arm = plain ] && echo --plain) \
            --time-limit "${ABLATION_MINUTES:-2}" ${RL_FLAGS:-} 2>&1 | tail -20 ;;
    overhead) python3 bench/launch_overhead.py kernelbench/level1/22_Tanh.py kernels/level1/22_Tanh.py \
            kernelbench/level1/19_ReLU.py kernels/level1/19_ReLU.py kernelbench/level1/48_Mean_reduction_over_a_dimension.py \
            kernels/level1/48_Mean_reduction_over_a_dimension.py > results/h200-launch-overhead.md 2>&1; cat results/h200-launch-overhead.md ;;
    sft) timeout "${BUDGET:-300}" make -s sft SFT_FLAGS="${SFT_FLAGS:-}" 2>&1 | tail -30 ;;
    ablation)  # issue 15's experiment from out/sft, both arms for each of SEEDS; a seed's two runs are ~2 x
               # (ABLATION_MINUTES + two held-out evaluations, not yet timed): one seed per call, then ablation-report
          timeout "${BUDGET:-540}" make -s rl-ablation GPU=h200 SEEDS="${SEEDS:-1}" ABLATION_MINUTES="${ABLATION_MINUTES:-1.5}" 2>&1 | tail -30 ;;
    seed-line)  # issue 14: stage 1 at the GPU recipe with --seed SEED (and SFT_FLAGS), then its greedy line on
                # HELD (128) held-out generated tasks and the 20 level-2 ones -> results/curriculum-CARD-SFT_TAG-sSEED.md,
                # out/hHELD-SFT_TAG-sSEED (~430 s on an H100 at the default's 4500 steps, ~550 s the first call, which
                # builds the data; 128 tasks: a 95% band of about +-7% on one build's geomean);
                # the folders carry SFT_TAG, so two recipes of one seed on one machine never share (or resume) one;
                # the generated data is shared (train_sft --generated-dir): a later build on a warm machine reads it;
                # a call cut off in the line (a first call on a slow H100 can pass 600 s) is the same command again on
                # the warm machine: a finished stage 1 (its report, train_sft's last act) is not run twice
          s=${SEED:-1}; t=${SFT_TAG:-stage1}; r=results/curriculum-$CARD-$t-s$s; mkdir -p build
          if test -f out/sft-$t-s$s/report.json; then
            echo "out/sft-$t-s$s: stage 1 finished in an earlier call, its held-out line only"
            cp out/sft-$t-s$s/report.md $r.md; cp out/sft-$t-s$s/report.json $r.json  # results/ is not kept between calls
          else
            python3 train_sft.py --out out/sft-$t-s$s --rounds 0 --held-out-tasks 0 --log-every 500 --seed $s \
              --generated-dir out/shared/generated ${SFT_FLAGS:-} --report $r > build/sft-$t-s$s.log 2>&1
            grep -h "read again\|data ready" build/sft-$t-s$s.log; tail -3 build/sft-$t-s$s.log
          fi
          pack  # the report comes back even if the call's time runs out during the line below
          python3 train_rl.py --init out/sft-$t-s$s --out out/h${HELD:-128}-$t-s$s --steps 0 --held-out-tasks "${HELD:-128}" \
            --resample "${RESAMPLE:-0}" --second-try 0 2>&1 | tail -1 ;;
    ablation-arms)  # issue 15 over calls: out/sft from carried/sft (uncarry) or else stage 1 (the GPU default,
                    # --fill-tokens 90000 since 2026-12-06, 120000 tasks and 4500 steps since 2026-12-07, ~7 min on
                    # an H100 with its data; every stage-3 result before then started from 3000 steps,
                    # results/curriculum-CARD-fill*.md) -> results/curriculum-CARD-SFT_TAG.md,
                    # packed into $OUT/sft to come back (copy it to carried/sft here); the starting policy's
                    # held-out line once (carried/rl-start too); then each ARMS entry (arm-seed, e.g.
                    # "contrastive-1 plain-1") not yet run, while ARM_SECONDS of the call's CALL_SECONDS are left
          # SECOND_TRY=refine: the second try rewrites the first answer's program (its start line kept apart);
          # HELD=128: the line on 128 held-out generated tasks (+-7% a build, 95%) instead of 32 (+-9-13%)
          start=out/rl-start${SECOND_TRY:+-$SECOND_TRY}${HELD:+-h$HELD}
          held="--held-out-tasks ${HELD:-32} --resample ${RESAMPLE:-1} --second-try ${SECOND_TRY:-1}"
          uncarry
          if ! test -f out/sft/.complete; then
            rm -rf out/rl-start*; mkdir -p build
            python3 train_sft.py --out out/sft --rounds 0 --held-out-tasks 0 --log-every 500 ${SFT_FLAGS:-} \
              --report "results/curriculum-$CARD-${SFT_TAG:-stage1}" > build/sft.log 2>&1; tail -12 build/sft.log
            test -f out/sft/report.json && touch out/sft/.complete && python3 bench/carry_checkpoint.py pack out/sft "$OUT/sft"
          fi
          # the start's line: kept where $start has one taken on today's held-out task code, else measured
          # RESAMPLE=K: K sampled answers per held-out task (train_rl --resample; a carried start line has 1);
          python3 train_rl.py --init out/sft --out $start --steps 0 $held 2>&1 | tail -4
          for a in ${ARMS:-contrastive-1 plain-1}; do
            arm=${a%-*}; s=${a#*-}; d=out/rl-$arm-s$s${SECOND_TRY:+-$SECOND_TRY}${ARM_TAG:-}  # ARM_TAG (e.g. -lr1e-4)
            # names a variant run with RL_FLAGS
            test -f $d/log.jsonl && continue
            [ $((${CALL_SECONDS:-570} - SECONDS)) -lt "${ARM_SECONDS:-125}" ] && { echo "no time left for $a"; break; }
            mkdir -p $d; cp $start/held_out.jsonl $start/held_out_answers.jsonl $d/
            python3 train_rl.py --init out/sft --out $d --seed $s $([ $arm = plain ] && echo --plain) \
              --time-limit "${ABLATION_MINUTES:-1}" --held-out-every 1000 $held ${RL_FLAGS:-} 2>&1 | tail -5
            pack
          done ;;
    judge-phases)  # issue 13: where a screened candidate's ~0.6 s on the GPU goes -> results/CARD-judge-phases-MMDD-HHMM.md (~1 min)
          timeout "${BUDGET:-180}" python3 bench/judge_phases.py --out "results/$CARD-judge-phases-$STAMP.md" 2>&1 | tail -16 ;;
    rl-speed)  # issue 13: stage-3 steps per minute under each of RL_SPEED_RUNS' judge settings (screen: --judge
               # screen --prewarm 0, full: --judge full --prewarm 0, prewarm: full with --prewarm 1, train_rl's default),
               # from out/sft, the same seed and settings,
               # RL_SPEED_MINUTES each (~2 runs fit a call at the defaults) -> results/CARD-rl-speed-MMDD-HHMM.md
          uncarry
          dirs=
          for run in ${RL_SPEED_RUNS:-full prewarm}; do
            case $run in screen) flags="--judge screen --prewarm 0" ;; full) flags="--judge full --prewarm 0" ;; prewarm) flags="--judge full --prewarm 1" ;;
                         *) echo "rl-speed: unknown run $run (screen, full, prewarm)"; continue ;; esac
            [ $((${CALL_SECONDS:-570} - SECONDS)) -lt "${RL_SPEED_SECONDS:-210}" ] && { echo "no time left for $run"; break; }
            rm -rf out/rl-speed-$run build/kernels  # a cold build cache each: the same seed samples the same answers,
            python3 -c "import cudal1; cudal1.launcher()"  # but the launcher built (~11 s once per machine), as make train finds it
            timeout "${RL_SPEED_SECONDS:-210}" python3 train_rl.py --init out/sft --out out/rl-speed-$run $flags \
              --held-out-tasks 0 --time-limit "${RL_SPEED_MINUTES:-1.5}" 2>&1 | tail -3
            dirs="$dirs out/rl-speed-$run"; pack
          done
          python3 bench/rl_speed.py $dirs --out "results/$CARD-rl-speed-$STAMP.md" 2>&1 | tail -6 ;;
    held-out-ceiling)  # issue 15: every teacher move (and teacher.composed's no-op dropped + one more) on the 32
                       # held-out generated tasks beside a run's greedy answers
                       # (the carried start's: carry=["carried/rl-start"]), one judge call -> results/CARD-held-out-ceiling-MMDD-HHMM.md
          timeout "${BUDGET:-300}" python3 bench/held_out_ceiling.py --answers "${CEILING_ANSWERS:-carried/rl-start/held_out_answers.jsonl}" \
            --out "results/$CARD-held-out-ceiling-$STAMP.md" 2>&1 | tail -8 ;;
    level2-vs-library)  # issue 15: the held-out level-2 answers of every run under out/ (or VS_RUNS) beside the library's
                        # files, judged again in full, each side's fastest 5 times more
                        # -> results/CARD-level2-vs-library-MMDD-HHMM.md and .jsonl (untimed; 480 s allowed)
          timeout "${BUDGET:-480}" python3 bench/level2_vs_library.py ${VS_RUNS:-$(ls -d out/rl-*)} \
            --out "results/$CARD-level2-vs-library-$STAMP.md" 2>&1 | tail -30 ;;
    probe)  # does the policy read a prompt that shows a solution? bench/exemplar_probe.py on out/sft, with the first
            # contrastive arm's tasks and bank, all prompts in one batch on the GPU -> results/PROBE_NAME.md (exemplar-probe-h200)
          timeout "${BUDGET:-200}" python3 bench/exemplar_probe.py --init out/sft --run out/rl-contrastive-s1 --tasks 8 \
            --samples 4 --shapes ref,ref+best,best,"ref x3" --out "results/${PROBE_NAME:-exemplar-probe-h200}.md" 2>&1 | tail -8 ;;
    ablation-report)  # every seed's runs under out/ in one report and picture -> results/learning-h200.{md,svg}
          python3 bench/rl_report.py ${REPORT_RUNS:-$(ls -d out/rl-contrastive-s? out/rl-plain-s?)} --out "results/${REPORT_NAME:-learning-h200}.md" 2>&1 | tail -30 ;;
    carry-sft)  # out/sft's weights in bf16 parts under $OUT/sft, to bring back here (the tool returns <= 16 MiB a file)
          python3 bench/carry_checkpoint.py pack out/sft "$OUT/sft" ;;
    uncarry-sft)  # a carried checkpoint (copied into carried/sft here, passed with carry=["carried/sft"]) back to out/sft
          python3 bench/carry_checkpoint.py unpack carried/sft out/sft ;;
    held-out-sft)  # out/sft (from ablation-arms, or uncarry-sft) resumed past its last step: train_sft's own held-out
                   # line, greedy and 4 sampled answers per held-out task -> results/curriculum-CARD-SFT_TAG-held-out.md
          timeout "${BUDGET:-480}" python3 train_sft.py --out out/sft --rounds 0 ${SFT_FLAGS:-} \
            --report "results/curriculum-$CARD-${SFT_TAG:-stage1}-held-out" 2>&1 | tail -8 ;;
    curriculum)  # issue 14: stages 1-2 on the curriculum default, the held-out line -> results/curriculum-CARD.{md,json}
          timeout "${BUDGET:-540}" python3 train_sft.py --out out/sft --report results/curriculum-$CARD ${SFT_FLAGS:-} 2>&1 | tail -30 ;;
    train) make -s train 2>&1 | tail -40 ;;
    *) echo "unknown step $step" ;;
  esac
done
pack
echo "=== done $(date +%T)"
