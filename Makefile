# Two commands do all the set-up on a fresh machine (Python >= 3.10, no torch needed beforehand):
#   make demo   trains a small ELMo on a generated corpus and shows what its vectors are for
#   make test   runs the numerics tests on the nearest older CPU level, then the test suite (make test-fast: the fast
#               core, pytest -m "not slow"; make test-all: with the long kill/restart tests marked `extended`;
#               make test-numerics: the numerics tests on every level)
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

.PHONY: demo test test-all test-fast test-numerics test-compat lint clean anchors browser app

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
# installed, set-up goes on and those tests skip, saying so.
anchors:
	$(PIP_INSTALL) --no-deps allennlp==2.10.1 || \
		echo "allennlp 2.10.1 (a test anchor) was not installed: tests/test_allennlp_parity.py will skip"

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
# a second), so a third fills the waits. TEST_WORKERS=0 runs it in this process. xdist hands out the files with the
# most tests first (tests/conftest.py says what giving it the collection's order with --no-loadscope-reorder did).
TEST_WORKERS ?= 3
PYTEST_WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
# The tests write bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some CI images):
# without it, each of the suite's ~200 Python processes compiles the project from source again (about 1 CPU-second
# each) and each worker rewrites every test module's asserts again (about 7); the caches go to __pycache__ folders,
# which git ignores. An empty value is Python's "unset".
test test-all test-fast test-numerics test-compat: export PYTHONDONTWRITEBYTECODE :=

# Two stacks of the compatibility matrix run with the suite, the oldest transformers 4 (4.46) and a transformers 5
# below 5.17 (5.16): each environment takes about half a minute to build, once (torch shared,
# tests/compat/environments.py); 4.53, flair and spaCy are make test-compat's. They are built while pip installs the
# rest of the project's environment and the numerics tests run on the nearest older CPU level, then the suite runs
# (built beside the suite, they made it 70 s longer); make test fails when either the suite or the numerics tests
# failed.
SUITE_STACKS := transformers-4.46 transformers-5.16
COMPAT_LOG := $(VENV)/compat-build.log
# make test leaves out the tests marked `extended` (long kill/restart runs, each beside a cheaper test of the same path,
# so that the suite keeps within 15 minutes on 2 cores); make test-all is make test with them.
SUITE_MARKS ?= (not compat or in_suite) and not extended
test-all: SUITE_MARKS = not compat or in_suite
test-all: test
test: $(TORCH_STAMP)
	@$(BIN)/python tests/compat/environments.py build $(SUITE_STACKS) > $(COMPAT_LOG) 2>&1 & compat=$$!; \
	$(MAKE) --no-print-directory $(STAMP) || { wait $$compat; exit 1; }; \
	$(BIN)/python tests/run_numerics.py --nearest; numerics=$$?; \
	wait $$compat || echo "the environments $(SUITE_STACKS) were not all built: their tests skip" >> $(COMPAT_LOG); \
	cat $(COMPAT_LOG); \
	$(BIN)/python -m pytest -q --durations=20 -m "$(SUITE_MARKS)" $(PYTEST_WORKERS) $(PYTEST_ARGS); suite=$$?; \
	[ $$numerics = 0 ] || echo "make test: the numerics tests on the nearest older CPU level failed (above)"; \
	[ $$suite = 0 ] && [ $$numerics = 0 ]

# The tests marked `numerics` again, each on two threads and on older CPUs' kernels (tests/run_numerics.py): a bound
# that holds only on one thread or on this CPU's own kernels fails here, not for a user. About a minute a level
# (this CPU's and each older one); `make test` runs the nearest older level only.
test-numerics: $(STAMP)
	$(BIN)/python tests/run_numerics.py

# The compatibility matrix (tests/test_compat.py, tests/test_ecosystem.py and test_resave_remote.py's stacks, marked
# `compat`): the same folders on transformers 4.46, 4.53, 5.3 and 5.16, datasets 3.6, flair 0.15.1 and
# spacy-transformers 1.4, each in a virtual environment of its own
# that pip builds from the registry (tests/compat/requirements/) and that is cached in ~/.cache/elmo-hf/compat
# (ELMO_COMPAT_CACHE): built once, again only when its requirements or the project's dependencies change.
test-compat: $(STAMP)
	$(BIN)/python tests/compat/environments.py build
	$(BIN)/python -m pytest -q -m compat $(PYTEST_WORKERS) tests/test_compat.py tests/test_ecosystem.py \
		tests/test_resave_remote.py

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

# The outputs of `make demo` and of the README's blocks pasted here (the same list as .gitignore's).
README_OUTPUTS := vectors.hdf5 analysis my-elmo my-classifier my-predictions train.tsv new.txt
clean:
	rm -rf $(VENV) outputs $(README_OUTPUTS)
