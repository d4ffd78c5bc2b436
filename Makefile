PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install --quiet --disable-pip-version-check --config-settings editable_mode=strict
SOURCES := pyproject.toml shared inbox coordinator worker
# Two stamps on one venv: the project alone (what a user installs: the demos need no more),
# and the project with its test extras (pytest, xdist, playwright), which implies the first.
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
ON_PATH := PATH="$(CURDIR)/$(BIN):$$PATH"
# The team's acceptance script lives beside the project, not in it: a fresh clone has none.
SMOKE := ../shared/acceptance/smoke.py
PYTEST_ONE := $(BIN)/python -m pytest -q -o addopts='-p no:cacheprovider' -rs

.PHONY: test demo demo-machines board-shot bench bench-board smoke lint clean

$(RUNTIME): $(SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $@

$(STAMP): $(SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[test]'
	touch $@ $(RUNTIME)

test: $(STAMP)
	$(BIN)/python -m pytest

demo: $(RUNTIME)
	$(ON_PATH) $(BIN)/python demo/demo.py

demo-machines: $(RUNTIME)
	$(ON_PATH) $(BIN)/python demo/machines.py

# Written into build/ (ignored): docs/board.png is tracked and changes only by a commit.
board-shot: $(RUNTIME)
	$(ON_PATH) $(BIN)/python demo/board_shot.py --out build/board.png

# The acceptance script when it is beside the clone; else the suite's own contract tests
# (the smoke contract test, which runs that script when it exists, and the README's
# quick start run as written).
smoke: $(RUNTIME)
	@if [ -f $(SMOKE) ]; then \
	    echo "$(PYTHON) $(SMOKE)"; \
	    $(ON_PATH) $(PYTHON) $(SMOKE); \
	else \
	    echo "smoke: no $(SMOKE) beside this clone; running the suite's contract tests" >&2; \
	    $(MAKE) --no-print-directory $(STAMP) && \
	    $(PYTEST_ONE) tests/test_smoke_contract.py tests/test_docs.py -k "smoke or quick_start"; \
	fi

bench: $(STAMP)
	$(ON_PATH) $(BIN)/python bench/run.py

bench-board: $(STAMP)
	$(ON_PATH) $(BIN)/python bench/board_viewers.py

lint: $(STAMP)
	$(PIP) -e '.[test,lint]'
	$(BIN)/ruff check shared inbox coordinator worker tests testing --select E,F,W,B,I,TID251 --ignore E501
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info
