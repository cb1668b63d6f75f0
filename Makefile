# Two entry points (see README): `make demo` and `make test`. Both create the virtual
# environment on first use, install the pinned versions and build the C frame hook.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml setup.py constraints.txt $(wildcard tracer/*.c) $(wildcard guards/*.c guards/*.h guards/*.cpp)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt "torch==2.13.0" setuptools wheel
	$(PY) -m pip install -q -c constraints.txt --no-build-isolation -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py
	$(VENV)/bin/tracer-dump examples/dump_target.py:encoder
	mkdir -p build
	$(VENV)/bin/tracer-dump examples/dump_target.py:pipeline --html build/dump_report.html

test: $(STAMP)
	$(PY) -m pytest -q tests

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info tracer/*.so
