# Two entry points (see README): `make demo` and `make test`. Both create the virtual
# environment on first use, install the pinned versions and build the C frame hook.
#
# Any supported Python: `make test PYTHON=python3.12` (3.11 to 3.15). Each version has its own
# environment: .venv for 3.11 (the default), .venv-3.12, ... An interpreter that is not on PATH
# is looked up under pyenv (.ci/find-python). CPython 3.14 and 3.15, when neither is found, come
# from a Debian sid chroot that .ci/sid makes on first use (root, ~3 minutes): the same make
# command then runs in there, on this checkout (bind-mounted at the same path).
#
# Another torch of the tested range (pyproject.toml: 2.13 to 2.15): `make test TORCH=2.15.0`.
# The default is the pinned one of constraints.txt (2.13.0), except on 3.15, which only torch
# 2.15 supports; any other gets its own environment, named after both versions
# (.venv-torch2.15.0 for 3.11, .venv-3.12-torch2.15.0), and its constraints are constraints.txt
# with torch==$(TORCH) for its torch line, plus constraints-torch$(TORCH).txt when it exists
# (the pins of what that torch brings and 2.13 does not).
PYTHON ?= python3.11
TORCH_PINNED := 2.13.0
PYTHON_BIN := $(shell .ci/find-python $(PYTHON) 2>/dev/null || command -v $(PYTHON))
PY_VERSION := $(if $(PYTHON_BIN),$(shell $(PYTHON_BIN) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null))
# (a 3.14/3.15 found nowhere: the targets below re-run in the chroot, where it is on PATH)
IN_SID := $(if $(PYTHON_BIN),,$(filter python3.14 python3.15,$(PYTHON)))
TORCH_DEFAULT := $(if $(filter 3.15,$(PY_VERSION)),2.15.0,$(TORCH_PINNED))
TORCH ?= $(TORCH_DEFAULT)
TORCH_SUFFIX := $(if $(filter $(TORCH_DEFAULT),$(TORCH)),,-torch$(TORCH))
VENV ?= $(if $(filter 3.11,$(PY_VERSION)),.venv$(TORCH_SUFFIX),.venv-$(PY_VERSION)$(TORCH_SUFFIX))
CONSTRAINTS := $(if $(filter $(TORCH_PINNED),$(TORCH)),constraints.txt,$(VENV)/constraints.txt)
# Extras of pyproject.toml to install: "test" always; "test,vision" adds torchvision, timm and
# diffusers for the vision zoo (pinned in constraints-torch2.14.1.txt: torchvision exists for
# one torch at a time), e.g. `make test TORCH=2.14.1 EXTRAS=test,vision`.
EXTRAS ?= test
PY := $(VENV)/bin/python
comma := ,
STAMP := $(VENV)/.installed$(if $(filter test,$(EXTRAS)),,-$(subst $(comma),-,$(EXTRAS)))
TORCH_STAMP := $(VENV)/.torch
# A machine may cap torch in pip's own configuration (a site-wide constraint file, as on the
# project's machines: torch<=2.14.1); pip adds such a file to the -c given here, so the tested
# torch could not install. The project's constraints are the whole pin: PIP_CONSTRAINT=/dev/null
# replaces the configured file for these commands (and changes nothing where there is none).
PIP := PIP_CONSTRAINT=/dev/null $(PY) -m pip

.PHONY: install torch demo test bench clean check-python

ifneq ($(IN_SID),)
# (the command-line variables reach the inner make through MAKEFLAGS)
install torch demo test bench:
	.ci/sid $(MAKE) $@ PYTHON=$(PYTHON)
else
check-python:
	@test -n "$(PY_VERSION)" || { echo "make: no interpreter for PYTHON=$(PYTHON)" >&2; exit 1; }
	@case "$(PY_VERSION)" in 3.11|3.12|3.13|3.14|3.15) ;; *) echo "make: frametracer supports CPython 3.11-3.15, $(PYTHON) is $(PY_VERSION)" >&2; exit 1;; esac

# torch on its own (the long download), so that CI can fetch it for several versions at once.
# (pip byte-compiles what it installs, ~20 s of CPU for torch. Keep it: where
# PYTHONDONTWRITEBYTECODE is set, as on these machines, nothing else writes the .pyc files, and
# every process, the suite's subprocesses included, would compile torch from source. A disk
# that fills up during the install writes some of them short, silently: .ci/check-pyc reads
# them all and rewrites the ones that cannot load.)
$(TORCH_STAMP): constraints.txt $(wildcard constraints-torch$(TORCH).txt) | check-python
	test -x $(PY) || $(PYTHON_BIN) -m venv $(VENV)
	$(if $(filter $(TORCH_PINNED),$(TORCH)),,{ grep -v '^torch==' constraints.txt; echo "torch==$(TORCH)"; cat $(wildcard constraints-torch$(TORCH).txt) /dev/null; } > $(CONSTRAINTS))
	$(PIP) install -q -c $(CONSTRAINTS) "torch==$(TORCH)" setuptools wheel
	$(PY) .ci/check-pyc
	touch $(TORCH_STAMP)

$(STAMP): $(TORCH_STAMP) pyproject.toml setup.py constraints.txt $(wildcard tracer/runtime/*.c) $(wildcard guards/*.c guards/*.h guards/*.cpp) | check-python
	$(PIP) install -q -c $(CONSTRAINTS) --no-build-isolation -e ".[$(EXTRAS)]"
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
endif

clean:
	rm -rf $(VENV) build *.egg-info tracer/runtime/*.so guards/*.so
