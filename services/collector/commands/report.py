"""`collector report CAMPAIGN`: one campaign's tables in any registered format."""

from __future__ import annotations

import argparse
import sys

from services.collector.commands.output import options
from services.common.cli import EXIT_COLLAPSE, EXIT_OK, EXIT_USAGE, error, write_output
from services.common.config import Settings
from services.common.store import Store
from services.reporting import load as loading
from services.reporting.render import registry
from services.reporting.report import analyse


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    r = registry.renderer(args.fmt, "report")
    opts = r.options(options(args))
    # Bytes, or a page with inlined plots, belong in a file.
    if (r.to_file or r.plots) and not args.out:
        error(f"--format {r.name} writes a file: give --out FILE")
        return EXIT_USAGE
    page = registry.renderer("html", "report") if args.html else None
    with Store(settings) as store:
        try:
            data = loading.load_for(store, args.campaign, opts, plots=r.plots or page is not None)
        except LookupError:
            error(f"no campaign {args.campaign!r} in the results DB")
            return EXIT_USAGE
    report = analyse(data, opts)
    write_output(args.out, r.render_report(report))
    if page is not None:
        write_output(args.html, page.render_report(analyse(data, page.options(opts))))
        print(f"wrote {args.html}", file=sys.stderr)
    if args.fail_on_collapse and report.collapsed:
        error(f"{len(report.collapsed)} collapsed cell(s) in {data.campaign_id}")
        return EXIT_COLLAPSE
    return EXIT_OK
