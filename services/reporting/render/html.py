"""`collector report --html`: one self-contained HTML file with the settings, every table, the
collapse list and the plots (PNG inlined as data: URIs, so it opens without a network)."""

from __future__ import annotations

import base64
import html
import time
from typing import Sequence

from services.reporting.analysis import (
    CampaignData,
    CollapseFinding,
    NamedTable,
    collapse_lines,
)
from services.reporting.render.formats import render_settings
from services.reporting.render.plots import Plot
from services.reporting.tables import (
    MARK_FASTER,
    MARK_SLOWER,
    MARK_STALL,
    failed_lines,
    format_value,
    formula_lines,
    legend_lines,
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
.note { color: #555; font-size: .9em; } ul.legend { font-size: .9em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def render_table_html(named: NamedTable) -> list[str]:
    """One comparison table as an HTML table with its marks, formulas, legend and failures."""
    table = named.table
    spec = table.spec
    out = [f'<h3 id="table-{_e(named.key)}">{_e(named.title)}</h3>', '<table class="cmp">',
           '<tr><th rowspan="2">sysbench test</th>' + ('<th rowspan="2">target</th>' if spec.grouped else "")
           + f'<th colspan="{len(table.threads)}">Number of threads</th></tr>',
           "<tr>" + "".join(f"<th>{t}</th>" for t in table.threads) + "</tr>"]
    for row in table.rows:
        cells = []
        for c in row.cells:
            cls = "num" + (" faster" if MARK_FASTER in c.mark else " slower" if MARK_SLOWER in c.mark else "") \
                + (" stalled" if MARK_STALL in c.mark else "")
            title = c.comparison.reason if c.comparison else ""
            cells.append(f'<td class="{cls}" title="{_e(title)}">{_e(format_value(c, table.places))}'
                         f"{_e(c.mark)}</td>")
        label = f"<td>{_e(row.workload)}</td>" + (f"<td>{_e(row.label.strip())}</td>" if spec.grouped else "")
        out.append("<tr>" + label + "".join(cells) + "</tr>")
    out.append("</table>")
    out.append('<p class="note">' + "<br>".join(_e(f) for f in formula_lines(spec)) + "</p>")
    out.append('<ul class="legend">' + "".join(
        f"<li><code>{_e(mark)}</code> {_e(text)}</li>" if mark else f"<li>{_e(text)}</li>"
        for mark, text in legend_lines(table)) + "</ul>")
    if table.failed:
        out.append('<p class="note">' + "<br>".join(_e(x) for x in failed_lines(table)) + "</p>")
    return out


def _plot_html(p: Plot) -> list[str]:
    data = base64.b64encode(p.png).decode("ascii")
    out = [f'<figure id="plot-{_e(p.key)}" class="plot">',
           f'<img alt="{_e(p.title)}" src="data:image/png;base64,{data}">',
           f"<figcaption>{_e(p.title)}</figcaption>"]
    if p.note:
        out.append(f'<p class="note">{_e(p.note)}</p>')
    out.append("</figure>")
    return out


def render_html(data: CampaignData, tables: Sequence[NamedTable], collapsed: Sequence[CollapseFinding],
                fraction: float, plots: Sequence[Plot], stalls: Sequence[str] = ()) -> str:
    """The whole report as one HTML document."""
    title = f"benchfleet report: {data.name} ({data.campaign_id})"
    ok = sum(1 for r in data.runs if r.status == "ok")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{_e(title)}</h1>",
             f'<p class="note">Campaign state: {_e(data.state)}; {ok} of {len(data.runs)} stored runs succeeded; '
             f"rendered {_e(time.strftime('%Y-%m-%d %H:%M:%S %Z'))}.</p>",
             "<h2>Settings</h2>", "<pre>" + _e("\n".join(render_settings(data.settings))) + "</pre>",
             "<h2>Tables</h2>",
             '<p class="note">Contents: ' + ", ".join(f'<a href="#table-{_e(t.key)}">{_e(t.title)}</a>'
                                                     for t in tables) + "</p>"]
    for t in tables:
        parts.extend(render_table_html(t))
    if stalls:
        parts.append('<h2 id="stalls">Stalls and overruns</h2>')
        parts.append("<p>" + "<br>".join(_e(x) for x in stalls) + "</p>")
    parts.append('<h2 id="collapse">Collapse</h2>')
    parts.append("<p>" + "<br>".join(_e(x) for x in collapse_lines(collapsed, fraction)) + "</p>")
    parts.append("<h2>Plots</h2>")
    for p in plots:
        parts.extend(_plot_html(p))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
