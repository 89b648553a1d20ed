"""`collector compare A B`: the same cells across two campaigns, in any registered format, with
the `--fail-on-slower` gate."""

from __future__ import annotations

import argparse
import sys

from services.collector.commands.output import options
from services.common.cli import EXIT_OK, EXIT_SLOWER, EXIT_USAGE, write_output
from services.common.config import Settings
from services.common.store import Store
from services.reporting import load as loading
from services.reporting.compare import compare_campaigns, regressions
from services.reporting.render import registry


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    r = registry.renderer(args.fmt, "compare")
    opts = r.options(options(args))
    if r.to_file and not args.out:
        print(f"error: --format {r.name} needs --out FILE", file=sys.stderr)
        return EXIT_USAGE
    # A comparison shows the chosen metric only: whole results only for a metric they alone hold.
    whole = not opts.table_metric.column
    with Store(settings) as store:
        try:
            a = loading.load(store, args.campaign_a, with_results=whole)
            b = loading.load(store, args.campaign_b, with_results=whole)
        except LookupError as e:
            print(f"error: {e.args[0]}", file=sys.stderr)
            return EXIT_USAGE
    try:
        c = compare_campaigns(a, b, opts)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    write_output(args.out, r.render_compare(c))
    if args.fail_on_slower is not None:
        slower = regressions(c, args.fail_on_slower)
        if slower:
            print(f"error: {len(slower)} cell(s) of {c.b.campaign_id} significantly slower than {c.a.campaign_id} "
                  f"by more than {args.fail_on_slower * 100:g}%: over their whole adjusted interval, and by at "
                  f"least --min-effect {opts.min_effect * 100:g}%:", file=sys.stderr)
            for s in slower:
                print(f"error:   {s.describe(c.metric.unit)}", file=sys.stderr)
            return EXIT_SLOWER
    return EXIT_OK
