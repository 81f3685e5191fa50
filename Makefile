# make demo: set up .venv, build, run the quickstart on tpu.   make test: every test.
PYTHON_SYS ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
BUILD := build
export CCACHE_DIR ?= $(HOME)/.cache/torch_tpu-ccache
# Paths relative to the checkout, so every clone (CI, worktrees) shares cache entries.
export CCACHE_BASEDIR ?= $(CURDIR)

.PHONY: demo test torchtpu-venv test-side-by-side test-wheel test-modules-full serving-deps test-serving torchrec-deps test-torchrec test-models test-dist examples-dist examples-torchtitan test-cpp test-py test-ops-full fuzz test-memory build deps bench clean

demo: build
	$(PY) examples/quickstart.py

# Compiled programs persist between test runs on this machine, so a repeated run compiles only
# what changed. The C++ tests and one pytest file run with the persistent tier off, so that
# correctness never depends on it.
TEST_CACHE_DIR ?= $(HOME)/.cache/torch_tpu-ci
TEST_CACHE_MAX_BYTES ?= 2G

# The serving suite (tests/serving, minutes per engine) runs in `make test-serving`; `make test` installs
# the serving extra and runs its representative tests: vLLM greedy equals Hugging Face, one server request.
# Likewise TorchRec: `make test` installs its extra and runs the unsharded EmbeddingBagCollection, DLRM (10 SGD
# steps) and fixed-shape DLRM tests and the 2-process table-, row- and column-wise sharded runs (fixed-shape
# inputs, against the unsharded model, 0 programs after warm-up) with their DCP round trip (Strict); the whole
# tests/torchrec suite runs in `make test-torchrec`.
TORCHREC_QUICK := tests/torchrec/test_torchrec_unsharded.py::test_embedding_bag_collection_forward_backward \
  tests/torchrec/test_torchrec_unsharded.py::test_fixed_shape_dlrm_compiles_once \
  'tests/torchrec/test_torchrec_sharded.py::test_fixed_shape_dmp_compiles_nothing_after_warm_up[row_wise-adagrad]' \
  'tests/torchrec/test_torchrec_sharded.py::test_fixed_shape_dmp_compiles_nothing_after_warm_up[table_wise-sgd]' \
  'tests/torchrec/test_torchrec_sharded.py::test_fixed_shape_dmp_compiles_nothing_after_warm_up[column_wise-sgd]' \
  tests/torchrec/test_torchrec_unsharded.py::test_dlrm_steps_equal_cpu \
  tests/torchrec/test_torchrec_sharded.py::test_fused_kernel_names_unfused_tpu \
  tests/torchrec/test_torchrec_sharded.py::test_unfused_tpu_width_not_multiple_of_16_names_tables
SERVING_QUICK := 'tests/serving/test_vllm.py::test_llama_greedy_equals_hf[strict]' \
  tests/serving/test_server.py::test_completions_greedy_equals_hf \
  tests/serving/test_server.py::test_streaming_concatenates_to_the_full_text

test: build $(VENV)/.serving $(VENV)/.torchrec
	cd $(BUILD) && TORCH_TPU_CACHE=0 ctest --output-on-failure
	TORCH_TPU_CACHE=0 $(PY) -m pytest tests/test_views.py -x -q -p no:cacheprovider
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests -x -q -p no:cacheprovider --ignore=tests/serving --ignore=tests/torchrec
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest $(SERVING_QUICK) -x -q -p no:cacheprovider
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest $(TORCHREC_QUICK) -x -q -p no:cacheprovider
	timeout $(TEST_WHEEL_TIMEOUT) tools/test_wheel.sh

# The Hugging Face model coverage suite: every architecture of tests/models/model_zoo.py in every eager mode
# (`make test` runs the entries marked quick); regenerates docs/model_coverage.md. Then every transformers
# model type (test-models-auto, about 4 hours here) and its debug-mode subset: fails when a type fails, crashes
# or takes over 90 s.
# One process per slice of the table: a single process running all of them exceeds vm.max_map_count (65530
# memory mappings, from the XLA:CPU programs it keeps loaded) and crashes.
MODEL_CHUNKS ?= 8
test-models: build
	status=0; for i in $$(seq 0 $$(($(MODEL_CHUNKS) - 1))); do \
	  TORCH_TPU_MODELS=all TORCH_TPU_MODELS_CHUNK=$$i/$(MODEL_CHUNKS) TORCH_TPU_MODEL_COVERAGE=docs/model_coverage.md \
	  TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests/models -q -p no:cacheprovider || status=1; done; \
	$(MAKE) test-models-auto || status=1; \
	$(MAKE) test-models-auto SWEEP_ARGS=--debug-subset || status=1; exit $$status

