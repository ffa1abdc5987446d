# cudal1 runbook. `make help` lists the targets; times are for the machines named beside them.
#   make test                     CPU tests (into .venv where python3 lacks our deps; ~11 min, results/tests-cpu.md)
#   make eval GPU=h200            judge kernels/ against kernelbench/ and write results/h200.md
#   make train                    stage 1 -> 2 -> 3 on the bundled default (GPU if present, else CPU)

GPU ?=
TASKS ?= kernelbench/level1
IDS ?=
SOLUTIONS ?= kernels
EVAL_FLAGS ?= --compile
DEPS := torch numpy pybind11 safetensors tqdm pytest

# ---- python: python3 itself where it has our dependencies (the GPU machine, no network),
# else a virtual environment made by `make setup` (CPU torch from the local wheel).
ifndef PYTHON
  HAVE_DEPS := $(shell python3 -c "import importlib.util as u,sys; sys.exit(any(u.find_spec(m) is None for m in '$(DEPS)'.split()))" 2>/dev/null && echo yes)
  ifeq ($(HAVE_DEPS),yes)
    PYTHON := python3
  else
    PYTHON := .venv/bin/python
  endif
endif

# ---- native builds: arch from GPU= (its entry in evaluate.GPUS, the one table of GPUs), else from
# the GPU present, else Hopper (compile-only here). python3, not PYTHON: it works before `make setup`.
ifneq ($(GPU),)
  GPU_ARCH := $(shell python3 -c "import evaluate; print(evaluate.GPUS['$(GPU)'][3])" 2>/dev/null)
  ifeq ($(GPU_ARCH),)
    $(error unknown GPU=$(GPU): use one of $(shell python3 -c "import evaluate; print(*evaluate.GPUS)"))
  endif
  ARCH ?= $(GPU_ARCH)
endif
ARCH ?= $(or $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | sed 's/\.//;s/^/sm_/'),sm_90)
NVCC ?= nvcc
CXX ?= g++
PYBIND_INC = $(shell $(PYTHON) -m pybind11 --includes)

.PHONY: help setup test test-gpu eval baseline sft rl train clean

help:
	@sed -n '1,5p' Makefile

setup: $(if $(filter .venv/bin/python,$(PYTHON)),.venv/.installed)

.venv/.installed: requirements.txt
	python3 -m venv .venv
	.venv/bin/pip install -q -r requirements.txt
	touch $@

# CPU tests; GPU tests are marked and skip themselves without a GPU (~3 min on 2 cores)
test: setup
	$(PYTHON) -m pytest -q tests

# the GPU-only tests (side streams, illegal addresses): run on the GPU machine
test-gpu: setup
	$(PYTHON) -m pytest -q -m gpu tests

# judge SOLUTIONS (folders or files, comma-separated) against TASKS (a level folder, a file, or
# IDS=1,12,19); ~1 s per solution + builds
eval: setup
	$(PYTHON) evaluate.py --tasks $(TASKS) $(if $(IDS),--ids $(IDS)) --solutions $(SOLUTIONS) \
		$(if $(GPU),--gpu $(GPU)) --out results/$(or $(GPU),cpu) $(EVAL_FLAGS)

# time every reference alone (eager and torch.compile): results/<gpu>-baseline.md
baseline: setup
	$(PYTHON) evaluate.py --tasks $(TASKS) $(if $(IDS),--ids $(IDS)) \
		$(if $(GPU),--gpu $(GPU)) --out results/$(or $(GPU),cpu)-baseline --compile

clean:
	rm -rf build

# stages 1-2: SFT on kernels/, then self-training rounds judged by evaluate.py (train_sft.py).
# CPU: a 1.1M-parameter model on the teacher's PyTorch-level solutions of 8000 generated tasks, 1 round on
# 2 of them, then the held-out line on 16 held-out generated tasks: ~15.5 min on 2 cores;
# GPU: ~27M parameters on kernels/ + the teacher's solutions of 120000 generated tasks, then the held-out
# line (~13 min on the H200, estimated: 9.2 min measured without stage 2 at 60000 tasks and 3000 steps, and
# stage 1's 4500 steps take ~100 s more, the data ~40 s more). Writes out/sft (run again to resume; rm -rf out/sft to restart).
# INIT=DIR: fine-tune a pretrained model's Hugging Face folder (Llama, Qwen2, Qwen3) instead of a fresh one.
SFT_FLAGS ?=
INIT ?=
sft: setup
	$(PYTHON) train_sft.py --out out/sft $(if $(INIT),--init $(INIT)) $(SFT_FLAGS)

