# kreassign: `make demo` and `make test` set everything up in .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bench man lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,plots,connect]'
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash demo/run.sh

test: $(STAMP)
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/python -m pytest -q -p no:cacheprovider

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not spark and not slow"

bench: $(STAMP)
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/python -m bench.run_all

man: $(STAMP)
	$(BIN)/python -m kreassign.cli.manpages man

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis spark-warehouse
