"""HTML: a report as one self-contained file with the settings, every table, the collapse list and
the plots (inline SVG, so it opens without a network); a comparison as one page of its tables."""

from __future__ import annotations

import html
import time
from typing import Sequence

from services.reporting.analysis import NamedTable, collapse_lines
from services.reporting.compare import CampaignComparison, compare_stall_lines, count_summary_lines, header_lines
from services.reporting.counts import HEADER, RunCounts, summary, table_rows
from services.reporting.counts import legend_lines as count_legend
from services.reporting.per_query import CellWork, cell_work, format_figure
from services.reporting.render.formats import render_settings
from services.reporting.render.plots import Plot, all_plots
from services.reporting.pool import HEADER as POOL_HEADER
from services.reporting.pool import LEGEND as POOL_LEGEND
from services.reporting.pool import PoolCell, readings
from services.reporting.pool import table_rows as pool_rows
from services.reporting.report import Report
from services.reporting.stalls import stall_lines
from services.reporting.starved import starved_lines
from services.reporting.tables import (
    MARK_FASTER,
    MARK_SHORT,
    MARK_SLOWER,
    MARK_STALL,
    failed_lines,
    format_value,
    formula_lines,
    left_out_lines,
    legend_lines,
    verdict_note,
)

_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
pre { background: #f6f6f6; padding: .6em; }
table.cmp { border-collapse: collapse; margin: .5em 0; font-variant-numeric: tabular-nums; }
table.cmp th, table.cmp td { border: 1px solid #ccc; padding: 2px 8px; }
table.cmp td.num { text-align: right; white-space: nowrap; }
table.cmp td.faster { background: #d9f2d9; } table.cmp td.slower { background: #f6d5d5; }
table.cmp th.group { text-align: left; background: #eee; }
table.cmp td.stalled { outline: 2px dashed #c80; outline-offset: -3px; }
table.cmp td.absent { color: #777; font-style: italic; }
.note { color: #555; font-size: .9em; } ul.legend { font-size: .9em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def render_table_html(named: NamedTable, anchor: str = "") -> list[str]:
    """One comparison table as an HTML table with its marks, formulas, legend and failures."""
    table = named.table
    spec = table.spec
    out = [f'<h3 id="{_e(anchor)}table-{_e(named.key)}">{_e(named.title)}</h3>', '<table class="cmp">',
           '<tr><th rowspan="2">sysbench test</th>' + ('<th rowspan="2">target</th>' if spec.grouped else "")
           + f'<th colspan="{len(table.threads)}">Number of threads</th></tr>',
           "<tr>" + "".join(f"<th>{t}</th>" for t in table.threads) + "</tr>"]
    for row in table.rows:
        cells = []
        for c in row.cells:
            cls = "num" + (" faster" if MARK_FASTER in c.mark else " slower" if MARK_SLOWER in c.mark else "") \
                + (" stalled" if MARK_STALL in c.mark or MARK_SHORT in c.mark else "")
            title = verdict_note(c.verdict) if c.verdict else ""
            if c.excluded and not c.verdict:
                title = (title + "; " if title else "") + f"left out: {c.excluded_reason}"
            cells.append(f'<td class="{cls}" title="{_e(title)}">{_e(format_value(c, table.places))}'
                         f"{_e(c.mark)}</td>")
        label = f"<td>{_e(row.workload)}</td>" + (f"<td>{_e(row.label.strip())}</td>" if spec.grouped else "")
        out.append("<tr>" + label + "".join(cells) + "</tr>")
    out.append("</table>")
    out.append('<p class="note">' + "<br>".join(_e(f) for f in formula_lines(spec)) + "</p>")
    out.append('<ul class="legend">' + "".join(
        f"<li><code>{_e(mark)}</code> {_e(text)}</li>" if mark else f"<li>{_e(text)}</li>"
        for mark, text in legend_lines(table)) + "</ul>")
    for note in (failed_lines(table), left_out_lines(table)):
        if note:
            out.append('<p class="note">' + "<br>".join(_e(x) for x in note) + "</p>")
    return out


def render_per_query_html(cells: Sequence[CellWork], anchor: str = "") -> list[str]:
    """The section "What the server did, per query": one table per cell, mean/min/max over its runs."""
    out = [f'<h2 id="{_e(anchor)}per-query">What the server did, per query</h2>',
           '<p class="note">Over each run\'s measured interval, then mean, min and max over the cell\'s '
           "successful runs. Server CPU, context switches (all its threads) and disk bytes (read_bytes and "
           "write_bytes of /proc/PID/io) come from the server's process, so only managed targets have them; "
           "hit ratios are 1 - reads / read requests from the status deltas.</p>"]
    if not cells:
        out.append('<p class="note">No successful run recorded these figures.</p>')
    for cell in cells:
        kind = f", {cell.kind} target" if cell.kind else ""
        out.append(f'<h3 id="{_e(anchor)}per-query-{_e(cell.target)}-{_e(cell.workload)}-{cell.threads}">'
                   f"{_e(cell.target)} / {_e(cell.workload)} / {cell.threads} threads"
                   f'<span class="note"> ({cell.runs} runs{_e(kind)})</span></h3>')
        out.append('<table class="cmp per-query"><tr><th>figure</th><th>mean</th><th>min</th><th>max</th>'
                   "<th>runs</th></tr>")
        for f in cell.figures:
            if f.absent is not None:
                out.append(f"<tr><td>{_e(f.label)}</td>"
                           f'<td class="absent" colspan="4">n/a: {_e(f.absent)}</td></tr>')
                continue
            nums = "".join(f'<td class="num">{_e(format_figure(f.key, v))}</td>' for v in (f.mean, f.low, f.high))
            out.append(f"<tr><td>{_e(f.label)}</td>{nums}<td class=\"num\">{f.runs}</td></tr>")
        out.append("</table>")
    return out


def _plot_html(p: Plot, anchor: str = "") -> list[str]:
    out = [f'<figure id="{_e(anchor)}plot-{_e(p.key)}" class="plot">', p.svg,
           f"<figcaption>{_e(p.title)}</figcaption>"]
    if p.note:
        out.append(f'<p class="note">{_e(p.note)}</p>')
    out.append("</figure>")
    return out


def render_counts_html(counts: Sequence[RunCounts], anchor: str = "") -> list[str]:
    """The section "Client and server counts": the summary line, one row per successful run (an n/a
    server count with its reason as a tooltip and beside it), and the legend."""
    out = [f'<h2 id="{_e(anchor)}counts">Client and server counts</h2>', f"<p>{_e(summary(counts).line())}</p>"]
    if not counts:
        return out
    out.append('<table class="cmp counts"><tr>' + "".join(f"<th>{_e(h or 'flag')}</th>" for h in HEADER) + "</tr>")
    for c, row in zip(counts, table_rows(counts)):
        cells = [f"<td>{_e(v)}</td>" for v in row[:5]] + [f'<td class="num">{_e(row[5])}</td>']
        cells.append(f'<td class="num absent" title="{_e(c.reason)}">{_e(row[6])}</td>' if c.state == "n/a"
                     else f'<td class="num">{_e(row[6])}</td>')
        cells += [f'<td class="num">{_e(v)}</td>' for v in row[7:9]]
        cells.append(f'<td class="{"slower" if c.mark else ""}">{_e(c.mark)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    out.append('<ul class="legend">' + "".join(f"<li>{_e(x)}</li>" for x in count_legend(counts)) + "</ul>")
    return out


def render_pool_html(cells: Sequence[PoolCell], anchor: str = "") -> list[str]:
    """The section "Thread pool monitor": each pool's reading at its highest thread count, the
    per-cell medians and the legend; nothing when no run carries a monitor series."""
    if not cells:
        return []
    said = [r.line() for r in readings(cells)] or ["No run read the thread pool's tables."]
    out = [f'<h2 id="{_e(anchor)}pool">Thread pool monitor</h2>', "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in said) + "</ul>",
           '<table class="cmp pool"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in POOL_HEADER) + "</tr>"]
    for row in pool_rows(cells):
        out.append("<tr>" + "".join(f"<td>{_e(v)}</td>" if i < 2 else f'<td class="num">{_e(v)}</td>'
                                    for i, v in enumerate(row)) + "</tr>")
    return out + ["</table>", f'<p class="note">{_e(POOL_LEGEND)}</p>']


def page(title: str, body: Sequence[str]) -> str:
    """A self-contained HTML document: its title as heading, then ``body``."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
                      f"<style>{_CSS}</style></head><body>", f"<h1>{_e(title)}</h1>", *body, "</body></html>"]) + "\n"


def report_sections(report: Report, anchor: str = "") -> list[str]:
    """A report's sections: settings, tables, stalls, collapse, counts, plots and per-query figures;
    every element id starts with ``anchor``, so several reports can share one page."""
    data = report.data
    tables = report.tables
    stalls = stall_lines(report.stalled, report.stalls_checked)
    starved = starved_lines(report.starved)
    ok = sum(1 for r in data.runs if r.status == "ok")
    parts = [f'<p class="note">Campaign state: {_e(data.state)}; {ok} of {len(data.runs)} stored runs succeeded; '
             f"rendered {_e(time.strftime('%Y-%m-%d %H:%M:%S %Z'))}.</p>",
             "<h2>Settings</h2>", "<pre>" + _e("\n".join(render_settings(data.settings))) + "</pre>",
             "<h2>Tables</h2>",
             '<p class="note">Contents: ' + ", ".join(f'<a href="#{_e(anchor)}table-{_e(t.key)}">{_e(t.title)}</a>'
                                                     for t in tables) + "</p>"]
    for t in tables:
        parts.extend(render_table_html(t, anchor))
    if stalls:
        parts.append(f'<h2 id="{_e(anchor)}stalls">Stalls and overruns</h2>')
        parts.append("<p>" + "<br>".join(_e(x) for x in stalls) + "</p>")
    parts.append(f'<h2 id="{_e(anchor)}collapse">Collapse</h2>')
    parts.append("<p>" + "<br>".join(_e(x) for x in collapse_lines(report.collapsed, report.opts.collapse_fraction))
                 + "</p>")
    if starved:
        parts.append(f'<h2 id="{_e(anchor)}starved">Starved connections</h2>')
        parts.append("<p>" + "<br>".join(_e(x) for x in starved) + "</p>")
    parts.extend(render_counts_html(report.counts, anchor))
    parts.extend(render_pool_html(report.pool, anchor))
    parts.append("<h2>Plots</h2>")
    for p in all_plots(data):
        parts.extend(_plot_html(p, anchor))
    # After the plots: one table per cell makes a long section, read after the overview.
    parts.extend(render_per_query_html(cell_work(data), anchor))
    return parts


def render_html_report(report: Report) -> str:
    """The self-contained HTML report with plots."""
    return page(f"benchfleet report: {report.data.name} ({report.data.campaign_id})", report_sections(report))


def render_compare_html(c: CampaignComparison) -> str:
    """The comparison as one self-contained HTML page with the same tables, marks and legends."""
    parts = ["<p>" + "<br>".join(_e(line) for line in header_lines(c) if line) + "</p>"]
    for t in c.tables:
        parts.extend(render_table_html(t))
    stalls = compare_stall_lines(c)
    if stalls:
        parts.append('<h2 id="stalls">Stalls and overruns</h2>')
        parts.append("<p>" + "<br>".join(_e(x) for x in stalls if x) + "</p>")
    parts.append('<h2 id="counts">Client and server counts</h2>')
    parts.append("<p>" + "<br>".join(_e(x) for x in count_summary_lines(c)) + "</p>")
    return page(f"benchfleet compare: {c.b.name} against {c.a.name}", parts)
