# Two commands do everything on a fresh machine:
#   make demo   installs hybridperf and runs the main job on the shipped data
#   make test   installs hybridperf with test extras and runs the whole suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-test demo test reproduce clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,dask]'

demo: install
	$(BIN)/hybridperf reproduce
	$(BIN)/hybridperf analyze --gpu titan-v --kernel matvec --set N=1024,4096,16384,32768

test: install-test
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
