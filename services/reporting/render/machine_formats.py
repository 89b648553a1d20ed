"""Machine formats of a report and of a comparison: JSON (every table with its statistics, the
legend, collapse findings, settings) and ODS (a spreadsheet with one sheet per table plus the raw
runs, as the seeds kept their results, with the settings beside them)."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import zipfile
from typing import Any, Iterable

from services.common.messages.results import no_latency_reason
from services.common.results.rows import COLUMNS, ResultRow
from services.reporting.analysis import NamedTable
from services.reporting.compare import CampaignComparison, count_summary_lines, header_lines
from services.reporting.counts import NOT_RECORDED, TOLERANCE_RULE, RunCounts, summary
from services.reporting.counts import legend_lines as count_legend
from services.reporting.report import Report, head_lines
from services.reporting.stalls import stall_rows
from services.reporting.starved import starved_rows
from services.reporting.tables import (
    NO_DATA,
    format_value,
    formula_lines,
    left_out_lines,
    legend_lines,
    missing_reason,
)

#: Version of the JSON export's layout; history: 1 = first version (additive since: each run
#: carries every column of ``ResultRow``, campaign_id included; ``stalls``: runs marked for a
#: stall, an overrun or a short window; ``starved``: cells whose runs starved connections;
#: ``missing``: why a run's column is null; a table cell's ``missing``: why its value is null;
#: ``counts``: every successful run's client and server counts with the summary line; a table
#: cell's ``excluded_runs``/``excluded_reason`` and a table's ``left_out``: runs left out of verdicts;
#: a cell's ``t``, ``df``, ``p`` and ``ratio_low``/``ratio_high`` are its verdict's log-ratio test's, as
#: ``log_ratio_p``, since the per-cell Welch test was removed: one test behind every mark).
JSON_VERSION = 1


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else x


def table_data(named: NamedTable) -> dict[str, Any]:
    """One table as plain data: cells with their number, marks and the statistics behind them."""
    t = named.table
    spec = t.spec
    rows = []
    for row in t.rows:
        cells = []
        for threads, c in zip(t.threads, row.cells):
            cell: dict[str, Any] = {"threads": threads, "value": _num(c.value), "text": format_value(c, t.places),
                                    "mark": c.mark, "failed_runs": c.failed, "stalled_runs": c.stalled,
                                    "excluded_runs": c.excluded}
            if c.excluded:
                cell["excluded_reason"] = c.excluded_reason
            if c.value is None:
                cell["missing"] = missing_reason(t)
            if c.stats:
                cell.update(n=c.stats.n, mean=_num(c.stats.mean), stdev=_num(c.stats.stdev), cv=_num(c.stats.cv),
                            ci_low=_num(c.stats.ci_low), ci_high=_num(c.stats.ci_high))
            if c.comparison:
                k = c.comparison
                cell.update(ratio=_num(k.ratio), baseline_n=k.baseline.n, baseline_mean=_num(k.baseline.mean))
            if c.verdict:
                v = c.verdict
                # t, df, p and ratio_low/high (unadjusted, 1 - alpha) are the verdict's own log-ratio test's.
                low, high = v.estimate.interval(1 - spec.alpha)
                cell.update(ratio_low=_num(low), ratio_high=_num(high), t=_num(v.estimate.t), df=_num(v.estimate.df),
                            p=_num(v.estimate.p))
                cell.update(verdict=v.decision, reason=v.reason, method=v.estimate.method,
                            log_ratio=_num(v.estimate.estimate), log_ratio_p=_num(v.estimate.p), q=_num(v.q),
                            selected=v.selected, interval_level=_num(v.level), adjusted_low=_num(v.low),
                            adjusted_high=_num(v.high))
            cells.append(cell)
        rows.append({"workload": row.workload, "target": row.target, "label": row.label.strip(), "cells": cells})
    return {
        "key": named.key, "title": named.title, "metric": named.metric.key, "unit": named.metric.unit,
        "higher_is_better": named.metric.higher_is_better, "mode": spec.mode, "baseline": spec.baseline,
        "threads": list(t.threads), "formulas": [f.strip() for f in formula_lines(spec)], "rows": rows,
        "legend": [{"mark": m, "meaning": text} for m, text in legend_lines(t)],
        "failed": [f.__dict__ for f in t.failed],
        "left_out": [line.strip() for line in left_out_lines(t)[1:]],
        "family": dataclasses.asdict(t.family) if t.family else None,
    }


def render_json(report: Report) -> str:
    """The report as one JSON document (``format_version`` tells its layout)."""
    d = report.data
    counted = summary(report.counts)
    doc = {
        "format_version": JSON_VERSION,
        "campaign": {"id": d.campaign_id, "name": d.name, "state": d.state, "targets": list(d.targets),
                     "baseline": d.baseline, "workloads": list(d.workloads), "threads": list(d.threads)},
        "settings": d.settings,
        "statistics": {"alpha": report.opts.alpha, "min_effect": report.opts.min_effect,
                       "cv_threshold": report.opts.cv_threshold, "collapse_fraction": report.opts.collapse_fraction},
        "tables": [table_data(t) for t in report.tables],
        "collapse": [dict(f.__dict__, p=_num(f.p), drop_low=_num(f.drop_low), drop_high=_num(f.drop_high),
                          level=_num(f.level)) for f in report.collapsed],
        "stalls": {"checked": report.stalls_checked, "runs": [s.as_data() for s in report.stalled]},
        "starved": [c.as_data() for c in report.starved],
        "counts": dict(dataclasses.asdict(counted), summary=counted.line(), tolerance=TOLERANCE_RULE,
                       runs=[c.as_data() for c in report.counts]),
        "runs": [dict(zip(COLUMNS, r.columns())) for r in d.runs],
        "missing": missing_figures(d.runs),
    }
    return json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n"


def _sheet_name(text: str, used: set[str]) -> str:
    # Spreadsheets refuse []*?:/\ in sheet names and LibreOffice/Excel cut them at 31 characters.
    name = re.sub(r"[\[\]*?:/\\']", "_", text)[:31] or "sheet"
    base, i = name, 2
    while name in used:
        suffix = f" {i}"
        name, i = base[: 31 - len(suffix)] + suffix, i + 1
    used.add(name)
    return name


_ODS_MIME = "application/vnd.oasis.opendocument.spreadsheet"
_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
       'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
       'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"')
_MANIFEST = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
    f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{_ODS_MIME}" manifest:version="1.2"/>'
    '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
    '<manifest:file-entry manifest:full-path="styles.xml" manifest:media-type="text/xml"/>'
    '</manifest:manifest>\n')
_STYLES = f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-styles {_NS}/>\n'
#: Characters XML 1.0 cannot carry at all (an error message may hold one); they are dropped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str, quote: bool = False) -> str:
    text = _NOT_XML.sub("", text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


def _cell(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and _num(v) is not None:
        return (f'<table:table-cell office:value-type="float" office:value="{v!r}">'
                f"<text:p>{v}</text:p></table:table-cell>")
    return f'<table:table-cell office:value-type="string"><text:p>{_xml("" if v is None else str(v))}</text:p></table:table-cell>'


def ods_document(sheets: list[tuple[str, list[list[Any]]]]) -> bytes:
    """An OpenDocument spreadsheet with one sheet per (name, rows); numbers stay numbers.

    Written as text straight into the zip, not built as a DOM (odfpy): a 10,000-run report's
    runs sheet is 140,000 cells, which the DOM took seconds to build and serialise."""
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content {_NS}><office:body><office:spreadsheet>']
    used: set[str] = set()
    for name, rows in sheets:
        parts.append(f'<table:table table:name="{_xml(_sheet_name(name, used), quote=True)}">')
        for values in rows:
            parts.append("<table:table-row>" + "".join(map(_cell, values)) + "</table:table-row>"
                         if values else "<table:table-row/>")
        parts.append("</table:table>")
    parts.append("</office:spreadsheet></office:body></office:document-content>\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        # The mimetype comes first and uncompressed, so tools can tell the file type from its head.
        z.writestr(zipfile.ZipInfo("mimetype"), _ODS_MIME, compress_type=zipfile.ZIP_STORED)
        # Every entry dated 1980-01-01 (as mimetype's ZipInfo is): the same report gives the same
        # bytes, whatever second it was rendered in.
        for name, data, level in (("META-INF/manifest.xml", _MANIFEST, None), ("styles.xml", _STYLES, None),
                                  ("content.xml", "".join(parts).encode("utf-8"), 1)):
            z.writestr(zipfile.ZipInfo(name), data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=level)
    return buf.getvalue()


def table_rows(named: NamedTable) -> list[list[Any]]:
    """A comparison table as spreadsheet rows: title, header, one row per table row, formulas, legend."""
    data = table_data(named)
    grouped = named.table.spec.grouped
    rows: list[list[Any]] = [[named.title], ["sysbench test"] + (["target"] if grouped else []) + data["threads"]]
    for row in data["rows"]:
        label = [row["workload"]] + ([row["label"]] if grouped else [])
        rows.append(label + [(c["text"] + c["mark"]) if c["mark"] or c["value"] is None else c["value"]
                             for c in row["cells"]])
    rows.append([])
    rows.extend([f] for f in data["formulas"])
    rows.append([])
    rows.extend([e["mark"], e["meaning"]] for e in data["legend"])
    left_out = left_out_lines(named.table)
    if left_out:
        rows.append([])
        rows.extend([line.strip()] for line in left_out)
    return rows


#: Columns a successful run leaves None when no transaction completed (or sysbench did not print them).
_LATENCY_COLUMNS = ("p95_ms", "p99_ms", "max_ms")


def _missing(r: ResultRow) -> dict[str, str]:
    """The latency columns a successful run has none of, and its server count when n/a, each with
    why (never read as 0)."""
    if r.status != "ok":
        return {}
    out = {k: no_latency_reason(r.transactions) for k in _LATENCY_COLUMNS if getattr(r, k) is None}
    if r.server_transactions is None:
        out["server_transactions"] = r.server_count_reason or NOT_RECORDED
    return out


def missing_figures(runs: Iterable[ResultRow]) -> dict[str, dict[str, str]]:
    """Why a successful run's column is null in the JSON export, by run id and column."""
    return {r.run_id: missing for r in runs if (missing := _missing(r))}


