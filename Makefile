# Two commands do everything on a fresh machine:
#   make demo   installs hybridperf and runs the main job on the shipped data
#   make test   installs hybridperf with test extras and runs the whole suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-demo install-test demo test reproduce clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

# The demo's last step ranks on a local Dask cluster: the dask extra.
install-demo: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dask]'

install-test: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,dask]'

demo: install-demo
	@echo "== 1. the papers' published numbers, recomputed"
	$(BIN)/hybridperf reproduce
	@echo "== 2. the shipped real data"
	$(BIN)/hybridperf datasets
	@echo "== 3. train a hybrid model on the TITAN V runs of seed 004 (sizes up to N=32768 for matvec)"
	mkdir -p build/demo
	$(BIN)/hybridperf train titanv-seed004 -o build/demo/titanv.json --quiet
	@echo "== 4. predict sizes never measured, with 90% intervals, the MWP-CWP regime and an out-of-domain flag"
	$(BIN)/hybridperf predict -m build/demo/titanv.json --kernel matvec --set N=1024:131072:x2
	@echo "== 5. size extrapolation (S2): every analytical model, boosting and the hybrid side by side"
	$(BIN)/hybridperf evaluate titanv-seed004 --split S2
	@echo "== 6. the shipped default model (cuBLAS GEMM on five GPUs): a GEMM shape never measured"
	$(BIN)/hybridperf predict -m models/default.json --kernel neusight-gemm --gpu t4 --set B=1 --set M=2048 --set N=2048 --set K=2048 --set TILE_M=128 --set TILE_N=64 --set THREADS=128 --set SLICED=1 --set SPLITK=1 --set LINEAR=0
	@echo "== 7. what limits a kernel and what to try (GPUPerf benefit metrics; chart in build/demo)"
	$(BIN)/hybridperf advise --gpu a100 --kernel matvec --set N=1024,16384 --chart build/demo/benefits.png
	@echo "== 8. rank a GEMM configuration space on a local Dask cluster (LINEAR fixed, not searched); picks to measure"
	$(BIN)/hybridperf rank -m models/default.json --kernel neusight-gemm --gpu t4 --set B=1 --set M=2048 --set N=2048 --set K=2048 --set LINEAR=0 --dask local:2 --top 5 -o build/demo/picks.csv --quiet

test: install-test
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
