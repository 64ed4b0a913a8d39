# Two commands do everything on a fresh machine with Python 3.11+, pip and make:
#   make demo   create .venv, install inferlab, run a real estimate on built-in specs
#   make test   create .venv, install inferlab with test extras, run the whole suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/inferlab hardware list
	$(BIN)/inferlab calc "h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth"
	$(BIN)/inferlab estimate llama-3.1-70b h100-sxm --tp 4 --precision fp8 --isl 2048 --osl 256 --batch 1,8,64 --engine trtllm --explain
	$(BIN)/inferlab serve llama-3.1-8b h100-sxm --precision fp8 --engine vllm --isl 1024 --osl 256 --concurrency 1,16,64 --num-requests 500
	$(BIN)/inferlab plan examples/scenarios/chat.yaml --top 5

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_specs.py
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_planner.py
	$(BIN)/python benchmarks/bench_serving.py
	$(BIN)/python benchmarks/bench_validation.py
	$(BIN)/python benchmarks/bench_dask.py
	$(BIN)/python benchmarks/bench_explore.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
