# Two commands do all the set-up on a fresh machine (Python >= 3.10, no torch needed beforehand):
#   make demo   trains a small ELMo on a generated corpus and shows what its vectors are for
#   make test   runs every test: the numerics tests on the older CPU levels, then the whole suite with the whole
#               compatibility matrix (what CI runs; make test AREA=embed: one area's test files; make test-fast: the
#               inner loop, pytest -m "not slow"; make test-numerics: the numerics tests on every level)
#   make app    serves the demo page (elmo-app, docs/app.md) on http://127.0.0.1:7860
# Each creates .venv with the versions pinned in constraints.txt. The pin fixes torch's version, not its build:
# where pip finds PyTorch's CPU wheels you get the CPU build; see the README ("The environment") to choose.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pip compiles every file it installs to bytecode, one at a time: 90 of the 125 s of make test's set-up here (about
# 20,000 files, of which a run imports a few thousand). --no-compile leaves it to Python, which compiles a module
# the first time it is imported and keeps the result (make test writes bytecode, see below).
PIP_INSTALL := $(BIN)/pip install --quiet --no-compile
# What each target installs, once (a stamp file says it is done; pyproject.toml or constraints.txt changing redoes it):
# the demo the runtime and the training extras, the app those and the page's, the tests everything (`dev`).
DEMO_STAMP := $(VENV)/.installed-demo
APP_STAMP := $(VENV)/.installed-app
STAMP := $(VENV)/.installed
TORCH_STAMP := $(VENV)/.installed-torch

.PHONY: demo test test-fast test-numerics lint clean anchors browser app

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -c constraints.txt -e ".[train]"
	touch $(DEMO_STAMP)

