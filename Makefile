# The two commands of a fresh machine: `make lab` (JupyterLab with the course) and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: lab test install notebooks bench clean

$(STAMP): pyproject.toml environments/constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "scaleout-ai needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: an unpinned torch pulls gigabytes of CUDA packages.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c environments/constraints.txt -e ".[test,scale]"
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	$(PY) -m scaleoutai.cli lab

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

notebooks: $(STAMP)
	$(PY) -m scaleoutai.cli notebooks run --smoke

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf _build .pytest_cache
