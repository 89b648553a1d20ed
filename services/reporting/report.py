"""`collector report`: a campaign's settings, comparison tables and collapse list, analysed once,
and its text, Markdown and CSV lines (JSON and ODS: render/machine_formats.py; HTML: render/html.py).

Pure: the campaign comes in as ``CampaignData`` (``load.load`` reads it from the results DB).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from services.reporting.analysis import (
    CampaignData,
    CollapseFinding,
    NamedTable,
    all_tables,
    build,
    collapse_findings,
    collapse_lines,
)
from services.reporting.counts import HEADER, RunCounts, cell_counts, count_lines, legend_lines, run_counts, summary, table_rows
from services.reporting.options import ReportOptions
from services.reporting.page_verdicts import judge_tables
from services.reporting.pool import PoolCell, pool_cells, pool_lines
from services.reporting.stalls import StalledRun, assessed, stall_lines, stalled_runs
from services.reporting.starved import StarvedCell, starved_cells, starved_lines
from services.reporting.render.formats import (
    md_text,
    render_csv,
    render_markdown,
    render_settings,
)
from services.reporting.tables import render_text


@dataclass(frozen=True)
class Report:
    """Everything computed for one campaign's report, ready for any renderer."""

    data: CampaignData
    opts: ReportOptions
    tables: tuple[NamedTable, ...]
    collapsed: tuple[CollapseFinding, ...]
    #: Successful runs the worker marked for a stall or an overrun (their cells carry ``~``).
    stalled: tuple[StalledRun, ...] = ()
    #: Whether any run was assessed for stalls (results stored before runs were are not).
    stalls_checked: bool = False
    #: Cells whose runs left connections without a completed transaction in a long enough window.
    starved: tuple[StarvedCell, ...] = ()
    #: Every successful run's client and server counts (the run list's, with its summary line).
    counts: tuple[RunCounts, ...] = ()
    #: The status monitor's thread and pool figures per cell, of the runs read whole (plots).
    pool: tuple[PoolCell, ...] = ()

    @property
    def main(self) -> NamedTable:
        return self.tables[0]


def analyse(data: CampaignData, opts: ReportOptions) -> Report:
    """Tables, collapse findings and runs marked for stalls of a campaign (pure)."""
    collapsed = tuple(collapse_findings(data, opts))
    stalled = tuple(stalled_runs(data.runs))
    m = opts.table_metric
    if opts.all_tables:
        tables = tuple(all_tables(data, m, opts.mode, opts, collapsed, stalled))
    else:
        shape = opts.mode if len(data.targets) > 1 else "absolute"
        tables = (NamedTable(f"{m.key}_{shape}", f"{m.description} ({shape})", m,
                             build(data, m, opts.mode, opts, collapsed, stalled)),)
    # One family for the page: the tables it shows, paired over the campaign's shared blocks.
    tables = judge_tables(tables, alpha=opts.alpha, min_effect=opts.min_effect).tables
    return Report(data, opts, tables, collapsed, stalled, assessed(data.runs), tuple(starved_cells(data.runs)),
                  tuple(run_counts(data.runs)), tuple(pool_cells(data.runs)))


def head_lines(data: CampaignData) -> list[str]:
    return [f"Campaign {data.campaign_id} ({data.state})"] + render_settings(data.settings) + [""]


def render_lines(report: Report) -> list[str]:
    """The report as the seeds' text: settings, the table(s), stalls and collapse list."""
    return _lines(report, markdown=False)


def render_markdown_lines(report: Report) -> list[str]:
    """The report as GitHub Markdown, user text escaped."""
    return _lines(report, markdown=True)


#: The CSV columns a report adds to its table's: the row target's cell's client and server counts
#: over its runs (server empty when a run's is n/a), and its runs that disagree or have no server count.
COUNT_CSV_COLUMNS = ("client_transactions", "server_transactions", "counts_disagree", "counts_na")


def render_csv_lines(report: Report) -> list[str]:
    """The chosen table as long-format CSV lines, each cell with its runs' client and server counts."""
    per_cell = cell_counts(report.counts)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for i, row in enumerate(csv.reader(render_csv(report.main.table))):
        if i == 0:
            w.writerow(row + list(COUNT_CSV_COLUMNS))
            continue
        client, server, disagree, na = per_cell.get((row[1], row[0], int(row[3])), (None, None, 0, 0))
        w.writerow(row + ["" if client is None else client, "" if server is None else server, disagree, na])
    return out.getvalue().splitlines()


def count_markdown(counts: tuple[RunCounts, ...]) -> list[str]:
    """The run list's counts as a Markdown table under its summary line, then its legend."""
    lines = ["## Client and server counts", "", md_text(summary(counts).line())]
    if not counts:
        return lines
    lines += ["", "| " + " | ".join(h or "flag" for h in HEADER) + " |",
              "| " + " | ".join(":---" if i < 2 or i == 4 else "---:" for i in range(len(HEADER))) + " |"]
    # Cells hold names (letters, digits, _ . -), numbers and marks: only a | would break the table.
    lines += ["| " + " | ".join(v.replace("|", "\\|") for v in row) + " |" for row in table_rows(counts)]
    return lines + [""] + [f"- {md_text(x)}" for x in legend_lines(counts)]


def _lines(report: Report, *, markdown: bool) -> list[str]:
    lines = head_lines(report.data)
    if markdown:
        lines = [md_text(line) for line in lines]  # the settings hold user text (description)
    tables = report.tables if report.opts.all_tables else report.tables[:1]
    for i, named in enumerate(tables):
        if len(tables) > 1:
            lines.extend(([""] if i else []) + ([f"## {named.title}", ""] if markdown else [named.title, ""]))
        lines.extend(render_markdown(named.table, named.key) if markdown else render_text(named.table))
    lines.append("")
    stalls = stall_lines(report.stalled, report.stalls_checked)
    if stalls:
        lines.extend([md_text(line) for line in stalls] if markdown else stalls)
        lines.append("")
    lines.extend(collapse_lines(report.collapsed, report.opts.collapse_fraction))
    starved = starved_lines(report.starved)
    if starved:
        lines.extend([""] + ([md_text(line) for line in starved] if markdown else starved))
    lines.append("")
    lines.extend(count_markdown(report.counts) if markdown else count_lines(report.counts))
    pool = pool_lines(report.pool, markdown=markdown)
    return lines + ([""] + pool if pool else [])
