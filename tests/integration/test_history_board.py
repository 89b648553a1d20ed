"""The history board's SQL (dashboards/history.json) on the real results DB: two campaigns of one spec
stored with known q/s, a change point and two gate verdicts recorded as the collector and the gate record
them; each query of the board returns what it shows, for that spec only."""

from __future__ import annotations

import mysql.connector
import pytest

from services.collector.dashboards import (CHANGE_POINTS_SQL, GATE_FAILURES_SQL, GATE_VERDICTS_SQL,
                                           HISTORY_CHANGES_TABLE_SQL, HISTORY_QPS_SQL, SPEC_VAR_SQL, history)
from services.common.messages.results import RunResult
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.common.store.judgements import GateRecord, StoredChangePoint
from services.scheduler import plan

from tests.integration.fleet import Fleet, target_yaml

pytestmark = pytest.mark.integration

#: q/s of each campaign's runs by target: B loses a fifth in the second campaign.
QPS = {"night-1": {"A": (1000, 1010), "B": (1000, 990)}, "night-2": {"A": (1000, 1020), "B": (800, 810)}}


def _spec(fleet: Fleet, name: str) -> str:
    s = fleet.settings
    return (f"name: {name}\npool: {fleet.pool}\ntargets:\n" + target_yaml(s, "A", "bf_hb_a") + target_yaml(s, "B", "bf_hb_b")
            + "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 1000}\nthreads: [1]\nduration: 1s\n"
            "warmup: 0s\nrepeat: 2\nseed: 3\n")


def _store(store: Store, fleet: Fleet, name: str, campaign_id: str, at: float, qps: dict[str, tuple[int, int]]) -> None:
    spec = parse_spec(_spec(fleet, name))
    runs = plan.run_specs(spec, campaign_id)
    store.campaigns.record(campaign_id, spec, runs, now=at)
    for r in runs:
        q = qps[r.cell.target][r.repetition - 1]
        store.results.store(RunResult(run_id=r.run_id, campaign_id=campaign_id, cell=r.cell, repetition=r.repetition,
                                      status="ok", worker="w", host="h", started_at=at, ended_at=at + 1, measured_s=1,
                                      totals={"transactions": q, "reads": q}))


def test_history_board_queries_show_the_specs_throughput_change_points_and_failed_gates(fleet):
    with Store(fleet.settings) as store:
        _store(store, fleet, "nightly", "night-1", 1_000_000.0, QPS["night-1"])
        _store(store, fleet, "nightly", "night-2", 1_086_400.0, QPS["night-2"])
        _store(store, fleet, "other", "other-1", 1_100_000.0, QPS["night-1"])
        store.judgements.record_change_points([StoredChangePoint(
            "nightly", "night-2", "B", "oltp_point_select", 1, "qps", 0.805, 0.001, 0.004, "worse", "night-2",
            1_086_500.0)])
        store.judgements.record_gate(GateRecord("night-2", "night-1", "failed", 0.05, 1, 1_086_600.0))
        store.judgements.record_gate(GateRecord("night-1", None, "unjudged", 0.05, 0, 1_000_100.0))
        store.judgements.record_gate(GateRecord("other-1", None, "failed", 0.05, 1, 1_100_100.0))
    board = history()
    sent = {a["name"]: a["target"]["rawSql"] for a in board["annotations"]["list"] if "target" in a}
    assert sent == {"Change points": " ".join(CHANGE_POINTS_SQL.split()),
                    "Gate failures": " ".join(GATE_FAILURES_SQL.split())}
    conn = mysql.connector.connect(**fleet.settings.db_params())
    try:
        def rows(sql: str) -> list[tuple]:
            cur = conn.cursor()
            cur.execute(sql.replace("$spec", "nightly"))
            return cur.fetchall()

        assert [r[0] for r in rows(SPEC_VAR_SQL)] == ["other", "nightly"]
        # One point per campaign and cell, the mean of its runs' q/s.
        assert [(t, m, round(v, 1)) for t, m, v in rows(HISTORY_QPS_SQL)] == [
            (1_000_000.0, "A oltp_point_select t=1", 1005.0), (1_000_000.0, "B oltp_point_select t=1", 995.0),
            (1_086_400.0, "A oltp_point_select t=1", 1010.0), (1_086_400.0, "B oltp_point_select t=1", 805.0)]
        assert rows(CHANGE_POINTS_SQL) == [(
            1_086_400_000.0, "worse: B oltp_point_select t=1 qps x0.805 from campaign night-2 (q=0.0040)",
            "change,worse,qps")]
        # Only the failed gate of this spec is an annotation; the table lists every verdict, newest first.
        assert rows(GATE_FAILURES_SQL) == [(
            1_086_400_000.0, "gate failed: night-2 against night-1, 1 cell(s) slower by more than 5.0%", "gate,failed")]
        assert [r[1:6] for r in rows(GATE_VERDICTS_SQL)] == [
            ("night-2", "night-1", "failed", 5.0, 1), ("night-1", None, "unjudged", 5.0, 0)]
        assert [r[:7] for r in rows(HISTORY_CHANGES_TABLE_SQL)] == [
            ("night-2", "B", "oltp_point_select", 1, "qps", "worse", 0.805)]
    finally:
        conn.close()
