# The nbgrader course: instructor targets. Included from the top-level Makefile
# (`include assignments/course.mk`), which defines PY, VENV and the `venv` target.
#
#   make course-build                 jupytext sources -> assignments/source/*/*.ipynb
#   make course-release               build + nbgrader generate_assignment (release/)
#   make course-grade                 autograde submitted/, feedback, grades.csv + items.csv
#   make course-grade ASSIGNMENT=a1_functions   one assignment only
#
# Submissions go in assignments/submitted/<student>/<assignment>/ (nbgrader collect puts them
# there, or copy them by hand). The gradebook is assignments/gradebook.db (sqlite).

COURSE     := assignments
# nbgrader runs `alembic` from PATH when it creates the gradebook: put the venv's bin first.
NBGRADER   := PATH="$(abspath $(VENV))/bin:$$PATH" $(abspath $(VENV))/bin/nbgrader
ASSIGNMENT ?= *

.PHONY: course-build course-check course-release course-grade

course-build: venv
	$(PY) tools/course.py build

course-check: venv
	$(PY) tools/course.py check

course-release: course-build
	cd $(COURSE) && $(NBGRADER) generate_assignment "$(ASSIGNMENT)" --force

# All four steps always run (autograde, feedback, grades.csv, items.csv): one broken submission
# costs only that student; the failures are listed at the end and the target fails.
course-grade: venv
	$(PY) tools/course.py grade $(COURSE) --assignment "$(ASSIGNMENT)"
