"""An open-loop rate the server cannot keep is a finding, not a failure: on a real fleet the run
whose backlog passes its bound is stored once, with what it measured and how far behind the rate
it fell, marked in the report, and not tried again."""

from __future__ import annotations

import json

import pytest

from services.common.store import Store

from tests.integration.fleet import Fleet, target_yaml

pytestmark = pytest.mark.integration


def test_a_run_that_falls_behind_its_rate_is_stored_marked_and_not_retried(fleet: Fleet):
    fleet.start_collector()
    fleet.start_worker("w1")
    spec = fleet.workdir / "behind.yaml"
    spec.write_text(f"name: behind\npool: {fleet.pool}\ntargets:\n{target_yaml(fleet.settings, 'A', 'bf_it_behind')}"
                    "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 1000}\nthreads: [1]\n"
                    "duration: 20s\nwarmup: 0\nrepeat: 1\nrate: 1000000\n")
    done = fleet.cli("scheduler", "submit", str(spec), "--wait", "--poll", "0.5", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + fleet.logs()
    cid = next(line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.startswith("campaign "))
    with Store(fleet.settings) as store:
        rows = store.results.rows(cid)
        row, = rows
        result = store.results.get(row.run_id)
        attempts = store.db.rows("SELECT attempts FROM runs WHERE run_id=%s", (row.run_id,))
    assert row.status == "ok" and "behind" in row.flags, (row.status, row.flags, row.error)
    behind = result.quality.behind
    assert behind is not None and behind.due >= 1_000_000 and behind.rate == 1_000_000
    assert 0 < behind.after_s < 15 and result.totals.transactions > 0
    assert attempts == [(1,)] and result.attempt == 1, "the run was tried again"
    assert '"run_attempt_failed"' not in fleet.logs()
    report = fleet.cli("collector", "report", cid)
    assert report.returncode == 0, report.stderr
    assert "Fell behind the offered rate (~)" in report.stdout, report.stdout
    assert f"{behind.due:,} transactions due and not started" in report.stdout, report.stdout
    exported = fleet.cli("collector", "report", cid, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert '"behind"' in json.dumps(json.loads(exported.stdout)), exported.stdout[:2000]
