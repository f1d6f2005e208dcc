# Two commands, each works on a fresh machine (Python >= 3.11 with venv, a C/C++ compiler, make):
#   make demo   - set up .venv and run the main job on the embedded defaults: calibrate the offline verifier
#                 judge on the bundled BEGIN slice and measure its agreement with people against cheap baselines
#                 (`make demo-lm` adds the embedded LM judge beside it: its 64 LM calls take ~1.5 min more)
#   make test   - set up .venv and run the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup demo demo-lm demo-metrics test test-unit bench verifier clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU wheel first: an unpinned torch would pull GBs of CUDA packages.
	$(PY) -m pip install -q torch==2.13.0
	# llama-cpp-python compiles from source the first time (~6-20 min on 2 cores); pip caches the wheel.
	$(PY) -m pip install -q -e ".[all,dev]"
	# The verifier's and the embedder's ONNX graphs, exported by torch once into the model cache (~30 s).
	HF_HUB_OFFLINE=1 $(PY) -c "from judges.lm.verifier import resolve_verifier; \
		from judges.lm.embeddings import sentence_transformer_embedder; resolve_verifier(None); sentence_transformer_embedder()"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/dspy-judges calibrate begin-slice --judge faithfulness_with_verifier \
		--optimizer none --calibrator stacked --n-train 28 --n-test 32

demo-lm: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/dspy-judges calibrate begin-slice --judge faithfulness_with_verifier \
		--optimizer none --calibrator stacked --n-train 28 --n-test 32 --beside faithfulness

demo-metrics: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m judges_app.demo

# tests/test_mlflow_ui.py drives the system's Chromium (Debian: apt-get install chromium); without one it is
# skipped, and under CI (CI set) it fails.
# The tests run in TEST_PROCESSES processes (pytest-xdist), each pinned to its own share of the cores
# (tests/conftest.py); tests sharing a server or a Ray instance stay in one process (xdist_group).
TEST_PROCESSES ?= 2

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadgroup

test-unit: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadgroup -m "not integration"

# Train the groundedness verifier again from scratch (a soup of two trainings and their average, 46-61 min on
# 2 cores before 2026-11-29, 84 min on an AVX2-only CPU, resumable) and install it into judges/lm/verifier/weights/;
# never part of `make test`. On a CPU with bfloat16 units `dspy-judges train-verifier --precision bfloat16`
# takes ~35 min (another file, docs/verifier-log.md).
verifier: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/dspy-judges train-verifier --out runs/verifier --install

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/embedded_lm.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
