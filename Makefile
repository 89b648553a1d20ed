# The two commands: `make demo` (a small campaign end to end) and `make test` (the whole suite);
# `make unit` runs the unit tests alone (no services, under a minute).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# import-linter (the doors between rooms, pyproject [tool.importlinter]) and what it brings, in a folder
# of their own off the venv's path: among them is rich, which structlog imports whenever it can, in
# every CLI and service process the suite starts (60-110 ms of CPU each, which a user's install, without
# rich, does not pay). tests/unit/test_import_contracts.py runs it with this folder on its path.
LINT := $(VENV)/lint
ENV := set -a; . var/local.env; set +a;

.PHONY: demo test unit venv lock services up down clean study study-down

# The suite starts hundreds of Python processes (pytest's, and the fleets' services): with bytecode
# writing off (PYTHONDONTWRITEBYTECODE, set on some machines) each one compiles services/ again and
# pytest rewrites every test module's asserts again, seconds of CPU each time. __pycache__ is ignored.
unexport PYTHONDONTWRITEBYTECODE

# The versions the suite runs against: pyproject gives ranges, requirements-lock.txt the exact pins.
LOCK := requirements-lock.txt

# The load core (C, services/worker/driver/native/csrc) is compiled by pip install: its headers
# and compiler come first (deploy/ensure-services build, which needs root or sudo only when
# something is missing).
CORE_SRC := setup.py $(wildcard services/worker/driver/native/csrc/*.c services/worker/driver/native/csrc/*.h)
BUILD_READY = command -v gcc >/dev/null && [ -f /usr/include/mariadb/mysql.h ] && \
	$(PY) -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'

$(BIN)/scheduler: pyproject.toml $(LOCK) $(CORE_SRC)
	$(BUILD_READY) || deploy/ensure-services build
	$(PY) -m venv $(VENV) || (deploy/ensure-services python && $(PY) -m venv $(VENV))
	$(BIN)/pip install -q -c $(LOCK) -e '.[test]'
	@# A venv made before import-linter moved to $(LINT) still holds it, and rich, on the services' path.
	$(BIN)/pip uninstall -q -y import-linter rich 2>/dev/null || true
	touch $@

# Made anew, not upgraded in place: pip --target leaves an older version's metadata beside the new one's.
# The version range is this line's (import-linter is in none of pyproject's extras, which go on the path).
$(LINT)/importlinter: $(BIN)/scheduler
	rm -rf $(LINT)
	$(BIN)/pip install -q -c $(LOCK) --target $(LINT) 'import-linter>=2.17,<3'

# Write the lock again from the venv (after changing a range in pyproject and `pip install -U` in it).
# Both folders are read (the venv and $(LINT)); a package both hold must have one version in them.
lock:
	@[ -d $(LINT)/importlinter ] || { echo "make lock: no import-linter in $(LINT) (make venv)" >&2; exit 1; }
	$(BIN)/pip freeze --exclude-editable --local > $(LOCK).venv
	$(BIN)/pip freeze --path $(LINT) > $(LOCK).lint
	{ echo "# The exact versions the test suite runs against (pip constraints; \`make venv\` installs with -c)."; \
	  echo "# Written by \`make lock\` from the venv; pyproject.toml gives the ranges a release accepts."; \
	  sort -f -u $(LOCK).venv $(LOCK).lint; } > $(LOCK).tmp
	@two=$$(grep -v '^#' $(LOCK).tmp | cut -d= -f1 | tr 'A-Z_' 'a-z-' | sort | uniq -d); \
	  [ -z "$$two" ] || { echo "make lock: the venv and $(LINT) hold different versions of: $$two" >&2; exit 1; }
	mv $(LOCK).tmp $(LOCK)
	rm -f $(LOCK).venv $(LOCK).lint

venv: $(BIN)/scheduler $(LINT)/importlinter

services:
	deploy/ensure-services rabbitmq mariadb worker prometheus alertmanager chromium

up: venv
	deploy/local/up

down:
	deploy/local/down

demo: venv up
	$(ENV) set -a; [ ! -f var/fleet.env ] || . var/fleet.env; set +a; $(BIN)/scheduler submit examples/quickstart.yaml --wait
	@echo "The fleet is still running: 'make down' stops it; logs are in var/log/."

# The whole suite in two passes (docs/operations.md, "Running the tests"): the tests marked `serial`
# alone, then the rest in TEST_JOBS processes, each file whole in one process (they mostly wait on
# brokers, servers and windows, so more processes than cores still pay). Both passes always run; make
# fails when either failed (pytest's 5, nothing selected, is no failure: PYTEST_ARGS may pick one file).
TEST_JOBS ?= 4
# The serial pass collects tests/integration alone (every serial test is there), unless PYTEST_ARGS
# names what to run.
SERIAL_ARGS := $(if $(PYTEST_ARGS),$(PYTEST_ARGS),tests/integration)
# Each pass ends with its slowest tests and fixtures, so a suite that grows slower says where.
DURATIONS := --durations=15
test: venv services
	$(ENV) rc=0; \
	$(BIN)/python -m pytest -m serial $(DURATIONS) $(SERIAL_ARGS) || { s=$$?; [ $$s -eq 5 ] || rc=$$s; }; \
	$(BIN)/python -m pytest -m "not serial" -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder $(DURATIONS) $(PYTEST_ARGS) || { s=$$?; [ $$s -eq 5 ] || rc=$$s; }; \
	exit $$rc

# The unit tests are CPU-bound: one process per core, each file whole in one (as in make test's parallel pass).
UNIT_JOBS ?= 2
unit: venv
	$(BIN)/python -m pytest tests/unit -n $(UNIT_JOBS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

clean: down
	rm -rf var

# One seed study (STUDY=keycache|thread-pool|random-points-ranges|builds|all) on a fleet of its
# own, apart from `make demo`'s and the tests': its own RabbitMQ vhost and broker users, queue
# namespace, results DB (STUDY_FLEET with - as _; it must start with benchfleet) and var/ dir
# (var/STUDY_FLEET: env files, pid files, logs). It writes no machine-wide settings file
# (BENCHFLEET_CONFIG empty). Writes docs/studies/STUDY.md and its HTML reports;
# `make study-down` stops the study's fleet.
STUDY_FLEET ?= benchfleet-study
STUDY_ENV := BENCHFLEET_VAR=$(CURDIR)/var/$(STUDY_FLEET) BENCHFLEET_CONFIG= BENCHFLEET_NAMESPACE=$(STUDY_FLEET) \
	BENCHFLEET_AMQP_VHOST=$(STUDY_FLEET) BENCHFLEET_AMQP_USER_PREFIX=$(STUDY_FLEET) \
	BENCHFLEET_DB_NAME=$(subst -,_,$(STUDY_FLEET)) BENCHFLEET_SD_DIR=$(CURDIR)/var/$(STUDY_FLEET)/targets \
	BENCHFLEET_LOCAL_MONITORING=0
study: venv
	mkdir -p var/$(STUDY_FLEET)
	$(STUDY_ENV) deploy/local/up collector worker
	$(STUDY_ENV) sh -c 'set -a; . "$$BENCHFLEET_VAR/local.env"; . "$$BENCHFLEET_VAR/fleet.env"; set +a; \
	  exec $(BIN)/python examples/studies/run $(STUDY_FLAGS) $(STUDY)'

study-down:
	$(STUDY_ENV) deploy/local/down
