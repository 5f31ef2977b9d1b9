# pockmcu: the two commands a new user needs are `make demo` and `make test`.
# Both set up what is missing first: Debian packages (cross compiler, newlib,
# QEMU) and a local virtual environment in .venv with the Python dependencies.

SHELL      := /bin/bash
PYTHON3    ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
APT_PKGS   := gcc make ccache gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm python3-venv chromium clang-format
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

.PHONY: fuzz setup apt venv demo test test-fast bench corpus fixtures clean

setup: apt venv

# Install the Debian packages only when one of them is missing.
apt:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml
	@[ -x $(PY) ] || $(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

demo: setup
	$(PY) -m pockmcu.demo

# The whole suite on every core (pytest-xdist, an idle worker takes tests queued for a busy one; PYTEST_JOBS=0 runs it
# in one process), the 25 slowest listed.
PYTEST_JOBS ?= auto
test: setup
	$(PY) -m pytest -q -n $(PYTEST_JOBS) --dist worksteal --durations=25 $(PYTEST_ARGS)

# Unit, numpy-reference and host-simulation tests: no QEMU, nothing marked slow (tests/conftest.py).
test-fast: setup
	$(PY) -m pytest -q -n $(PYTEST_JOBS) -m "not qemu and not slow" $(PYTEST_ARGS)

bench: setup
	-$(PY) -m pockmcu.corpus fetch $(if $(CORPUS_FROM),--from $(CORPUS_FROM))
	$(PY) -m pockmcu.bench --all --flash --train --digits --zoo --planner --serial -o BENCHMARKS.md
	$(MAKE) corpus

# The corpus of public third-party models (tests/corpus/models.toml): fetch what the cache lacks
# (CORPUS_FROM=DIR takes files from a directory where there is no network; a model that cannot be
# fetched stays in the table as "not fetched"), then compile / bit-exact / trainable per model into
# its own section of BENCHMARKS.md (about a minute on 2 cores).
CORPUS_FROM ?=
corpus: setup
	-$(PY) -m pockmcu.corpus fetch $(if $(CORPUS_FROM),--from $(CORPUS_FROM))
	$(PY) -m pockmcu.corpus eval --into BENCHMARKS.md

# Mutated models through inspect, gen, the cffi host build (sim), the checked sanitized build (san:
# make host-check in each accepted project) and a --train build's checked run (train: inference and a
# training step per sample): 0 tracebacks, hangs, crashes, half-written outputs, build failures or
# sanitizer reports expected. One forked child per mutant, --jobs at a time (default: every core; about
# 10,000 mutants in 15-30 minutes on 2 cores). FUZZ_ARGS="--count 200 --seconds 60" for a short run;
# failures are kept in fuzz-failures/ with their counts (counts.json, rewritten while it runs).
FUZZ_ARGS ?= --count 10000 --seconds 7200 --stages inspect,gen,sim,san,train --json fuzz-failures/counts.json
fuzz: setup
	$(PY) tests/fuzz_models.py $(FUZZ_ARGS) --keep fuzz-failures

# Regenerate the committed fixture models (needs no TensorFlow).
fixtures: setup
	$(PY) tests/fixtures/make_fixtures.py

clean:
	rm -rf build dist demo_out .pytest_cache
