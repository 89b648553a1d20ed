"""The one result row: the exports' run columns come from it, reports read typed whole results
through it, and the report options and formats are one definition for every command."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from services.collector.cli import _parser
from services.common.messages.runs import Cell
from services.common.messages.results import Latency, RunResult, ServerReport, Totals
from services.common.results.rows import COLUMNS, ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.render import registry
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import analyse, render_lines


def _result(target: str, rep: int, key_reads: int | None, status: str = "ok") -> RunResult:
    return RunResult(
        run_id=f"c1.{target}.r{rep}", campaign_id="c1", cell=Cell(target=target, workload="w", threads=4),
        repetition=rep, status=status, error=None if status == "ok" else "boom", worker="w1", host="h",
        started_at=0.0, ended_at=10.0, measured_s=10.0, totals=Totals(transactions=1000, reads=5000),
        latency=Latency(p50_ms=1.0, p95_ms=3.0, p99_ms=7.5),
        server=ServerReport(status_deltas={} if key_reads is None else {"Key_reads": key_reads}))


def _campaign(rows: list[ResultRow]) -> CampaignData:
    return CampaignData("c1", "n", "finished", ("off", "8"), "off", ("w",), (4,), {}, tuple(rows))


ROWS = [ResultRow.of(_result(t, i + 1, k)) for t, ks in (("off", [500, 510, 490]), ("8", [100, 101, 99]))
        for i, k in enumerate(ks)]


def test_a_row_made_from_a_result_holds_what_the_store_indexes():
    """A row made from a result has its cell, q/s, tps and percentiles, and keeps the result itself."""
    row = ResultRow.of(_result("off", 2, 500))
    assert (row.campaign_id, row.target, row.workload, row.threads, row.repetition) == ("c1", "off", "w", 4, 2)
    assert (row.qps, row.tps, row.p95_ms, row.p99_ms, row.measured_s) == (500.0, 100.0, 3.0, 7.5, 10.0)
    assert row.result is not None and row.result.server.status_deltas == {"Key_reads": 500}
    assert row == row.with_result(None), "the whole result is not part of a row's identity"


def test_a_row_from_database_values_gets_numbers_of_its_field_types():
    """Database values in column order become a row with ints and floats where the row declares them."""
    values = ["r1", "c1", "off", "w", "4", 1, "ok", 100, "50", 1, 2, 60, None, 36340, 5, 5, 31.0, "stall,overrun",
              2, 16, 4.5, 0, 37.0, "6000", None, "no counter"]
    row = ResultRow.from_columns(values)
    assert (row.threads, row.qps, row.tps, row.measured_s, row.max_ms) == (4, 100.0, 50.0, 60.0, 36340.0)
    assert isinstance(row.qps, float) and isinstance(row.threads, int)
    assert row.flags == ("stall", "overrun")
    assert row.columns() == ("r1", "c1", "off", "w", 4, 1, "ok", 100.0, 50.0, 1.0, 2.0, 60.0, None, 36340.0,
                             5, 5, 31.0, "stall,overrun", 2, 16, 4.5, 0, 37.0, 6000, None, "no counter")
    with pytest.raises(ValueError, match="26 columns"):
        ResultRow.from_columns(values[:-1])


def test_exported_runs_carry_every_column_of_the_row_type():
    """The JSON export's runs and the ODS runs sheet have exactly the row type's columns, with its values."""
    from odf.opendocument import load
    from odf.table import Table, TableRow

    every = [f.name for f in dataclasses.fields(ResultRow) if f.name not in ("result", "figures")]
    assert list(COLUMNS) == every
    report = analyse(_campaign(ROWS), ReportOptions(all_tables=True))
    runs = json.loads(render_json(report))["runs"]
    assert runs[0] == {name: getattr(ROWS[0], name) for name in every}
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(render_ods(report))).spreadsheet.getElementsByType(Table)}
    header = sheets["runs"].getElementsByType(TableRow)[0]
    assert [str(c) for c in header.childNodes] == every


def test_status_delta_report_reads_the_typed_server_report():
    """A report of results whose server report has status deltas gives Key_reads per transaction,
    with fewer reads marked better; every-table formats add that metric's table."""
    lines = render_lines(analyse(_campaign(ROWS), ReportOptions(metric="status:Key_reads", mode="absolute")))
    assert "    off           0.50" in lines and "    8             0.10+" in lines
    keys = [t.key for t in analyse(_campaign(ROWS), ReportOptions(all_tables=True)).tables]
    assert "status:Key_reads_absolute" in keys and "p50_ms_absolute" in keys


def test_rows_read_without_their_results_give_no_status_values():
    """A row read without its whole result has no status delta value (missing, not zero) and the
    report's metric list stays at the column metrics."""
    bare = [r.with_result(None) for r in ROWS]
    keys = [t.key for t in analyse(_campaign(bare), ReportOptions(all_tables=True)).tables]
    assert keys == ["qps_ratio", "qps_absolute", "tps_absolute", "p95_ms_absolute", "p99_ms_absolute"]
    table = analyse(_campaign(bare), ReportOptions(metric="status:Key_reads")).main.table
    assert all(c.value is None for row in table.rows for c in row.cells)


def test_report_and_compare_take_every_format_and_history_its_few():
    """`collector report` and `collector compare` accept the same formats, html and ods included;
    the flags land in one options type."""
    p = _parser()
    assert registry.names("report") == registry.names("compare") == ("text", "markdown", "csv", "json", "ods", "html")
    # A campaign that ran on several pools has its page in every format a single campaign has.
    assert registry.names("pools") == registry.names("report")
    for fmt in registry.names("report"):
        assert p.parse_args(["report", "c", "--format", fmt]).fmt == fmt
        assert p.parse_args(["compare", "a", "b", "--format", fmt]).fmt == fmt
    args = p.parse_args(["compare", "a", "b", "--delta", "--mark-high-cv", "--metric", "status:Key_reads"])
    assert (args.mode, args.mark_high_cv, args.metric) == ("delta", True, "status:Key_reads")
    with pytest.raises(SystemExit):
        p.parse_args(["history", "--target", "t", "--workload", "w", "--threads", "1", "--format", "ods"])
    with pytest.raises(ValueError, match="format must be one of"):
        registry.renderer("pdf")
    assert registry.names("history") == ("text", "csv", "json")
    # Markdown renders a spec's change points (history SPEC --changes), not one cell's history.
    assert registry.names("changes") == ("text", "markdown", "csv", "json")
