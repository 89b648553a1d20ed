"""Getting data out of a real results DB: `collector series` prints every run's per-second
figures as CSV and JSON, `report --percentiles` reads any percentile from the stored histograms,
and `compare` takes two `collector export` files (no results DB) with `--map` for target names."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from bench.synthetic import synthetic_spec
from services.common.messages.results import RunResult
from services.common.results.histogram import Histogram
from services.common.store import Store
from services.scheduler.plan import run_specs

from tests.integration.fleet import ROOT

pytestmark = pytest.mark.integration


def _cli(s, *args: str, db: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if db:
        env.update(BENCHFLEET_DB_NAME=s.db_name, BENCHFLEET_DB_HOST=s.db_host, BENCHFLEET_DB_PORT=str(s.db_port),
                   BENCHFLEET_DB_USER=s.db_user)
        if s.db_password and "BENCHFLEET_DB_PASSWORD_FILE" not in env:
            env["BENCHFLEET_DB_PASSWORD"] = s.db_password
    else:
        # No results DB at all: a port nothing listens on, so any connection attempt fails.
        env.update(BENCHFLEET_DB_HOST="127.0.0.1", BENCHFLEET_DB_PORT="9", BENCHFLEET_DB_NAME="none")
    return subprocess.run([sys.executable, "-m", "services.collector.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _result(r, cid: str, *, slow_us: float, q0: int) -> RunResult:
    """A result with 3 seconds of series and a histogram of 998 fast transactions (1 ms) and two
    slow ones, so p99.9 is a slow one while p50 and p99 are fast."""
    h = Histogram()
    for _ in range(998):
        h.record(1000.0)
    h.record(slow_us)
    h.record(slow_us)
    ok = not (r.cell.threads == 4 and r.repetition == 2 and r.cell.target == "new")
    return RunResult(
        run_id=r.run_id, campaign_id=cid, cell=r.cell, repetition=r.repetition, status="ok" if ok else "failed",
        error=None if ok else "lost the server", worker="w1", host="h1", started_at=1_700_000_000.0,
        ended_at=1_700_000_004.0, measured_s=3.0 if ok else 0.0,
        totals={"transactions": 1000, "reads": 3 * q0 + 3, "errors": 1, "ignored_errors": 2} if ok else {},
        series={"transactions": [333, 333, 334], "queries": [q0, q0 + 1, q0 + 2], "errors": [0, 1, 0],
                "ignored_errors": [0, 2, 0], "reconnects": [0, 0, 1]} if ok else {},
        latency={"p50_ms": 1.0, "p95_ms": 1.0, "p99_ms": 1.0, "max_ms": slow_us / 1000, "histogram": h.to_wire()}
        if ok else {})


def _store(s, cid: str, targets: list[str], *, slow_us: float, q0: int) -> None:
    spec = synthetic_spec("dataout", targets, ["oltp_point_select"], [1, 4], 2, duration=3, warmup=1)
    with Store(s) as store:
        store.campaigns.record(cid, spec, run_specs(spec, cid), now=1_700_000_000.0)
        for r in run_specs(spec, cid):
            store.results.store(_result(r, cid, slow_us=slow_us, q0=q0 + (100 if r.cell.target == "new" else 0)))


def test_series_prints_every_runs_seconds_as_csv_and_json(results_db, tmp_path):
    """`collector series` gives one CSV line per run and measured second with its cell and every
    per-second count, and JSON with each run's seconds and the percentiles asked."""
    _store(results_db, "out-1", ["base", "new"], slow_us=50_000.0, q0=1000)
    done = _cli(results_db, "series", "out-1")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    # 2 targets x 2 thread counts x 2 repetitions, 3 seconds each, but the failed run has none.
    assert len(rows) == 7 * 3
    first = rows[0]
    assert (first["target"], first["workload"], first["threads"], first["repetition"], first["second"]) == \
        ("base", "oltp_point_select", "1", "1", "0")
    second = rows[1]
    assert (second["queries"], second["errors"], second["ignored_errors"], second["reconnects"]) == ("1001", "1", "2", "0")
    assert {r["run_id"] for r in rows if r["target"] == "new" and r["threads"] == "4"} and \
        all(r["repetition"] == "1" for r in rows if r["target"] == "new" and r["threads"] == "4")

    out = tmp_path / "series.json"
    done = _cli(results_db, "series", "out-1", "--format", "json", "--percentiles", "50,99.9", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stderr and done.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["campaign_id"] == "out-1" and len(doc["runs"]) == 8
    run = doc["runs"][0]
    assert run["latency_ms"]["p50"] == pytest.approx(1.0, rel=0.006)
    assert run["latency_ms"]["p99.9"] == pytest.approx(50.0, rel=0.006)
    assert [s["queries"] for s in run["seconds"]] == [1000, 1001, 1002]
    failed = [r for r in doc["runs"] if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["seconds"] == [] and failed[0]["latency_ms"] == {"p50": None, "p99.9": None}

    done = _cli(results_db, "series", "no-such-campaign")
    assert done.returncode == 2 and "no campaign 'no-such-campaign'" in done.stderr


def test_report_percentiles_come_from_the_histograms(results_db):
    """`report --percentiles 50,99.9` adds each cell's p99.9 from its runs' merged histograms (the
    slow transaction, 50 ms, where the stored p99 says 1 ms); JSON carries them too."""
    _store(results_db, "out-1", ["base", "new"], slow_us=50_000.0, q0=1000)
    done = _cli(results_db, "report", "out-1", "--percentiles", "50,99.9")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("workload") and "p99.9 ms" in line)
    cell = lines[head + 1].split()
    assert cell[:5] == ["oltp_point_select", "1", "base", "2", "2000"]
    assert float(cell[5]) == pytest.approx(1.0, rel=0.006) and float(cell[6]) == pytest.approx(50.0, rel=0.006)
    done = _cli(results_db, "report", "out-1", "--format", "json", "--percentiles", "99.9")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    new4 = next(c for c in doc["percentiles"] if c["target"] == "new" and c["threads"] == 4)
    assert new4["runs"] == 1 and new4["percentiles_ms"]["p99.9"] == pytest.approx(50.0, rel=0.006)
    done = _cli(results_db, "report", "out-1", "--percentiles", "50,101")
    assert done.returncode == 2 and "--percentiles: 101" in done.stderr


def test_compare_two_export_files_without_a_results_db(results_db, tmp_path):
    """Two campaigns exported to files (one with the old `--json FILE`, which warns) compare with no
    results DB reachable; targets named differently match with --map, and without it the command
    says they share no cell."""
    _store(results_db, "out-1", ["base", "new"], slow_us=50_000.0, q0=1000)
    _store(results_db, "out-2", ["mariadb-10", "mariadb-11"], slow_us=50_000.0, q0=1500)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    done = _cli(results_db, "export", "out-1", "--out", str(a))
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    # The old spelling still writes the file, and says what to write instead.
    done = _cli(results_db, "export", "out-2", "--json", str(b))
    assert done.returncode == 0 and json.loads(b.read_text())["campaign"]["campaign_id"] == "out-2", done.stderr
    assert "warning: --json is deprecated and will be removed: use --out FILE" in done.stderr
    done = _cli(results_db, "compare", str(a), str(b), db=False)
    assert done.returncode == 2 and "share no cell" in done.stderr
    done = _cli(results_db, "compare", str(a), str(b), "--map", "base=mariadb-10", "--map", "new=mariadb-11",
                db=False)
    assert done.returncode == 0, done.stderr
    assert "target mariadb-10" in done.stdout and "target mariadb-11" in done.stdout
    assert "out-1" in done.stdout and "out-2" in done.stdout
    done = _cli(results_db, "compare", str(a), str(b), "--map", "nosuch=mariadb-10", db=False)
    assert done.returncode == 2 and "--map: campaign out-1 has no target 'nosuch'" in done.stderr
    done = _cli(results_db, "compare", str(a), str(tmp_path / "missing.json"), db=False)
    assert done.returncode == 2 and "missing.json" in done.stderr