# stage 3: contrastive RL from out/sft, or from INIT=DIR (train_rl.py). CPU: 4 fresh generated tasks
# (4 cheap level-1 tasks from a checkpoint without generated ones), 2 per step x 4 answers, 10 steps, ~25 s; GPU: 8 level-1 tasks (from a curriculum checkpoint
# 16 fresh generated tasks, of seeds stage 1 never drew), 4 per step x 8 answers, for 3.5 min.
# RL_MINUTES=N stops (and saves) after the step that passes N minutes. Writes out/rl
# (resumes); each task's best correct answer lands in out/rl/candidates/ for review, never kernels/.
RL_FLAGS ?=
RL_MINUTES ?=
rl: setup
	$(PYTHON) train_rl.py --init $(or $(INIT),out/sft) --out out/rl $(if $(RL_MINUTES),--time-limit $(RL_MINUTES)) $(RL_FLAGS)

# stage 1 -> 2 -> 3 on the bundled default: CPU 16 min on 2 cores (measured, results/train-cpu.md); H200 ~18 min by its
# parts (not yet timed whole)
# INIT=DIR: stages 1-2 fine-tune that pretrained model, and stage 3 goes on from out/sft.
train: setup
	$(MAKE) --no-print-directory sft
	$(MAKE) --no-print-directory rl INIT=

# the paper's ablation: contrastive vs --plain RL from the same out/sft, for each of SEEDS, the same
# steps and ABLATION_MINUTES each, then results/learning-<gpu>.md (reward chart, held-out geomean per
# run and its picture learning-<gpu>.svg, best speedups). The policy every run starts from is measured
# on the held-out split once (out/rl-start, remade when out/sft changes) and that line is each run's step 0;
# a seed costs ~2 x (ABLATION_MINUTES + one held-out evaluation). Each run measures the split only at
# its end (--held-out-every 1000): with its second try (--second-try) and that try's control
# (--resample: a second answer to the plain prompt, sampled) an evaluation costs about 1.5 minutes;
# RL_FLAGS="--resample K" (start line and runs alike) samples K and adds the '... sampled' line, their mean
# Run again (more SEEDS, or after a machine's time limit cut it off), it goes on where it stopped: a run
# resumes for the minutes it has left, one that had them all takes no more steps (train_rl --time-limit).
ABLATION_MINUTES ?= 3
SEEDS ?= 1
.PHONY: rl-ablation
rl-ablation: setup out/rl-start/held_out.jsonl
	for s in $(SEEDS); do for arm in contrastive plain; do d=out/rl-$$arm-s$$s; mkdir -p $$d; \
	  test -f $$d/held_out.jsonl || cp out/rl-start/held_out.jsonl out/rl-start/held_out_answers.jsonl $$d/; \
	  $(PYTHON) train_rl.py --init out/sft --out $$d --seed $$s $$([ $$arm = plain ] && echo --plain) \
	    --time-limit $(ABLATION_MINUTES) --held-out-every 1000 --resample 1 $(RL_FLAGS) || exit 1; done; done
	$(PYTHON) bench/rl_report.py $(foreach s,$(SEEDS),out/rl-contrastive-s$(s) out/rl-plain-s$(s)) --out results/learning-$(or $(GPU),cpu).md

out/rl-start/held_out.jsonl: out/sft/model.safetensors
	rm -rf out/rl-start
	$(PYTHON) train_rl.py --init out/sft --out out/rl-start --steps 0 --resample 1 $(RL_FLAGS)

# ---- pattern rules: one native source -> one pybind11 module named k<stem>
# CUDART=shared links the CUDA runtime torch has already loaded instead of a private static copy.
# Judged both ways on the H200 (results/h200-module-overhead.md) it made no clear difference to a
# small kernel's cost per call: the pybind11 call itself costs ~5 us there, either way.
CUDART ?= static
build/kernels/%.so: build/kernels/%.cu
	$(NVCC) -O3 -arch=$(ARCH) -std=c++17 -cudart $(CUDART) -shared -Xcompiler -fPIC $(PYBIND_INC) \
		-DMODULE_NAME=k$* $< -o $@.tmp$$$$ && mv -f $@.tmp$$$$ $@

build/kernels/%.so: build/kernels/%.cpp
	$(CXX) -O3 -march=native -fopenmp -std=c++17 -shared -fPIC $(PYBIND_INC) \
		-DMODULE_NAME=k$* $< -o $@.tmp$$$$ && mv -f $@.tmp$$$$ $@

# ---- the CPU's fast path: host C++ with no pybind11 (cudal1.load_c), called through ctypes: ~0.3 s
build/kernels/%.lib.so: build/kernels/%.cc
	$(CXX) -O3 -march=native -ffast-math -fopenmp -std=c++17 -shared -fPIC $< -o $@.tmp$$$$ && mv -f $@.tmp$$$$ $@

# ---- the fast path: device code only (cudal1.load_cuda). No host compiler, no pybind11: a cubin
# for ARCH that the prebuilt launcher (launcher.cu) loads and launches. On the 2-core CPU machine
# a small kernel builds in ~0.5 s this way against ~11 s as a pybind11 module.
build/kernels/%.cubin: build/kernels/%.cu
	$(NVCC) -cubin -O3 -arch=$(ARCH) -std=c++17 $< -o $@.tmp$$$$ && mv -f $@.tmp$$$$ $@