$(APP_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -c constraints.txt -e ".[train,app]"
	touch $(APP_STAMP)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -c constraints.txt -e ".[dev]"
	$(MAKE) anchors
	$(MAKE) browser
	touch $(STAMP)

# torch alone first, at the pin (a torch installed beforehand at that version is kept, whatever its build): make test's
# compatibility environments link to it, so they build while pip installs the rest (one core each: pip is
# single-threaded) instead of after it.
$(TORCH_STAMP): constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -c constraints.txt torch
	touch $(TORCH_STAMP)

# allennlp 2.10.1, the anchor of tests/test_allennlp_parity.py and benchmarks/bench_speed.py --sections anchor.
# Its own requirements (torch < 1.13, spaCy, ...) would replace this stack: installed without them, and run
# through benchmarks/allennlp_anchor.py, which loads only its ELMo files. A test-only reference: where it cannot be
# installed, set-up goes on and those tests skip, saying so. allennlp-models 2.10.1 likewise, without its
# requirements: tests/test_coreference.py compares the coreference scores with its `ConllCorefScores`.
anchors:
	$(PIP_INSTALL) --no-deps allennlp==2.10.1 || \
		echo "allennlp 2.10.1 (a test anchor) was not installed: tests/test_allennlp_parity.py will skip"
	$(PIP_INSTALL) --no-deps allennlp-models==2.10.1 || \
		echo "allennlp-models 2.10.1 (the coreference scorer's anchor) was not installed: its test in tests/test_coreference.py will skip"

# Chromium and its driver from the system's packages, for the browser test of tests/test_app.py (Selenium drives
# them). Installed with apt-get where /usr/bin/chromium is missing: as root, else through sudo -n (never a password
# prompt). Where that cannot be done, set-up goes on and that test skips, saying so.
BROWSER_PACKAGES := chromium chromium-driver
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
	APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"; \
	if command -v apt-get >/dev/null 2>&1 && { $$APT install -y -qq $(BROWSER_PACKAGES) >/dev/null 2>&1 || \
		{ $$APT update -qq >/dev/null 2>&1 && $$APT install -y -qq $(BROWSER_PACKAGES) >/dev/null 2>&1; }; }; \
	then echo "installed $(BROWSER_PACKAGES) (apt-get) for the browser test of tests/test_app.py"; \
	else echo "$(BROWSER_PACKAGES) (for tests/test_app.py's browser test) could not be installed with apt-get: that test will skip"; fi

demo: $(DEMO_STAMP)
	$(BIN)/elmo-demo $(ARGS)

app: $(APP_STAMP)
	$(BIN)/elmo-app $(ARGS)

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file to a process, each computing on one thread:
# many tests wait on commands, servers and fresh interpreters, and two workers kept two cores 81% busy (1.62 CPU-seconds
# a second), so a third fills the waits. The files are handed out in the collection's order, the long ones first
# (LONG_FILES_FIRST in tests/conftest.py). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 3
PYTEST_WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# The tests write bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some CI images):
# without it, each of the suite's ~200 Python processes compiles the project from source again (about 1 CPU-second
# each) and each worker rewrites every test module's asserts again (about 7); the caches go to __pycache__ folders,
# which git ignores. An empty value is Python's "unset".
test test-fast test-numerics: export PYTHONDONTWRITEBYTECODE :=

# AREA: one part of the suite, by the test files' names: `make test AREA=embed` runs tests/test_*embed*.py, `make test
# AREA="pretrain finetune"` the files named for either (docs/tests.md lists the areas). Empty: every file.
AREA ?=
AREA_FILES := $(sort $(foreach area,$(AREA),$(wildcard tests/test_*$(area)*.py)))
ifneq ($(strip $(AREA)),)
ifeq ($(AREA_FILES),)
$(error AREA=$(AREA) names no test file: tests/test_*$(firstword $(AREA))*.py matches nothing)
endif
endif
COMPAT_LOG := $(VENV)/compat-build.log

# make test: everything CI runs (.ci/run), nothing left out by a marker. The compatibility matrix's environments
# (tests/compat/requirements/: every transformers, datasets, accelerate and sentence-transformers stack, flair, spaCy)
# are built while pip installs the rest of the project's environment and the numerics tests run on every older CPU
# level (tests/run_numerics.py --older); each environment takes about half a minute to build, once (torch shared,
# cached in ~/.cache/elmo-hf/compat). Then the suite runs, every test file. make test fails when either the suite or
# the numerics tests failed. With AREA, only that area's files run, and no numerics level.
test: $(TORCH_STAMP)
	@start=$$(date +%s); \
	$(BIN)/python tests/compat/environments.py build > $(COMPAT_LOG) 2>&1 & compat=$$!; \
	$(MAKE) --no-print-directory $(STAMP) || { wait $$compat; exit 1; }; \
	echo "make test: the project's environment ready after $$(( $$(date +%s) - start )) s"; \
	numerics=0; [ -n "$(strip $(AREA))" ] || { $(BIN)/python tests/run_numerics.py --older; numerics=$$?; }; \
	wait $$compat || echo "the compatibility environments were not all built: the tests of those missing skip" \
		>> $(COMPAT_LOG); \
	cat $(COMPAT_LOG); \
	echo "make test: the numerics and the compatibility environments done after $$(( $$(date +%s) - start )) s"; \
	$(BIN)/python -m pytest -q --durations=20 $(PYTEST_WORKERS) $(AREA_FILES) $(PYTEST_ARGS); suite=$$?; \
	echo "make test: the suite done after $$(( $$(date +%s) - start )) s"; \
	[ $$numerics = 0 ] || echo "make test: the numerics tests on an older CPU level failed (above)"; \
	[ $$suite = 0 ] && [ $$numerics = 0 ]

# The tests marked `numerics` again, each on two threads, on this CPU's kernels and on every older CPU level
# (tests/run_numerics.py): a bound that holds only on one thread or on this CPU's own kernels fails here, not for a
# user. About a minute a level; `make test` runs the older levels (the suite itself runs this CPU's).
test-numerics: $(STAMP)
	$(BIN)/python tests/run_numerics.py

# The inner loop: the tests not marked `slow` (no command in a process of its own, no server, no training loop of many
# seconds), in under 3 minutes; the compatibility environments are not built (their tests are slow).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_WORKERS) $(AREA_FILES) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

# The outputs of `make demo` and of the README's blocks pasted here (the same list as .gitignore's).
README_OUTPUTS := vectors.hdf5 analysis my-elmo my-classifier my-predictions train.tsv new.txt
clean:
	rm -rf $(VENV) outputs $(README_OUTPUTS)