def run_rows(runs: Iterable[ResultRow]) -> list[list[Any]]:
    """The raw runs as spreadsheet rows: a header of the result row's columns, then one row per
    run (n/a where a successful run measured no latency)."""
    out: list[list[Any]] = [list(COLUMNS)]
    for r in runs:
        missing = _missing(r)
        out.append([NO_DATA if k in missing else v for k, v in zip(COLUMNS, r.columns())])
    return out


def render_ods(report: Report) -> bytes:
    """The report as an OpenDocument spreadsheet: settings, one sheet per table, collapse, runs."""
    return ods_document(ods_sheets(report))


def ods_sheets(report: Report) -> list[tuple[str, list[list[Any]]]]:
    """The report's spreadsheet as (sheet name, rows)."""
    sheets: list[tuple[str, list[list[Any]]]] = [("settings", [[line] for line in head_lines(report.data)])]
    sheets += [(named.key, table_rows(named)) for named in report.tables]
    sheets.append(("stalls", stall_rows(report.stalled)))
    sheets.append(("starved", starved_rows(report.starved)))
    sheets.append(("collapse", [["target", "workload", "threads", "q/s", "peak threads", "peak q/s", "ratio", "p", "basis"]]
                   + [[f.target, f.workload, f.threads, f.qps, f.peak_threads, f.peak_qps, f.ratio, _num(f.p), f.basis]
                      for f in report.collapsed]))
    sheets.append(("counts", count_rows(report.counts)))
    sheets.append(("runs", run_rows(report.data.runs)))
    return sheets


