# torchlight: the two commands from the README are `make lab` and `make test`.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.torchlight-installed
LINT_PATHS := $(wildcard torchlight torchlight_grader tests benchmarks tools docs/conf.py docs/_ext)
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE
# One BLAS thread for tests and builds: the suite's matrices are small, and on 2 busy cores
# OpenBLAS's spinning threads made a notebook's training cell 5x slower (147 s vs 29 s).
# (`make lab` keeps torchlight's default, `tl.set_num_threads`: one thread per physical core;
# `make lab TORCHLIGHT_NUM_THREADS=1` on a machine other jobs share.)
test pytest notebooks: export OPENBLAS_NUM_THREADS ?= 1
test pytest notebooks: export OMP_NUM_THREADS ?= 1

.PHONY: venv lab test pytest lint typecheck notebooks bench gpu-check clean distclean docs docs-serve

# (Re)install when pyproject.toml is newer than the stamp, or the venv is missing.
# EXTRAS=course (or course,cluster) installs only what an instructor needs (assignments/README.md).
EXTRAS ?= all
venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -e '.[$(EXTRAS)]'
	$(PY) -m ipykernel install --sys-prefix --name torchlight --display-name "Python (torchlight)"
	@touch $@

# JupyterLab on the tutorials, with the `torchlight` kernel of .venv.
# Jupyter refuses to run as root unless told to, so pass --allow-root only then.
lab: venv
	$(PY) -m ipykernel install --sys-prefix --name torchlight --display-name "Python (torchlight)"
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root,)

test: venv lint typecheck pytest

pytest: venv
	$(PY) -m pytest tests

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

typecheck: venv
	$(VENV)/bin/mypy torchlight torchlight_grader

notebooks: venv
	$(PY) tools/build_notebooks.py

# The Sphinx site: docs/_build/html (warnings are errors, every cross-reference must resolve).
docs: venv
	$(PY) -m sphinx -W --keep-going -n -q -b html docs docs/_build/html
	@echo "built docs/_build/html/index.html (make docs-serve serves it)"

DOCS_PORT ?= 8000
# Serves what `make docs` built; builds only when nothing is built yet (`make docs` rebuilds).
docs-serve: $(if $(wildcard docs/_build/html/index.html),,docs)
	$(PY) -m http.server $(DOCS_PORT) --bind 127.0.0.1 --directory docs/_build/html

bench: venv
	@set -e; for f in benchmarks/*.py; do \
		[ -e "$$f" ] || { echo "no benchmarks/*.py"; break; }; \
		case "$$f" in *gpu_check.py) continue;; esac; \
		echo "== $$f"; $(PY) "$$f"; \
	done

# On a machine with an NVIDIA GPU: the CUDA tests on the device and the benchmarks, one
# Markdown report (benchmarks/results/gpu_check.md), under 5 minutes. Needs no venv and no
# package index: .venv's Python if there is one, else python3 with numpy, numba, numba-cuda.
GPU_PY := $(if $(wildcard $(PY)),$(PY),python3)
gpu-check:
	PYTHONPATH=. $(GPU_PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
	rm -rf benchmarks/results benchmarks/*.csv benchmarks/*.json
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print -exec rm -rf {} +
	find . -path ./$(VENV) -prune -o -name .ipynb_checkpoints -type d -print -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)

# The nbgrader course's instructor targets (course-build, course-release, course-grade).
include assignments/course.mk
