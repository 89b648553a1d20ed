"""`scheduler gate CAMPAIGN --fail-on-slower PCT --confirm` against the real broker, results DB and a
worker: a stored campaign whose target lost 20% fails the gate; the confirming campaign re-runs that
cell with its baseline (two identical targets here), clears it, and the gate passes."""

from __future__ import annotations

import re

import pytest

from services.common.messages.results import Latency, RunResult
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.scheduler import plan

from tests.integration.fleet import Fleet, target_yaml

pytestmark = pytest.mark.integration


def _spec(fleet: Fleet) -> str:
    s = fleet.settings
    return (f"name: gate\npool: {fleet.pool}\ntargets:\n" + target_yaml(s, "A", "bf_gate_a")
            + target_yaml(s, "B", "bf_gate_b") + "workloads: [oltp_point_select]\n"
            "data: {tables: 1, table_size: 1000}\nthreads: [1]\nduration: 1s\nwarmup: 0s\nrepeat: 2\nseed: 3\n")


def _store_slower_campaign(fleet: Fleet, campaign_id: str) -> None:
    """The campaign as if it had run: B 20% below A in both blocks, with a little noise."""
    spec = parse_spec(_spec(fleet))
    qps = {("A", 1): 1000.0, ("A", 2): 1010.0, ("B", 1): 800.0, ("B", 2): 812.0}
    with Store(fleet.settings) as store:
        runs = plan.run_specs(spec, campaign_id)
        store.campaigns.record(campaign_id, spec, runs)
        for r in runs:
            q = qps[(r.cell.target, r.repetition)]
            store.results.store(RunResult(
                run_id=r.run_id, campaign_id=campaign_id, cell=r.cell, repetition=r.repetition, status="ok",
                worker="w", host="h", started_at=0, ended_at=1, measured_s=1,
                totals={"transactions": int(q), "reads": int(q)}, latency=Latency(p50_ms=1, p95_ms=1, p99_ms=1, max_ms=1)))


def test_confirm_reruns_the_failing_cell_alone_and_judges_it_again(fleet):
    """Without --confirm the stored 20% loss fails a 3% gate (exit 5). With it, a campaign of that cell
    and its baseline alone (2 targets x 2 repetitions) runs on a real worker and the cell is judged
    again on those runs: the exit code follows what the output says of it, naming the confirming
    campaign. (Whether two identical targets' 1-second runs clear it is up to the machine's noise;
    the decision itself is tested on literal figures in tests/unit/test_gate_confirm.py.)"""
    _store_slower_campaign(fleet, "gate-stored")
    r = fleet.cli("scheduler", "gate", "gate-stored", "--fail-on-slower", "3", timeout=60)
    assert r.returncode == 5, r.stderr
    assert "1 cell(s) of gate-stored significantly slower than baseline A by more than 3%" in r.stderr
    assert "B oltp_point_select t=1: vs A 0.80" in r.stderr
    # Recorded for the history board: failed against its own baseline (no other campaign), by the caller.
    with Store(fleet.settings) as store:
        first = store.judgements.gate_verdicts("gate-stored")
    assert [(v.against_campaign, v.verdict, v.beyond, v.slower_cells, v.judged_by) for v in first] == [
        (None, "failed", 0.03, 1, fleet.settings.db_user)]

    fleet.start_collector()
    fleet.start_worker("w1")
    r = fleet.cli("scheduler", "gate", "gate-stored", "--fail-on-slower", "3", "--confirm", "--poll", "0.3",
                  timeout=120)
    print(r.stderr)  # the gate's lines, shown when the test fails
    confirming = re.search(r"confirming: campaign (gate-confirm-\S+) re-runs the 1 failing cell", r.stderr)
    assert confirming, r.stderr + fleet.logs()
    cid = confirming.group(1)
    assert f"confirming campaign {cid}: the 1 failing cell(s) judged again on its runs alone (1 compared" in r.stderr
    if r.returncode == 0:
        assert "not confirmed: B oltp_point_select t=1" in r.stderr
        assert f"gate passed: none of the 1 failing cell(s) of gate-stored was confirmed by campaign {cid}" in r.stderr
    else:
        assert r.returncode == 5, r.stderr
        assert "\nconfirmed: B oltp_point_select t=1" in r.stderr
        assert f"error: 1 of 1 failing cell(s) of gate-stored slower again in confirming campaign {cid}" in r.stderr
    with Store(fleet.settings) as store:
        assert store.runs.counts(cid)["done"] == 4
        assert {(x.target, x.repetition) for x in store.results.rows(cid)} == {("A", 1), ("A", 2), ("B", 1), ("B", 2)}
        assert store.campaigns.get(cid).name == "gate-confirm"
        # The confirmed gate's verdict, against the confirming campaign, as its exit code says.
        last = store.judgements.gate_verdicts("gate-stored")[-1]
        assert (last.against_campaign, last.verdict) == (cid, "passed" if r.returncode == 0 else "failed")