# The multiprocess torch.distributed tests (tpu_dist) in every eager mode; `make test` runs the
# heaviest of them (DDP, FSDP2, DTensor, torchrun) in strict mode only.
test-dist: build
	TORCH_TPU_DIST_ALL_MODES=1 TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests/test_dist_collectives.py tests/test_dist_training.py tests/test_dist_multihost.py tests/test_dist_examples.py tests/test_dist_staging.py \
	  -x -q -p no:cacheprovider

# The distributed examples over tpu_dist; their optional dependencies (Ray) come from
# requirements-examples.txt, which `make test` does not install (tests/test_dist_examples.py skips
# without Ray).
$(VENV)/.examples: requirements-examples.txt | $(VENV)/.deps
	$(PIP) install -q -r requirements-examples.txt
	touch $@

examples-dist: build $(VENV)/.examples
	$(PY) examples/ray_ddp.py

# TorchTitan's debug Llama with FSDP2 on 2 processes; its packages go to a folder of their own
# (see requirements-examples-torchtitan.txt for why not .venv).
TITAN_DEPS := $(BUILD)/torchtitan-deps
$(TITAN_DEPS)/.done: requirements-examples-torchtitan.txt
	$(PIP) install -q --no-deps --target $(TITAN_DEPS) -r requirements-examples-torchtitan.txt
	touch $@

examples-torchtitan: build $(TITAN_DEPS)/.done
	PYTHONPATH=$(CURDIR):$(TITAN_DEPS) OMP_NUM_THREADS=1 $(VENV)/bin/torchrun --standalone --nproc-per-node 2 \
	  examples/torchtitan_fsdp.py --steps 5

# The OpInfo harness over all six dtypes (float32, bfloat16, float16, int64, int32, bool); regenerates
# docs/op_coverage.md. OPINFO_MAX_SAMPLES=0 runs every sample input (hours); the default (8 per op and
# dtype, spread over its samples) is what the committed table was made with.
OPINFO_MAX_SAMPLES ?= 8
test-ops-full: build
	$(PY) tests/opinfo/harness.py --max-samples $(OPINFO_MAX_SAMPLES) --json build/opinfo.json \
	  --docs docs/op_coverage.md

# The differential fuzzer (tools/fuzz.py, docs/reliability.md): N seeded random programs (seeds
# FUZZ_START..FUZZ_START+N-1) on CPU and on tpu in strict, fused, debug and compiled; failures are shrunk to
# standalone reproducers in build/fuzz. `make test` runs the fixed seed set of tests/test_fuzz.py.
N ?= 5100
FUZZ_START ?= 0
JOBS ?= 2
fuzz: build
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) tools/fuzz.py -n $(N) --start $(FUZZ_START) --jobs $(JOBS) --json build/fuzz/results.json

# tests/test_memory_stability.py at the 1000 steps of docs/reliability.md (`make test` runs 200).
test-memory: build
	TORCH_TPU_MEMORY_STEPS=1000 TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests/test_memory_stability.py -q -s -p no:cacheprovider

# PyTorch's ModuleInfo database (tests/test_module_db.py) over every sample input, float32 and bfloat16, in
# every eager mode; `make test` runs float32 with one sample per module.
test-modules-full: build
	TORCH_TPU_MODULE_DB=full TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests/test_module_db.py -q -p no:cacheprovider

# Serving with vLLM on tpu (torch_tpu.vllm): vllm 0.32.0 with --no-deps (its metadata pins CUDA
# packages and an older transformers) over its runtime requirements, torch and transformers held.
$(VENV)/.serving: requirements-vllm.txt constraints-vllm.txt | $(VENV)/.deps
	$(PIP) install -q -r requirements-vllm.txt -c constraints-vllm.txt
	$(PIP) install -q --no-deps vllm==0.32.0
	touch $@

serving-deps: $(VENV)/.serving

# TorchRec on tpu (docs/torchrec.md): torchrec 1.9.2 with --no-deps (its metadata asks for the CUDA
# fbgemm-gpu) over fbgemm-gpu-cpu and its other runtime requirements, torch held.
$(VENV)/.torchrec: requirements-torchrec.txt constraints-torchrec.txt | $(VENV)/.deps
	$(PIP) install -q -r requirements-torchrec.txt -c constraints-torchrec.txt
	$(PIP) install -q --no-deps torchrec==1.9.2
	touch $@

torchrec-deps: $(VENV)/.torchrec

test-torchrec: build $(VENV)/.torchrec
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests/torchrec -x -q -p no:cacheprovider

test-serving: build $(VENV)/.serving
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) -m pytest tests/serving -x -q -p no:cacheprovider

