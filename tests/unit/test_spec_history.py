"""`collector history SPEC --changes`: a spec's campaigns as series per cell and metric, the change a
user acts on named by its campaign in every format, and the last good campaign the gate judges against."""

from __future__ import annotations

import csv
import io
import json

import pytest

from services.collector import cli as collector_cli
from services.common import cli
from services.common.results.rows import CampaignNight, HistoryEntry, ResultRow
from services.reporting.gate import Regression
from services.reporting.render import registry
from services.reporting.spec_history import GateVerdict, last_good, spec_changes, spec_series

QPS = [1000, 1010, 990, 1005, 800, 810, 795, 805]


def _entries(qps=QPS, *, reps=2, failed_night: int | None = None) -> list[HistoryEntry]:
    out = []
    for night, q in enumerate(qps, 1):
        for rep in range(1, reps + 1):
            status = "failed" if night == failed_night else "ok"
            row = ResultRow(run_id=f"n{night}.a.w.t4.r{rep}", campaign_id=f"n{night}", target="a",
                            workload="oltp_point_select", threads=4, repetition=rep, status=status,
                            qps=q * (1 + 0.002 * rep), tps=q / 10, p95_ms=2.0, p99_ms=3.0, measured_s=5, error=None)
            out.append(HistoryEntry("nightly", 1000.0 + night, row))
    return out


NIGHTS = tuple(CampaignNight(f"n{i}", 1000.0 + i, "finished") for i in range(1, 9))


def test_series_are_one_per_cell_and_metric_with_a_campaign_mean_and_failed_runs_left_out():
    series = spec_series(_entries(failed_night=3))
    assert [s.key.metric for s in series] == ["p95_ms", "qps"]
    qps = series[1]
    assert [p.campaign_id for p in qps.points] == ["n1", "n2", "n4", "n5", "n6", "n7", "n8"]
    assert qps.points[0].value == pytest.approx(1000 * 1.003)
    assert qps.higher_is_better is True and series[0].higher_is_better is False


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json"])
def test_every_format_names_the_fifth_campaign_as_the_change(fmt):
    c = spec_changes("nightly", NIGHTS, _entries())
    out = registry.renderer(fmt, "changes").render_changes(c)
    if fmt == "json":
        changes = json.loads(out)["changes"]
        assert [(x["campaign"], x["night"], x["metric"], x["direction"]) for x in changes] == [("n5", 5, "qps", "worse")]
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
        assert [(r["campaign"], r["change"], r["direction"]) for r in rows] == [("n5", "-19.8%", "worse")]
    else:
        assert "n5" in out and "-19.8%" in out and "worse" in out and "n4 " not in out


def test_a_flat_history_says_so():
    c = spec_changes("nightly", NIGHTS, _entries([1000, 1004, 998, 1001, 999, 1003, 1000, 997]))
    assert c.search.changes == ()
    assert "no change point" in registry.renderer("text", "changes").render_changes(c)


def test_last_good_skips_a_night_the_gate_failed_and_an_unfinished_one():
    nights = [CampaignNight("n1", 1, "finished"), CampaignNight("n2", 2, "finished"),
              CampaignNight("n3", 3, "finished_with_failures"), CampaignNight("n4", 4, "finished"),
              CampaignNight("n5", 5, "finished")]
    # n4 is slower than n2: it stays failed, so the newest (n5) is judged against n2.
    assert last_good(nights, lambda ref, night: night == "n4") == "n2"
    assert last_good(nights[:1], lambda ref, night: False) is None


def test_a_failed_gate_lists_its_cells_in_text_and_json():
    r = Regression("a", "oltp_point_select", 4, 0.8, 0.001, 0.75, 0.85, 0.95)
    gate = GateVerdict("n8", "n4", 0.05, (r,), "q/s")
    c = spec_changes("nightly", NIGHTS, _entries(), gate=gate)
    text = registry.renderer("text", "changes").render_changes(c)
    assert "gate: n8 against the last good campaign n4: 1 cell(s) slower by more than 5% (FAILED)" in text
    assert "a oltp_point_select t=4" in text
    assert json.loads(registry.renderer("json", "changes").render_changes(c))["gate"]["failed"] is True


@pytest.mark.parametrize("argv, field", [
    (["history", "--changes"], "--changes"),
    (["history", "nightly", "--changes", "--target", "a"], "--target"),
    (["history", "--target", "a", "--workload", "w"], "--threads"),
    (["history", "--target", "a", "--workload", "w", "--threads", "1", "--fail-on-slower", "5"], "--fail-on-slower"),
    (["history", "--target", "a", "--workload", "w", "--threads", "1", "--format", "markdown"], "--format"),
])
def test_wrong_flag_combinations_exit_2_naming_the_flag(argv, field, capsys, monkeypatch, tmp_path):
    # An empty settings file: the flags are refused before any setting or service is needed.
    (tmp_path / "settings.env").write_text("")
    monkeypatch.setenv("BENCHFLEET_CONFIG", str(tmp_path / "settings.env"))
    assert collector_cli.main(argv) == cli.EXIT_USAGE
    assert field in capsys.readouterr().err
