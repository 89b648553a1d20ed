"""`collector history SPEC --changes`: a spec's campaigns as series per cell and metric, the change a
user acts on named by its campaign in every format, and the last good campaign the gate judges against."""

from __future__ import annotations

import argparse
import csv
import io
import json

import pytest

from services.collector import cli as collector_cli
from services.common import cli
from services.common.errors import BenchfleetRegression
from services.common.results.rows import CampaignNight, HistoryEntry, ResultRow
from services.reporting.gate import Regression
from services.reporting.render import registry
from services.reporting.spec_history import GateVerdict, last_good, spec_changes, spec_series, worse_since

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


def test_no_night_from_a_standing_worse_change_on_is_good_though_the_gate_passed_it():
    """Night 5 is 20% slower and stays so: the gate on noisy nights may pass 5, 6 and 7 one by one, yet
    the newest is judged against night 4; a later recovery (a better change) clears the shift."""
    c = spec_changes("nightly", NIGHTS, _entries())
    assert worse_since(c.search, NIGHTS) == "n5"
    assert last_good(NIGHTS, lambda ref, night: False, worse_from="n5") == "n4"
    recovered = QPS + [1300, 1304, 1298, 1301, 1299]
    nights = tuple(CampaignNight(f"n{i}", 1000.0 + i, "finished") for i in range(1, len(recovered) + 1))
    back = spec_changes("nightly", nights, _entries(recovered))
    assert {ch.direction for ch in back.search.changes} == {"worse", "better"}
    assert worse_since(back.search, back.nights) is None


def test_a_regression_is_exit_5_naming_both_campaigns(capsys, monkeypatch):
    def fails(args, settings):
        raise BenchfleetRegression("nightly", "n8", "n4", 1)
    monkeypatch.setattr(cli, "settings_from", lambda args, secrets=True: None)
    parse = lambda: argparse.Namespace(fn=fails)  # noqa: E731
    assert cli.run_main("collector", parse, settings_file=False) == cli.EXIT_SLOWER
    assert "error: nightly: campaign n8 is slower than the last good campaign n4 in 1 cell(s)" in capsys.readouterr().err


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