# Google's TorchTPU (PyPI torch-tpu) in a venv of its own, for benchmarks/side_by_side.py; not part of `make test`.
# It runs on the lammps-jax-pjrt-cpu XLA CPU plugin through tools/torchtpu_shim (TPU_LIBRARY_PATH names the
# shim, which drops the TPU-only client option). libtpu is left out: TorchTPU wants >= 0.0.50 and rejects the
# version string of the 0.0.42.1 on this machine's index ("expected version string ... got '0.0.42.1'"); without
# it TorchTPU takes the plugin from TPU_LIBRARY_PATH, which is all the shim needs.
# (The check's -P: the checkout's own torch_tpu/ must not shadow TorchTPU's.)
TORCHTPU_VENV := $(BUILD)/torchtpu-venv
TORCHTPU_PY := $(TORCHTPU_VENV)/bin/python
$(TORCHTPU_VENV)/.done: requirements-torchtpu.txt tools/torchtpu_shim/shim.c | $(VENV)/.deps
	test -x $(TORCHTPU_PY) || $(PYTHON_SYS) -m venv $(TORCHTPU_VENV)
	$(TORCHTPU_PY) -m pip install -q -r requirements-torchtpu.txt
	$(TORCHTPU_PY) -m pip install -q --no-deps torch-tpu==0.2.0 lammps-jax-pjrt-cpu==0.11.2
	cc -O2 -Wall -shared -fPIC -o $(TORCHTPU_VENV)/pjrt_shim.so tools/torchtpu_shim/shim.c -ldl \
	  -I"$$($(PY) -c 'import os, xla_plugins.xla_cpu_pjrt as p; print(os.path.join(os.path.dirname(p.__file__), "include"))')" \
	  -DSHIM_DEFAULT_PLUGIN="\"$$($(TORCHTPU_PY) -c 'import lammps_jax_pjrt_cpu as p; print(p.PLUGIN_PATH)')\""
	TPU_LIBRARY_PATH=$(TORCHTPU_VENV)/pjrt_shim.so $(TORCHTPU_PY) -P -c 'import torch, torch_tpu._loader as l; \
	  l._init_device("tpu"); print("TorchTPU on the shim:", (torch.ones(3, device="tpu") * 2).sum().item())'
	touch $@

torchtpu-venv: $(TORCHTPU_VENV)/.done

# side_by_side.py's plumbing (two engines, two steps; ~20 s, so not in `make test`).
test-side-by-side: build
	$(PY) -m pytest benchmarks/test_side_by_side.py -q -p no:cacheprovider

# The pip path from a clean clone of HEAD (tools/test_wheel.sh): `pip wheel --no-build-isolation .` in a
# build venv, the wheel in a fresh venv with only torch 2.13.0 CPU + xla-cpu-pjrt, a smoke test and the
# doctor there, the torch mismatch check, the extras' resolution, `pip install --no-build-isolation .`.
# The last step of `make test` (~4.6 min with the cache `make build` warms: the clone's builds link only).
# It tests the committed HEAD, not uncommitted changes.
TEST_WHEEL_TIMEOUT ?= 1500
test-wheel: $(VENV)/.system
	timeout $(TEST_WHEEL_TIMEOUT) tools/test_wheel.sh

# System packages: the compiler cache, GoogleTest and OpenSSL's libcrypto (Debian).
$(VENV)/.system:
	@if ! command -v ccache >/dev/null || [ ! -f /usr/include/gtest/gtest.h ] || [ ! -f /usr/include/openssl/hmac.h ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq ccache libgtest-dev libssl-dev; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq ccache libgtest-dev libssl-dev; fi; fi
	@mkdir -p $(VENV) && touch $@

# Python packages: torch from the CPU wheel (never a CUDA build), the CPU PJRT plugin.
$(VENV)/.deps: requirements.txt | $(VENV)/.system
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	touch $@

deps: $(VENV)/.system $(VENV)/.deps

build: deps
	$(PY) tools/configure.py $(BUILD)
	cmake --build $(BUILD)
	@test -f $(VENV)/.editable || { $(PIP) install -q --no-build-isolation --no-deps \
	  --config-settings editable_mode=compat -e . && touch $(VENV)/.editable; }

bench: build
	$(PY) benchmarks/op_overhead.py

clean:
	rm -rf $(BUILD) torch_tpu/*.so

# Every transformers model type (tests/models/auto_zoo.py: the table generated from transformers' auto
# mappings) on tpu against float64 CPU, each type in its own process with a 90 s limit; writes
# docs/model_coverage_auto.{json,md}. Not part of `make test`. SWEEP_ARGS: e.g. --types llama,bert --debug.
.PHONY: test-models-auto
test-models-auto: build
	TORCH_TPU_CACHE_DIR=$(TEST_CACHE_DIR) TORCH_TPU_CACHE_MAX_BYTES=$(TEST_CACHE_MAX_BYTES) \
	  $(PY) tools/model_sweep.py $(SWEEP_ARGS)
