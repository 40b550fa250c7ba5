# torchlight: the two commands from the README are `make lab` and `make test`.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.torchlight-installed
# What `make lab` needs (the `lab` extra), `make homework` (+ `course`) and `make docs` (the
# `docs` extra); a full install (`make venv`, `make test`) has them all, so it marks them done.
STAMP_LAB := $(VENV)/.torchlight-lab
STAMP_HOMEWORK := $(VENV)/.torchlight-homework
STAMP_DOCS := $(VENV)/.torchlight-docs
, := ,
LINT_PATHS := $(wildcard torchlight torchlight_grader tests benchmarks tools docs/conf.py docs/_ext)
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE
# One BLAS thread for tests and builds: the suite's matrices are small, and on 2 busy cores
# OpenBLAS's spinning threads made a notebook's training cell 5x slower (147 s vs 29 s).
# (`make lab` keeps torchlight's default, `tl.set_num_threads`: one thread per physical core;
# `make lab TORCHLIGHT_NUM_THREADS=1` on a machine other jobs share.)
test pytest notebooks: export OPENBLAS_NUM_THREADS ?= 1
test pytest notebooks: export OMP_NUM_THREADS ?= 1

.PHONY: venv lab homework homework-check test pytest lint typecheck notebooks bench gpu-check clean distclean docs docs-clean docs-serve

# (Re)install when pyproject.toml is newer than the stamp, or the venv is missing.
# EXTRAS=course (or course,cluster) installs only what an instructor needs (assignments/README.md).
EXTRAS ?= all
venv: $(STAMP)

# $(call install,EXTRAS): .venv (created if missing) with torchlight and those extras, and the
# `torchlight` Jupyter kernel that runs in it.
define install
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -e '.[$(1)]'
	$(PY) -m ipykernel install --sys-prefix --name torchlight --display-name "Python (torchlight)"
endef

$(STAMP): pyproject.toml
	$(call install,$(EXTRAS))
	@touch $@ $(if $(filter all,$(EXTRAS)),$(STAMP_LAB) $(STAMP_HOMEWORK) $(STAMP_DOCS),)

$(STAMP_LAB): pyproject.toml
	$(call install,lab)
	@touch $@

$(STAMP_HOMEWORK): pyproject.toml
	$(call install,lab$(,)course)
	@touch $@ $(STAMP_LAB)

$(STAMP_DOCS): pyproject.toml
	$(call install,docs)
	@touch $@

# Jupyter refuses to run as root unless told to, so pass --allow-root only then.
# JUPYTER_CONFIG_PATH adds tools/jupyter/<lab|homework>/: which nbgrader parts the lab shows
# (labconfig/page_config.json, jupyter_server_config.json), whatever else .venv has installed.
JUPYTER_LAB = JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyter/$(1)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	PATH="$(abspath $(VENV))/bin:$$PATH" $(abspath $(VENV))/bin/jupyter lab \
	$(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

# JupyterLab on the tutorials, with the `torchlight` kernel of .venv; only the `lab` extra
# (no nbgrader menus there, even where `make test` installed nbgrader).
lab: $(STAMP_LAB)
	$(call JUPYTER_LAB,lab) notebooks/

# The course's five assignments for a learner without a course: the student notebooks (no
# solutions) in $(HOMEWORK)/, the torchlight kernel, nbgrader's Validate button; your work is
# never overwritten. `make homework-check A=a1` grades your copy with the hidden tests.
HOMEWORK ?= homework
homework: $(STAMP_HOMEWORK)
	$(PY) -m torchlight_grader.course.homework release --into "$(HOMEWORK)"
	@sed -n '/^1\./,$$p' "$(HOMEWORK)/README.md"
	cd "$(HOMEWORK)" && $(call JUPYTER_LAB,homework) .

homework-check: $(STAMP_HOMEWORK)
	@test -n "$(A)" || { echo "homework-check: name the assignment, e.g. make homework-check A=a1" >&2; exit 2; }
	$(PY) -m torchlight_grader.course.homework check "$(A)" --into "$(HOMEWORK)"

test: venv lint typecheck pytest

# Two pytest processes at once, one per core of a 2-core machine: the suite that grades the whole
# catalog through the real nbgrader (its shared fixture is a third of the run), the attacks, two
# of the instructor's terms, the capstone's leaderboard, a2c's grading, the self-learner's
# homework and the suites that drive JupyterLab in Chromium (COURSE_TESTS), printed as they run;
# and all the others (the library's, the grader's, the docs, the notebooks, the exchange, the
# class at scale), printed when they end. Both run in a fresh temporary folder of this run,
# removed at the end, and both must pass.
# The split keeps the two about equally long (measured from `make test`'s durations): move a
# suite when one side grows.
# `make pytest SERIAL=1`: one process, every test in order.
COURSE_TESTS := $(sort $(wildcard tests/test_browser.py tests/test_course.py \
	tests/test_course_attacks.py tests/test_course_browser.py tests/test_course_capstone.py \
	tests/test_course_term.py tests/test_course_term3.py tests/test_homework.py \
	tests/test_kernels_grading.py))
pytest: venv
ifdef SERIAL
	$(PY) -m pytest tests --durations=30
else
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/torchlight-pytest.XXXXXX") && chmod 755 "$$tmp" || exit 1; \
	echo "+ pytest tests, all but the course's suites, in the background ($$tmp/others.log)"; \
	$(PY) -m pytest tests $(addprefix --ignore=,$(COURSE_TESTS)) --durations=15 \
		--basetemp=$$tmp/others >$$tmp/others.log 2>&1 & others=$$!; \
	trap 'kill $$others 2>/dev/null; rm -rf "$$tmp"; exit 130' INT TERM HUP; \
	echo "+ pytest $(COURSE_TESTS)"; \
	$(PY) -m pytest $(COURSE_TESTS) --durations=30 --basetemp=$$tmp/course; \
	course=$$?; wait $$others; rest=$$?; \
	echo "+ pytest tests, all but the course's suites:"; cat $$tmp/others.log; rm -rf "$$tmp"; \
	echo "+ pytest exit status: the course's suites $$course, the others $$rest"; \
	test $$course -eq 0 && test $$rest -eq 0
endif

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

typecheck: venv
	$(VENV)/bin/mypy torchlight torchlight_grader

notebooks: venv
	$(PY) tools/build_notebooks.py

# The Sphinx site: docs/_build/html (warnings are errors, every cross-reference must resolve).
# Incremental: Sphinx keeps its parsed pages in docs/_build/doctrees and rebuilds only the pages
# whose source (or documented module) changed; the notebooks are rendered from their stored
# outputs, never executed. `make docs-clean` forgets it all (a full build: minutes). It installs
# only the `docs` extra (not the test, course or PyTorch tools of a full install).
docs: $(STAMP_DOCS)
	$(PY) -m sphinx -W --keep-going -n -q -b html -d docs/_build/doctrees docs docs/_build/html
	@echo "built docs/_build/html/index.html (make docs-serve serves it)"

docs-clean:
	rm -rf docs/_build docs/api docs/_generated docs/tutorials/*.ipynb

DOCS_PORT ?= 8000
# Brings the site up to date (seconds when nothing changed), then serves it.
docs-serve: docs
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
