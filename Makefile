# exam_eval — the two commands a newcomer needs:
#   make demo   grade the built-in demo collection and print the leaderboards
#   make test   install what is needed and run the test suite
# Everything installs into .venv, every package at the version of lock/requirements.lock (the
# versions the suite passed on; make lock writes it, make test-latest tries newer releases).
# torch's version is pinned there too, its build is pip's choice: from PyPI on Linux x86_64
# that is the CUDA build (about 2.5 GB of nvidia-* packages more); a CPU-only machine passes
# PyTorch's CPU index, or a folder of wheels:
#   make install TORCH_INDEX=https://download.pytorch.org/whl/cpu

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# where pip also looks for torch (and the rest): an index URL, or a folder holding wheels
TORCH_INDEX ?=
TORCH_FROM := $(if $(TORCH_INDEX),$(if $(wildcard $(TORCH_INDEX)/.),--find-links,--extra-index-url) $(TORCH_INDEX))
DEMO_OUT ?= demo-out
# make demo-rag writes to DEMO_OUT when it is given (DEMO_OUT=X make demo-rag: X), else demo-rag-out
DEMO_RAG_OUT ?= $(if $(filter command line environment,$(origin DEMO_OUT)),$(DEMO_OUT),demo-rag-out)
BENCH_OUT ?= bench-out
# make test's workers: one per CPU, at most 4 (each loads torch and builds its own tiny
# models); a test file runs whole on one worker, so its module fixtures are built once
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
PYTEST_JOBS = $(if $(filter-out 0 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)
# more pytest flags for make test and make test-servers (.ci/run: --junitxml, for its list of skips)
PYTEST_ARGS ?=

.PHONY: install lock test-latest test coverage test-servers bench-servers demo demo-rag bench bench-nuggets bench-device-stage man lint clean system-deps help example

help:
	@echo "make demo    - grade the built-in demo collection (offline), print leaderboards"
	@echo "make demo-rag - the demo runs as RAG reports: grades, nugget scores, leaderboard (offline)"
	@echo "make test    - install (if needed) and run the tests"
	@echo "make coverage - the tests under coverage.py (subprocesses included), statement coverage per module"
	@echo "make test-servers - the tests against llama.cpp's server (builds llama-cpp-python, ~5 min)"
	@echo "make bench-servers - SmolLM2's label mass through llama.cpp's server"
	@echo "make bench   - speed benchmarks (scoring, EXAM-Cover, grading, the grading pipeline, exam-qrels vs trec_eval, nuggetizer calls)"
	@echo "make bench-device-stage - stage into .device/ what the GPU run (bench/device_run.sh) needs"
	@echo "make man     - check and render the man pages into man/txt/"
	@echo "make lint    - static checks (ruff)"
	@echo "make lock    - resolve lock/requirements.lock anew (uv, every Python >= 3.11); then make test"
	@echo "make test-latest - the suite on the newest releases pyproject allows (.venv-latest), and what differs from the lock"
	@echo "make install - create $(VENV) with the package and all extras (CPU-only torch: TORCH_INDEX=https://download.pytorch.org/whl/cpu)"
	@echo "make system-deps - as root: apt-get install what is missing of chromium, g++, cmake (browser and llama.cpp tests)"

install: $(STAMP)

# the lock: every package make install puts into .venv, at one version (per Python and
# platform, where they differ); pip reads it as constraints, so what pyproject's extras do not
# ask for (torch's CUDA packages beside a CPU build) is not installed
LOCK := lock/requirements.lock
# what .venv holds beside the package's [all]: transformers serve (lock/serving.in), and two
# packages without their dependencies (lock/no-deps.in); then the man pages beside bin/,
# where man finds them (man exam-qrels with bin/ on PATH): an editable install leaves out
# the wheel's data files, links keep them current
# $(call venv_install,VENV,CONSTRAINTS)
define venv_install
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q -c $(2) $(TORCH_FROM) -e '.[all]' -r lock/serving.in
	$(1)/bin/python -m pip install -q --no-deps -c $(2) -r lock/no-deps.in
	mkdir -p $(1)/share/man/man1 $(1)/share/man/man7
	ln -sf $(CURDIR)/man/*.1 $(1)/share/man/man1/
	ln -sf $(CURDIR)/man/*.7 $(1)/share/man/man7/
endef

$(STAMP): pyproject.toml $(LOCK) lock/serving.in lock/no-deps.in
	$(call venv_install,$(VENV),$(LOCK))
	touch $@

# make lock: resolve the lock anew with uv's resolver, for every Python from 3.11 and every
# platform at once (--universal: a package whose newest release differs by Python gets one
# line per Python, with its marker); constraints.txt's pins (torch) hold. Written whole or not
# at all. Run make test after it: the lock holds versions the suite passed on.
UV_VERSION ?= 0.13.9
LOCK_VENV ?= .venv-lock
UV := $(LOCK_VENV)/bin/uv
UV_COMPILE := $(UV) pip compile -q --universal --python-version 3.11 --no-header
$(UV):
	test -x $(LOCK_VENV)/bin/python || $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q 'uv==$(UV_VERSION)'

lock: $(UV)
	@set -e; tmp=$$(mktemp $(LOCK).XXXXXX); trap 'rm -f $$tmp' EXIT; \
	{ echo "# The versions make install puts into .venv, the ones the suite passed on. Generated: do not edit."; \
	  echo "# make lock (uv $(UV_VERSION) pip compile --universal, Python >= 3.11) from pyproject.toml's [all],"; \
	  echo "# lock/serving.in and constraints.txt; make test-latest shows what newer releases exist."; \
	  $(UV_COMPILE) --annotation-style line -c constraints.txt pyproject.toml --extra all lock/serving.in; \
	  echo "# installed with --no-deps (lock/no-deps.in)"; \
	  $(UV_COMPILE) --no-annotate --no-deps lock/no-deps.in; \
	} > $$tmp; mv $$tmp $(LOCK); trap - EXIT; \
	echo "$(LOCK): $$(grep -c '^[a-z0-9]' $(LOCK)) pins"

# the canary: the newest releases pyproject's ranges allow (torch held at constraints.txt's
# version, whose build is TORCH_INDEX's choice), in a venv of their own, the suite run there,
# then each package whose version differs from the lock. Not part of make test.
LATEST_VENV ?= .venv-latest
test-latest: export PIP_NO_CACHE_DIR = 1
test-latest:
	rm -rf $(LATEST_VENV)
	$(call venv_install,$(LATEST_VENV),constraints.txt)
	status=0; $(LATEST_VENV)/bin/python -m pytest -q $(PYTEST_JOBS) || status=$$?; \
	$(LATEST_VENV)/bin/python scripts/lock_check.py --newer $(LOCK); exit $$status

# llama.cpp's server (llama-cpp-python builds from source: about 5 minutes on 2 cores), in a
# venv of its own; not -march=native: its AMX kernels segfaulted on the first request where
# the CPU reports AMX
SERVERS_VENV ?= .venv-servers
LLAMACPP_VERSION ?= 0.3.36
LLAMACPP_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
$(SERVERS_VENV)/.installed:
	test -x $(SERVERS_VENV)/bin/python || $(PYTHON) -m venv $(SERVERS_VENV)
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" \
	  $(SERVERS_VENV)/bin/pip install -q --no-cache-dir 'llama-cpp-python[server]==$(LLAMACPP_VERSION)'
	touch $@

# the same commands against llama.cpp's server with SmolLM2-135M-Instruct (pytest -m servers)
test-servers: install $(SERVERS_VENV)/.installed
	LLAMACPP_PYTHON=$(CURDIR)/$(SERVERS_VENV)/bin/python $(PY) -m pytest -q -m servers $(PYTEST_ARGS)

# label mass of SmolLM2 through llama.cpp's server (bench/servers/README.md)
bench-servers: install $(SERVERS_VENV)/.installed
	$(PY) bench/servers/llamacpp.py --python $(SERVERS_VENV)/bin/python -- \
	  $(PY) bench/servers/label_mass.py --out $(BENCH_OUT)/smollm2-llamacpp-label-mass.json

# what the tests that need more than Python use, installed only when missing, and only where
# we may (root with apt-get): Debian's chromium (the report's rendering and the labelling page,
# driven by playwright) and a C++ compiler with cmake (make test-servers builds llama.cpp).
# A step of its own that the README names: make test installs nothing into the system; without
# these, their tests skip and say why.
SYSTEM_PACKAGES := chromium:chromium g++:g++ cmake:cmake
system-deps:
	@missing=""; for pair in $(SYSTEM_PACKAGES); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -z "$$missing" ]; then echo "system-deps: chromium, g++ and cmake are here"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "system-deps: installing$$missing"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	    || echo "system-deps: could not install$$missing; the tests that need them will skip"; \
	else echo "system-deps: missing$$missing, and no root with apt-get here; the tests that need them will skip"; \
	fi

# pip keeps no cache when the install runs for the tests: the suite leaves nothing in
# XDG_CACHE_HOME or HOME (make install alone keeps pip's cache, for the next install)
test: export PIP_NO_CACHE_DIR = 1
test: install
	$(PY) -m pytest -q $(PYTEST_JOBS) $(PYTEST_ARGS)

# the suite under coverage.py, its subprocesses included: the least covered modules, then the total
coverage: export PIP_NO_CACHE_DIR = 1
coverage: install
	$(PY) -m coverage erase
	$(PY) -m coverage run -m pytest -q $(PYTEST_JOBS)
	$(PY) -m coverage combine -q
	$(PY) -m coverage report --sort=-cover | tail -25

demo: install
	$(PY) -m exam_eval.demo --out $(DEMO_OUT)

demo-rag: install
	$(PY) -m exam_eval.demo_rag --out $(DEMO_RAG_OUT)

bench: install
	$(PY) bench/bench_scoring.py --out $(BENCH_OUT)
	$(PY) bench/bench_grading.py --out $(BENCH_OUT)
	$(PY) bench/bench_trec_eval.py --out $(BENCH_OUT)
	$(PY) bench/bench_pipeline.py --ct2-alone --out $(BENCH_OUT)
	$(PY) bench/bench_nuggetizer.py --json $(BENCH_OUT)/bench_nuggetizer.json
	$(PY) bench/bench_label_page.py --out $(BENCH_OUT)
	$(PY) bench/bench_compare.py --out $(BENCH_OUT)

# what bench/device_run.sh needs on the GPU machine, where only the checkout travels: the
# DL19 inputs into .device/ (DEVICE_STAGE_FLAGS=--ct2 adds CTranslate2's cp312 wheel: on the
# H200's CUDA 13 image it found no cuBLAS 12, so it is left out unless asked for); no
# install: it runs before the device tool's call, with what is here
DEVICE_STAGE_FLAGS ?=
bench-device-stage:
	bash bench/device_stage.sh $(DEVICE_STAGE_FLAGS)

# the AutoNuggetizer's calls and prompt tokens, the nuggetizer package against exam_eval
bench-nuggets: install
	$(PY) bench/bench_nuggetizer.py --json $(BENCH_OUT)/bench_nuggetizer.json

man:
	@sh man/sync-prompts.sh
	@mkdir -p man/txt
	@for f in man/*.1 man/*.7; do \
	  groff -man -Tutf8 -ww -z $$f 2>&1 | grep . && exit 1; \
	  MANWIDTH=80 man -l $$f 2>/dev/null | col -b > man/txt/$$(basename $$f).txt; \
	done; echo "man pages OK (rendered text in man/txt/)"

# the whole pipeline as pattern rules (see examples/README.md)
example: install
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(MAKE) -C examples

lint: install
	$(PY) -m ruff check exam_eval tests bench scripts

clean:
	rm -rf $(DEMO_OUT) $(DEMO_RAG_OUT) $(BENCH_OUT) man/txt .pytest_cache
