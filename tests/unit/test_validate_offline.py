"""`scheduler validate --offline` and `--json`: a spec linted in a CI job gets the same answer on
any machine, settings file or not, and a machine-readable one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.common.cli import EXIT_OK, EXIT_USAGE
from services.scheduler.validation import SCHEMA

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "examples/quickstart.yaml").read_text()


def _scheduler(*args: str, settings_file: Path | None = None) -> subprocess.CompletedProcess:
    """The scheduler as a user types it, with ``settings_file`` as the fleet's settings (none: none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHFLEET_")}
    env.update(PYTHONPATH=str(ROOT), BENCHFLEET_CONFIG=str(settings_file) if settings_file else "")
    return subprocess.run([sys.executable, "-m", "services.scheduler.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def _fleet_settings(tmp_path: Path) -> Path:
    """A fleet whose settings refuse the quickstart: runs of at most 60 s, and its results DB in the
    database the quickstart's first target uses."""
    path = tmp_path / "settings.env"
    path.write_text("BENCHFLEET_MAX_RUN_S=60\nBENCHFLEET_DB_NAME=sbtest_quick_a\n")
    return path


def _spec(tmp_path: Path, text: str = QUICKSTART) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace("duration: 4s", "duration: 5m"))
    return str(path)


def test_validate_depends_on_the_settings_file_without_offline(tmp_path):
    """Without --offline, validate checks what submit checks, so a settings file changes its answer
    (the premise of --offline: this test fails if the fleet's checks were dropped)."""
    spec = _spec(tmp_path)
    assert _scheduler("validate", spec).returncode == EXIT_OK
    r = _scheduler("validate", spec, settings_file=_fleet_settings(tmp_path))
    assert r.returncode == EXIT_USAGE
    assert "max_run_s" in r.stderr.replace("MAX_RUN_S", "max_run_s") and "results DB" in r.stderr


def test_offline_gives_the_same_answer_with_or_without_a_settings_file(tmp_path):
    """`validate --offline` exits 0 and prints the same lines whether a settings file exists, says
    what it left unchecked, and reads no settings file at all (an unreadable one does not matter)."""
    spec = _spec(tmp_path)
    runs = [_scheduler("validate", "--offline", spec, settings_file=f)
            for f in (None, _fleet_settings(tmp_path), tmp_path / "missing.env")]
    assert [r.returncode for r in runs] == [EXIT_OK] * 3
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout == f"{spec}: ok (16 runs)\n"
    assert runs[0].stderr == runs[1].stderr == runs[2].stderr
    assert "offline: not checked: a run's length against the fleet's max_run_s" in runs[0].stderr


def test_a_wrong_spec_is_refused_offline_too(tmp_path):
    """Offline still checks everything the spec itself says: a wrong field exits 2 naming it."""
    r = _scheduler("validate", "--offline", _spec(tmp_path, QUICKSTART.replace("threads: [1, 8]", "threads: [0]")))
    assert r.returncode == EXIT_USAGE
    assert r.stderr.strip().endswith("threads[0]: must be > 0")


def test_plan_offline_is_the_same_with_or_without_a_settings_file(tmp_path):
    """`plan --offline` prints the same plan whatever the machine, and says the power estimate is left out."""
    spec = _spec(tmp_path)
    plain, fleet = (_scheduler("plan", "--offline", spec, settings_file=f) for f in (None, _fleet_settings(tmp_path)))
    assert plain.returncode == fleet.returncode == EXIT_OK
    assert plain.stdout == fleet.stdout and "power: not estimated offline" in plain.stdout
    assert _scheduler("plan", spec, settings_file=_fleet_settings(tmp_path)).returncode == EXIT_USAGE


def test_validate_json_of_a_good_spec(tmp_path):
    """`validate --json` prints one versioned document on stdout: ok, the run count, the notes."""
    r = _scheduler("validate", "--offline", "--json", _spec(tmp_path))
    assert r.returncode == EXIT_OK
    doc = json.loads(r.stdout)
    assert doc["schema"] == SCHEMA == "benchfleet.validation/1"
    assert doc["ok"] is True and doc["offline"] is True and doc["runs"] == 16 and doc["errors"] == []
    assert doc["notes"] and doc["notes"][0].startswith("offline: not checked")


def test_validate_json_names_every_wrong_field(tmp_path):
    """Each wrong field is one entry with its file, YAML line, field path, message and the name meant."""
    text = QUICKSTART.replace("warmup: 1s", "warmpu: 1s").replace("[oltp_point_select, oltp_read_only]",
                                                                  "[oltp_point_selct, oltp_read_only]")
    spec = _spec(tmp_path, text)
    r = _scheduler("validate", "--offline", "--json", spec)
    assert r.returncode == EXIT_USAGE and r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["runs"] is None and doc["notes"][0].startswith("offline: not checked")
    lines = {n: i for i, n in enumerate(text.splitlines(), 1)}
    assert doc["errors"] == [
        {"file": spec, "line": lines["workloads: [oltp_point_selct, oltp_read_only]"], "field": "workloads[0].name",
         "message": "unknown workload 'oltp_point_selct' (did you mean oltp_point_select?)",
         "suggestion": "oltp_point_select"},
        {"file": spec, "line": lines["warmpu: 1s"], "field": "warmpu",
         "message": "unknown field (did you mean warmup?)", "suggestion": "warmup"},
    ]


def test_validate_json_online_carries_the_fleet_checks(tmp_path):
    """Without --offline the JSON document holds the fleet's checks too, with their field paths."""
    r = _scheduler("validate", "--json", _spec(tmp_path), settings_file=_fleet_settings(tmp_path))
    doc = json.loads(r.stdout)
    assert r.returncode == EXIT_USAGE and doc["offline"] is False
    assert [e["field"] for e in doc["errors"]] == ["duration", "targets[0].database"]
