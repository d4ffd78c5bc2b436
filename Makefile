PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo demo-machines bench smoke lint clean

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

smoke: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(PYTHON) ../shared/acceptance/smoke.py

bench: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,lint]'
	$(BIN)/ruff check shared inbox coordinator worker tests --select E,F,W,B,I --ignore E501
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info