def count_rows(counts: tuple[RunCounts, ...]) -> list[list[Any]]:
    """The run list's client and server counts as spreadsheet rows: the summary, a header, one row
    per successful run (numbers stay numbers; n/a with its reason), then the legend."""
    rows: list[list[Any]] = [[summary(counts).line()], ["target", "workload", "threads", "repetition", "run",
                                                         "client", "server", "off", "tolerance", "flag", "n/a reason"]]
    for c in counts:
        rows.append([c.target, c.workload, c.threads, c.repetition, c.run_id,
                     NO_DATA if c.client is None else c.client, NO_DATA if c.server is None else c.server,
                     c.off, c.tolerance, c.mark, c.reason])
    return rows + [[]] + [[x] for x in count_legend(counts)]


def render_compare_json(c: CampaignComparison) -> str:
    """The comparison as one JSON document: both campaigns, the metric, each target's table."""
    return json.dumps({"a": c.a.campaign_id, "b": c.b.campaign_id, "metric": c.metric.key,
                       "unmatched_targets": list(c.unmatched),
                       # The campaigns' own shifts in every interval; null: no earlier campaign showed them.
                       "between_campaigns": dataclasses.asdict(c.between) if c.between is not None else None,
                       "stalls": {"a": [s.as_data() for s in c.stalled_a], "b": [s.as_data() for s in c.stalled_b]},
                       "counts": {side: dict(dataclasses.asdict(summary(counts)), summary=summary(counts).line(),
                                             tolerance=TOLERANCE_RULE)
                                  for side, counts in (("a", c.counts_a), ("b", c.counts_b))},
                       "tables": [dict(table_data(t), target=target) for t, target in zip(c.tables, c.targets)]},
                      indent=1) + "\n"


def render_compare_ods(c: CampaignComparison) -> bytes:
    """The comparison as a spreadsheet: which campaign is A and B, one sheet per table, both campaigns' runs."""
    sheets = [("campaigns", [[line] for line in header_lines(c) + count_summary_lines(c)])]
    sheets += [(t.key, table_rows(t)) for t in c.tables]
    sheets += [("stalls A", stall_rows(c.stalled_a)), ("stalls B", stall_rows(c.stalled_b))]
    sheets += [("runs A", run_rows(c.a.runs)), ("runs B", run_rows(c.b.runs))]
    return ods_document(sheets)
