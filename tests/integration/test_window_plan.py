"""`scheduler plan` against the results DB: it warns when a spec's window is shorter than 10 mean
response times the latest campaign measured on a cell, and a longer ``duration_by_threads``
silences it; the stored short run reads back with its flag and window columns."""

from __future__ import annotations

import pytest

from services.common.messages.results import RunResult, Window
from services.common.results.stalls import assess
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.scheduler import plan

from tests.integration.fleet import Fleet, target_yaml

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(rabbitmq, mariadb_params, settings, tmp_path):
    f = Fleet.create(settings, tmp_path)
    yield f
    f.teardown()


def _spec_text(fleet: Fleet, extra: str = "") -> str:
    s = fleet.settings
    return ("name: windows\ntargets:\n" + target_yaml(s, "A", "bf_win_a") + "workloads: [oltp_point_select]\n"
            "data: {tables: 1, table_size: 100}\nthreads: [1, 64]\nduration: 3s\nwarmup: 0s\nrepeat: 2\nseed: 1\n"
            + extra)


def test_plan_warns_for_a_short_window_and_the_stored_run_says_short(fleet, tmp_path):
    spec = parse_spec(_spec_text(fleet), "spec.yaml")
    runs = plan.run_specs(spec, "c-win")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-win", spec, runs, now=1_700_000_000.0)
        for r in runs:
            # 64 connections at 32 tps: each waits 2 s per transaction, 1.5 per connection in 3 s.
            tps = 32.0 if r.cell.threads == 64 else 500.0
            tx = int(tps * 3)
            window = Window(connections=r.cell.threads, completed_per_connection_min=0,
                            completed_per_connection_median=1.0, starved_connections=20, in_flight_at_end=64,
                            oldest_in_flight_s=2.9) if r.cell.threads == 64 else None
            store.results.store(RunResult(
                run_id=r.run_id, campaign_id="c-win", cell=r.cell, repetition=r.repetition, status="ok", worker="w",
                host="h", started_at=1_700_000_000.0, ended_at=1_700_000_003.0, measured_s=3.0,
                totals={"transactions": tx, "reads": tx}, window=window,
                latency={"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "max_ms": 4.0},
                quality=assess([tx // 3] * 3, warmup_s=0, duration_s=3, wall_s=3, completed=tx,
                               threads=r.cell.threads)))
        rows = {(r.threads, r.repetition): r for r in store.results.rows("c-win")}
    short = rows[(64, 1)]
    assert short.flags == ("short",) and (short.starved_connections, short.oldest_in_flight_s) == (20, 2.9)
    assert rows[(1, 1)].flags == () and rows[(1, 1)].starved_connections is None

    path = tmp_path / "spec.yaml"
    path.write_text(_spec_text(fleet))
    out = fleet.cli("scheduler", "plan", str(path))
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "A / oltp_point_select / 64 threads: a 3s window is shorter than 10 x" in warnings[0]
    assert "campaign c-win measured there (2 s = threads / mean tps" in warnings[0]

    path.write_text(_spec_text(fleet, "duration_by_threads: {64: 30s}\n"))
    out = fleet.cli("scheduler", "plan", str(path))
    assert out.returncode == 0 and "warning:" not in out.stderr, out.stderr
    assert "0s warm-up + 3s measured at 1 threads; 0s warm-up + 30s measured at 64 threads" in out.stdout

    # The workload's own window silences it too.
    path.write_text(_spec_text(fleet).replace("[oltp_point_select]",
                                              "[{name: oltp_point_select, duration_by_threads: {64: 30s}}]"))
    out = fleet.cli("scheduler", "plan", str(path))
    assert out.returncode == 0 and "warning:" not in out.stderr, out.stderr
