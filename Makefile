# Two commands do all the set-up: `make demo` (the main job, offline) and `make test`.
# Each creates .venv on first use and installs the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True
export CUDA_HOME ?= /usr/local/cuda

$(BIN)/kernel-refine-installed: pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# --no-cache-dir: the wheels (about 4 GB with torch's CUDA libraries) are not kept a second time
	# CUDA build of torch (compiles CUDA extensions here with nvcc, even without a GPU); see docs/setup.md
	$(BIN)/pip install -q --no-cache-dir "torch==2.14.1"
	# ray: the --executor ray backend (docs/scaling.md), tested in CI on a local Ray instance
	$(BIN)/pip install -q --no-cache-dir -e ".[dev,ray]"
	touch $@

install: $(BIN)/kernel-refine-installed

demo: install
	$(BIN)/python -m agent.refine --model replay:experiments/demo/demo.jsonl --backend cpp --size small \
	  --problems suite:level1/1,suite:level1/19,suite:level2/1 --turns 4 --feedback G+E+P --out runs

# -X faulthandler: a crash outside any test (at interpreter exit, say) still prints every thread's stack
test: install
	$(BIN)/python -X faulthandler -m pytest -q

gpu-test: install
	$(BIN)/python -m pytest -q -m gpu

# the GPU path on this host in one command (docs/gpu-validation.md): builds, GPU tests, timing
# stability, throughput, Ray; results in $(GPU_CHECK_OUT). Needs no install: a GPU host's own python3
# and the device bundle are enough.
GPU_CHECK_OUT ?= gpu-check
gpu-check:
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY)) -m experiments.bench.gpu_check --out $(GPU_CHECK_OUT)

# the packages a registry-less GPU host lacks, as one archive (docs/gpu-validation.md)
device-bundle: install
	$(BIN)/python -m experiments.bench.device_bundle --ray --out .device/site.tar.xz

.PHONY: install demo test gpu-test gpu-check device-bundle
