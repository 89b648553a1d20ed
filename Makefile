# The two commands: `make demo` (a small campaign end to end) and `make test` (the whole suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
ENV := set -a; . var/local.env; set +a;

.PHONY: demo test venv services up down clean study

$(BIN)/scheduler: pyproject.toml
	$(PY) -m venv $(VENV) || (deploy/ensure-services python && $(PY) -m venv $(VENV))
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/scheduler

services:
	deploy/ensure-services rabbitmq mariadb worker prometheus alertmanager chromium

up: venv
	deploy/local/up

down:
	deploy/local/down

demo: venv up
	$(ENV) set -a; [ ! -f var/fleet.env ] || . var/fleet.env; set +a; $(BIN)/scheduler submit examples/quickstart.yaml --wait
	@echo "The fleet is still running: 'make down' stops it; logs are in var/log/."

test: venv services
	$(ENV) $(BIN)/python -m pytest $(PYTEST_ARGS)

clean: down
	rm -rf var

# One seed study (STUDY=keycache|thread-pool|random-points-ranges|builds|all) on the local
# fleet; writes docs/studies/STUDY.md and its HTML reports.
study: venv up
	$(ENV) set -a; [ ! -f var/fleet.env ] || . var/fleet.env; set +a; $(BIN)/python examples/studies/run $(STUDY)
