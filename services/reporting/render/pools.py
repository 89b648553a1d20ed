"""A campaign on several pools in every format: each pool's report as that format renders one, then
the "Pools compared" table (pools_compared.py) and its verdict."""

from __future__ import annotations

import csv
import html
import io
import json

from services.reporting.pools_compared import HEADER, PoolsReport, as_data, render_lines, summary, table_rows
from services.reporting.render.html import page, report_sections
from services.reporting.render.machine_formats import ods_document, ods_sheets, render_json
from services.reporting.report import render_csv_lines, render_lines as report_lines, render_markdown_lines


def render_pools_text(p: PoolsReport) -> str:
    parts = [f"=== Pool {pool} ===\n\n" + "\n".join(report_lines(r)).rstrip("\n") for pool, r in p.reports]
    parts.append("\n".join(render_lines(p.rows, p.metric, markdown=False)))
    return "\n\n".join(parts) + "\n"


def render_pools_markdown(p: PoolsReport) -> str:
    parts = [f"# Pool {pool}\n\n" + "\n".join(render_markdown_lines(r)).rstrip("\n") for pool, r in p.reports]
    parts.append("\n".join(render_lines(p.rows, p.metric, markdown=True)))
    return "\n\n".join(parts) + "\n"


def render_pools_csv(p: PoolsReport) -> str:
    """Each pool's long-format table with a ``pool`` column first (one header), a blank line, then
    the pools compared with the verdict as its last line."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for i, (pool, r) in enumerate(p.reports):
        for j, row in enumerate(csv.reader(render_csv_lines(r))):
            if j == 0:
                if i == 0:
                    w.writerow(["pool", *row])
                continue
            w.writerow([pool, *row])
    w.writerow([])
    w.writerow(HEADER)
    w.writerows(table_rows(p.rows))
    w.writerow([summary(p.rows, p.metric)])
    return out.getvalue()


def render_pools_json(p: PoolsReport) -> str:
    doc = {"campaign_id": p.campaign_id, "pools": {pool: json.loads(render_json(r)) for pool, r in p.reports},
           "pools_compared": {"metric": p.metric, "rows": as_data(p.rows), "summary": summary(p.rows, p.metric)}}
    return json.dumps(doc, indent=1, default=str) + "\n"


def render_pools_ods(p: PoolsReport) -> bytes:
    """One spreadsheet: the pools compared first, then each pool's sheets named after it."""
    sheets = [("pools compared", [list(HEADER), *map(list, table_rows(p.rows)), [], [summary(p.rows, p.metric)]])]
    for pool, r in p.reports:
        sheets += [(f"{pool} {name}", rows) for name, rows in ods_sheets(r)]
    return ods_document(sheets)


def render_pools_html(p: PoolsReport) -> str:
    """One page: the pools compared first (what the page is for), then each pool's whole report."""
    e = html.escape
    body = ['<h2 id="pools-compared">Pools compared</h2>',
            f"<p>{e(summary(p.rows, p.metric))}</p>",
            '<p class="note">Pools: ' + ", ".join(f'<a href="#pool-{e(pool)}">{e(pool)}</a>' for pool, _ in p.reports)
            + "</p>",
            '<table class="cmp pools"><tr>' + "".join(f"<th>{e(h)}</th>" for h in HEADER) + "</tr>"]
    for row, c in zip(table_rows(p.rows), p.rows):
        cls = "slower" if c.verdict == "platform specific" else ""
        body.append("<tr>" + "".join(f'<td class="num">{e(v)}</td>' if i in (1, 4, 6, 7, 8) else
                                     f'<td class="{cls}">{e(v)}</td>' if i == 9 else f"<td>{e(v)}</td>"
                                     for i, v in enumerate(row)) + "</tr>")
    body.append("</table>")
    for pool, r in p.reports:
        body.append(f'<h2 id="pool-{e(pool)}">Pool {e(pool)}</h2>')
        body.extend(report_sections(r, anchor=f"pool-{pool}-"))
    return page(f"benchfleet report: {p.name} ({p.campaign_id}) on pools "
                + ", ".join(pool for pool, _ in p.reports), body)
