"""`collector report CAMPAIGN`: one campaign's tables in any registered format, with the latency
percentiles asked by `--percentiles` read from the stored histograms."""

from __future__ import annotations

import argparse
import json
import sys

from services.collector.commands.output import missing_out, options
from services.common.cli import EXIT_COLLAPSE, EXIT_OK, EXIT_USAGE, error, write_output
from services.common.config import Settings
from services.common.store import Store
from services.reporting import load as loading
from services.reporting import percentiles as pct
from services.reporting.options import ReportOptions
from services.reporting.render import registry
from services.reporting.report import analyse

def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    r = registry.renderer(args.fmt, "report")
    opts = r.options(options(args))
    if (why := missing_out(r, args.out)) is not None:
        error(why)
        return EXIT_USAGE
    asked: tuple[float, ...] = ()
    if getattr(args, "percentiles", None):
        if r.name not in _PERCENTILE_FORMATS:
            error(f"--percentiles: not in --format {r.name} (it is in {', '.join(_PERCENTILE_FORMATS)})")
            return EXIT_USAGE
        try:
            asked = pct.parse_percentiles(args.percentiles)
        except ValueError as e:
            error(f"{e}")
            return EXIT_USAGE
    page = registry.renderer("html", "report") if args.html else None
    with Store(settings) as store:
        try:
            data = loading.load_for(store, args.campaign, opts, plots=r.plots or page is not None,
                                    pool=getattr(args, "pool", None))
        except loading.SeveralPools as e:
            if getattr(args, "pool", None) is not None or asked:
                error(f"{e}" if getattr(args, "pool", None) is not None else
                      f"--percentiles: {e} (every pool on one page has no percentile table)")
                return EXIT_USAGE
            if not r.renders("pools") or (page is not None and not page.renders("pools")):
                error(f"{e} (--format {r.name} has no page for several pools)")
                return EXIT_USAGE
            return _pools_report(store, args, r, opts, page)
        except LookupError:
            error(f"no campaign {args.campaign!r} in the results DB")
            return EXIT_USAGE
        # Histograms are in the whole results only: read them when percentiles are asked.
        cells = pct.cell_percentiles(store.results.whole(data.campaign_id), asked) if asked else []
    report = analyse(data, opts)
    rendered = r.render_report(report)
    if asked:
        rendered = _with_percentiles(r.name, rendered, cells, asked, data.targets)
    write_output(args.out, rendered)
    if page is not None:
        write_output(args.html, page.render_report(analyse(data, page.options(opts))))
        print(f"wrote {args.html}", file=sys.stderr)
    if args.fail_on_collapse and report.collapsed:
        error(f"{len(report.collapsed)} collapsed cell(s) in {data.campaign_id}")
        return EXIT_COLLAPSE
    return EXIT_OK


def _pools_report(store: Store, args: argparse.Namespace, r: registry.Renderer, opts: ReportOptions,
                  page: registry.Renderer | None) -> int:
    """Each pool's report, then the "Pools compared" table of the campaign's cells."""
    pools = loading.load_pools(store, args.campaign, opts, plots=r.plots)
    write_output(args.out, r.render_pools(pools))
    if page is not None:
        write_output(args.html, page.render_pools(loading.load_pools(store, args.campaign, page.options(opts), plots=True)))
        print(f"wrote {args.html}", file=sys.stderr)
    if args.fail_on_collapse and pools.collapsed:
        error(f"{pools.collapsed} collapsed cell(s) in {pools.campaign_id}")
        return EXIT_COLLAPSE
    return EXIT_OK


#: The formats a percentile table is added to (a page or a spreadsheet has its own layout).
_PERCENTILE_FORMATS = ("text", "markdown", "csv", "json")


def _with_percentiles(fmt: str, rendered: str | bytes, cells: list[pct.CellPercentiles],
                      asked: tuple[float, ...], targets: tuple[str, ...]) -> str:
    """The rendered report with the cells' percentiles: a ``percentiles`` member of the JSON
    document, or a table after the others."""
    rank = {t: i for i, t in enumerate(targets)}
    cells = sorted(cells, key=lambda c: (c.workload, c.threads, rank.get(c.target, len(rank)), c.target))
    text = rendered if isinstance(rendered, str) else rendered.decode()
    if fmt == "json":
        doc = json.loads(text)
        doc["percentiles"] = pct.as_data(cells, asked)
        return json.dumps(doc, indent=1, default=str) + "\n"
    if fmt == "csv":
        return text.rstrip("\n") + "\n\n" + "\n".join(pct.render_csv(cells, asked)) + "\n"
    lines = pct.render_text(cells, asked)
    if fmt == "markdown":
        lines = lines[:2] + ["```"] + lines[2:] + ["```"]
    return text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
