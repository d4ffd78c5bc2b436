PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo demo-machines board-shot bench bench-board smoke lint clean

$(STAMP): pyproject.toml shared inbox coordinator worker
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --config-settings editable_mode=strict -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python demo/demo.py

demo-machines: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python demo/machines.py

board-shot: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python demo/board_shot.py

smoke: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(PYTHON) ../shared/acceptance/smoke.py

bench: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/run.py

bench-board: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/board_viewers.py

lint: $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check --config-settings editable_mode=strict -e '.[test,lint]'
	$(BIN)/ruff check shared inbox coordinator worker tests testing --select E,F,W,B,I,TID251 --ignore E501
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info
