# The nbgrader course: instructor targets. Included from the top-level Makefile
# (`include assignments/course.mk`), which defines PY, VENV and the `venv` target.
#
#   make course-build                 jupytext sources -> assignments/source/*/*.ipynb
#   make course-release               build + nbgrader generate_assignment (release/)
#   make course-release-exchange ASSIGNMENT=a1_functions   put the release into the exchange
#   make course-collect ...           (the exchange's submissions into submitted/)
#   make course-grade                 autograde what is new or changed in submitted/, feedback,
#                                     grades.csv + items.csv + canvas.csv (FULL=1: regrade all)
#   make course-grade ASSIGNMENT=a1_functions   one assignment only
#   make course-grade JOBS=4          4 students at once (default: the number of cores)
#   make course-grade DB_URL=postgresql+psycopg2://user@host/db   (also for course-release)
#   make course-grade CLUSTER=tcp://host:8786 DB_URL=...   on a Dask cluster (or CLUSTER=local:4)
#   make course-export                grades.csv, items.csv, canvas.csv from the gradebook alone
#   make course-roster ROSTER=roster.csv        students from a CSV (id,first_name,last_name,...)
#   make course-duedates DUEDATES=duedates.csv  due dates from a CSV (name,duedate)
#   make course-collect ASSIGNMENT=a1_functions [EXCHANGE=/srv/nbgrader/exchange] [ACCOUNTS=yes]
#                                     the exchange's submissions into submitted/, safely
#   make course-feedback-release ASSIGNMENT=a1_functions   feedback pages back into the exchange
#                                     (pages behind the gradebook, after manual grading, regenerated first)
#   make course-extensions EXTENSIONS=extensions.csv   per-student extensions (student_id,assignment,extension)
#   make course-report                grade statistics + histograms: assignments/report.html
#   make course-leaderboard           the capstone's board: every recipe re-run by the grader
#                                     (TOP=3 re-run twice): assignments/leaderboard/board.html
#   make course-regrades              the regrade requests, open ones first (answer in the Formgrader)
#   make course-similarity ASSIGNMENT=a1_functions   which submissions look alike (a pointer, not a penalty)
#   make course-lab                   JupyterLab + Formgrader on the course, local exchange
#   make course-lab LAB_ARGS="--no-browser --port=8899"   more options for jupyter lab
#
# Submissions go in assignments/submitted/<student>/<assignment>/ (make course-collect puts them
# there, or copy them by hand; never nbgrader's bare collect, see README "The exchange"). The gradebook is assignments/gradebook.db (sqlite).

COURSE     := assignments
# nbgrader runs `alembic` from PATH when it creates the gradebook: put the venv's bin first.
# DB_URL (optional) is handed to every command (nbgrader's via nbgrader_config.py, the course's
# tools as their --db-url default) in the environment as COURSE_DB_URL, never on a command line:
# make echoes each command it runs, and a database password must not reach the console or a log.
ifneq ($(DB_URL),)
export COURSE_DB_URL := $(DB_URL)
endif
NBGRADER   := PATH="$(abspath $(VENV))/bin:$$PATH" $(abspath $(VENV))/bin/nbgrader
ASSIGNMENT ?= *
JOBS       ?= $(shell nproc 2>/dev/null || echo 1)
ROSTER     ?= roster.csv
DUEDATES   ?= duedates.csv
EXCHANGE   ?= $(abspath $(COURSE))/exchange

.PHONY: course-build course-check course-release course-grade course-roster course-duedates \
	course-report course-lab course-release-exchange course-export course-collect \
	course-feedback-release course-extensions course-leaderboard course-regrades course-similarity

# The course's own collect and feedback release (torchlight_grader/nbgrader/collect.py), never nbgrader's
# bare `collect` / `release_feedback`: no links followed, an allow-list, size limits, the owner
# check where students have OS accounts (ACCOUNTS=auto|yes|no), the instructor-observed time,
# latest wins. See assignments/README.md, "The exchange".
ACCOUNTS   ?= auto
course-collect: venv
	@test "$(ASSIGNMENT)" != "*" || { echo "course-collect: name one assignment, e.g. ASSIGNMENT=a1_functions" >&2; exit 2; }
	$(PY) -m torchlight_grader.nbgrader.collect collect --course $(COURSE) --exchange "$(EXCHANGE)" \
		--assignment "$(ASSIGNMENT)" --accounts $(ACCOUNTS)

course-feedback-release: venv
	@test "$(ASSIGNMENT)" != "*" || { echo "course-feedback-release: name one assignment, e.g. ASSIGNMENT=a1_functions" >&2; exit 2; }
	$(PY) -m torchlight_grader.course.pages --course $(COURSE) --assignment "$(ASSIGNMENT)"
	$(PY) -m torchlight_grader.nbgrader.collect release-feedback --course $(COURSE) --exchange "$(EXCHANGE)" \
		--assignment "$(ASSIGNMENT)"

# (of COURSE: `make course-release COURSE=/elsewhere` builds that course's notebooks, not these)
course-build: venv
	$(PY) -m torchlight_grader.course.manage build $(COURSE)

course-check: venv
	$(PY) -m torchlight_grader.course.manage check $(COURSE)

# releases.json keeps what each release handed out (the version students hold, recorded before
# the new one replaces it in the gradebook): a test cell whose points or source the instructor
# changed since is reported once as the instructor's change, not as every student's tampering.
course-release: course-build
	$(PY) -m torchlight_grader.nbgrader.releases record --course $(COURSE)
	cd $(COURSE) && $(NBGRADER) generate_assignment "$(ASSIGNMENT)" --force
	$(PY) -m torchlight_grader.nbgrader.releases record --course $(COURSE)

