# Two entry points (see README): `make demo` and `make test`. Both create the virtual
# environment on first use, install the pinned versions and build the C frame hook.
#
# Any supported Python: `make test PYTHON=python3.12` (or python3.13). Each version has its
# own environment: .venv for 3.11 (the default), .venv-3.12, .venv-3.13. An interpreter that
# is not on PATH is looked up under pyenv (.ci/find-python).
#
# Another torch of the tested range (pyproject.toml: 2.13 to 2.15): `make test TORCH=2.15.0`.
# The default is the pinned one of constraints.txt; any other gets its own environment, named
# after both versions (.venv-torch2.15.0 for 3.11, .venv-3.12-torch2.15.0), and its constraints
# are constraints.txt with torch==$(TORCH) for its torch line, plus constraints-torch$(TORCH).txt
# when it exists (the pins of what that torch brings and 2.13 does not).
PYTHON ?= python3.11
TORCH_DEFAULT := 2.13.0
TORCH ?= $(TORCH_DEFAULT)
PYTHON_BIN := $(shell .ci/find-python $(PYTHON) 2>/dev/null || command -v $(PYTHON))
PY_VERSION := $(shell $(PYTHON_BIN) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
TORCH_SUFFIX := $(if $(filter $(TORCH_DEFAULT),$(TORCH)),,-torch$(TORCH))
VENV ?= $(if $(filter 3.11,$(PY_VERSION)),.venv$(TORCH_SUFFIX),.venv-$(PY_VERSION)$(TORCH_SUFFIX))
CONSTRAINTS := $(if $(TORCH_SUFFIX),$(VENV)/constraints.txt,constraints.txt)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_STAMP := $(VENV)/.torch
# A machine may cap torch in pip's own configuration (a site-wide constraint file, as on the
# project's machines: torch<=2.14.1); pip adds such a file to the -c given here, so the tested
# torch could not install. The project's constraints are the whole pin: PIP_CONSTRAINT=/dev/null
# replaces the configured file for these commands (and changes nothing where there is none).
PIP := PIP_CONSTRAINT=/dev/null $(PY) -m pip

.PHONY: install torch demo test bench clean check-python

check-python:
	@test -n "$(PY_VERSION)" || { echo "make: no interpreter for PYTHON=$(PYTHON)" >&2; exit 1; }
	@case "$(PY_VERSION)" in 3.11|3.12|3.13) ;; *) echo "make: frametracer supports CPython 3.11-3.13, $(PYTHON) is $(PY_VERSION)" >&2; exit 1;; esac

# torch on its own (the long download), so that CI can fetch it for several versions at once.
# (pip byte-compiles what it installs, ~20 s of CPU for torch. Keep it: where
# PYTHONDONTWRITEBYTECODE is set, as on these machines, nothing else writes the .pyc files, and
# every process, the suite's subprocesses included, would compile torch from source. A disk
# that fills up during the install writes some of them short, silently: .ci/check-pyc reads
# them all and rewrites the ones that cannot load.)
$(TORCH_STAMP): constraints.txt $(wildcard constraints-torch$(TORCH).txt) | check-python
	test -x $(PY) || $(PYTHON_BIN) -m venv $(VENV)
	$(if $(TORCH_SUFFIX),{ grep -v '^torch==' constraints.txt; echo "torch==$(TORCH)"; cat $(wildcard constraints-torch$(TORCH).txt) /dev/null; } > $(CONSTRAINTS))
	$(PIP) install -q -c $(CONSTRAINTS) "torch==$(TORCH)" setuptools wheel
	$(PY) .ci/check-pyc
	touch $(TORCH_STAMP)

$(STAMP): $(TORCH_STAMP) pyproject.toml setup.py constraints.txt $(wildcard tracer/runtime/*.c) $(wildcard guards/*.c guards/*.h guards/*.cpp) | check-python
	$(PIP) install -q -c $(CONSTRAINTS) --no-build-isolation -e ".[test]"
	$(PY) .ci/check-pyc
	touch $(STAMP)

torch: $(TORCH_STAMP)

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
	rm -rf $(VENV) build *.egg-info tracer/runtime/*.so