# The released notebooks into the exchange, where students `nbgrader fetch_assignment` them
# (ASSIGNMENT=* puts every released assignment there; --force replaces an earlier release).
course-release-exchange: venv
	mkdir -p "$(EXCHANGE)" && chmod 1777 "$(EXCHANGE)"
	cd $(COURSE) && for a in release/$(ASSIGNMENT)/; do a=$${a#release/}; a=$${a%/}; \
		[ -d "release/$$a" ] || { echo "no released assignment '$$a' in $(COURSE)/release/: run make course-release first" >&2; exit 1; }; \
		$(NBGRADER) release_assignment "$$a" --force --Exchange.root="$(EXCHANGE)" || exit 1; done

# The three exports again from the gradebook, without grading (after manual grading in the
# Formgrader): grades.csv, items.csv, canvas.csv (torchlight_grader.nbgrader.exports).
course-export: venv
	cd $(COURSE) && $(NBGRADER) export --exporter=torchlight_grader.nbgrader.exports.CourseExportPlugin --to=.

# Only what is new or changed since the last run (keyed by a hash of the submission, the release
# and the grader, in graded.json; FULL=1 regrades everything), students in parallel with
# progress lines (torchlight_grader/course/grade.py: how sqlite and Postgres are serialized), then the
# exports once, for everyone: grades.csv, items.csv (per test cell), canvas.csv. One broken
# submission costs only that student (one FAILED line, a feedback page saying why; the target
# fails at the end). Ctrl-C / SIGTERM stop the workers at once; a rerun grades what is left.
# GRADE_ARGS: more options for nbgrader autograde (e.g. --IsolatedGrader.seed=1).
# `exec`: the grader is make's own child, so it sees make go (killed alone, even by SIGKILL) and
# stops instead of writing exports for no one; a second run while one holds the course's lock
# (assignments/.grading.lock) stops at once, naming the holder's pid.
course-grade: venv
	exec $(PY) -m torchlight_grader.course.grade --course $(COURSE) --jobs $(JOBS) --assignment "$(ASSIGNMENT)" \
		$(if $(CLUSTER),--cluster '$(CLUSTER)',) \
		$(if $(filter-out 0 no,$(FULL)),--full,) $(if $(GRADE_ARGS),-- $(GRADE_ARGS),)

# The roster: a CSV with a header row; `id` is required, first_name, last_name, email and
# lms_user_id (the Canvas user ID, used by canvas.csv) are optional.
course-roster: venv
	cd $(COURSE) && $(NBGRADER) db student import "$(abspath $(ROSTER))"
	$(PY) -m torchlight_grader.nbgrader.canvas roster --course $(COURSE)

# Due dates: a CSV `name,duedate` (e.g. `a1_functions,2026-02-01 23:59:00 Europe/Berlin`).
# Late submissions lose 10% per started day (nbgrader_config.py, torchlight_grader/nbgrader/late.py).
course-duedates: venv
	cd $(COURSE) && $(NBGRADER) db assignment import "$(abspath $(DUEDATES))"

# Per-student extensions: a CSV `student_id,assignment,extension` (e.g. `bob,a1_functions,2 days`),
# checked whole, then copied to $(COURSE)/extensions.csv (a bad row imports nothing). Collect, the
# late penalty, the feedback page and the report use the student's own due date.
EXTENSIONS ?= extensions.csv
course-extensions: venv
	$(PY) -m torchlight_grader.nbgrader.late import-extensions "$(abspath $(EXTENSIONS))" --course $(COURSE)

course-leaderboard: venv
	$(PY) -m torchlight_grader.course.leaderboard --course $(COURSE) --jobs $(JOBS) --top $(or $(TOP),3)

course-report: venv
	$(PY) -m torchlight_grader.nbgrader.regrade queue --course $(COURSE) --quiet
	$(PY) -m torchlight_grader.course.report $(COURSE)/grades.csv $(COURSE)/items.csv -o $(COURSE)/report.html

# Which submissions of one assignment look alike (copydetect's winnowing, the starter code left
# out): assignments/similarity/<a>.html (pairs ranked, matching spans side by side) and .csv.
# A pointer for a person, never a penalty (torchlight_grader/course/similarity.py).
course-similarity: venv
	@test "$(ASSIGNMENT)" != "*" || { echo "course-similarity: name one assignment, e.g. ASSIGNMENT=a1_functions" >&2; exit 2; }
	$(PY) -m torchlight_grader.course.similarity --course $(COURSE) --assignment "$(ASSIGNMENT)"

# Regrade requests (a student's regrade-request.txt beside the notebook, taken out at collect):
# open ones first, answered once the submission has a new comment in the Formgrader
# (torchlight_grader/nbgrader/regrade.py); also in the class report.
course-regrades: venv
	$(PY) -m torchlight_grader.nbgrader.regrade queue --course $(COURSE)

# JupyterLab started in the course directory (so the Formgrader reads nbgrader_config.py), the
# venv first on PATH, and a local exchange folder (writable by all, as nbgrader wants it).
course-lab: venv
	mkdir -p "$(EXCHANGE)" && chmod 1777 "$(EXCHANGE)"
	cd $(COURSE) && COURSE_EXCHANGE="$(EXCHANGE)" \
		PATH="$(abspath $(VENV))/bin:$$PATH" $(abspath $(VENV))/bin/jupyter lab \
		--ServerApp.root_dir=. $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)
