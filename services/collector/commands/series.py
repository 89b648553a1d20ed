"""`collector series CAMPAIGN`: every run's per-second figures as CSV or JSON, from the results
DB or an export file."""

from __future__ import annotations

import argparse
import sys

from services.collector.commands.sources import CampaignRef
from services.common.cli import EXIT_OK, EXIT_USAGE, write_output, error
from services.common.config import Settings
from services.common.messages.results import RunResult
from services.common.store import Store
from services.reporting import series_out
from services.reporting.percentiles import parse_percentiles

#: The percentiles of each run's histogram the JSON gives when --percentiles is not given.
DEFAULT_PERCENTILES = "50,95,99"


def cmd_series(args: argparse.Namespace, settings: Settings) -> int:
    try:
        percentiles = parse_percentiles(args.percentiles or DEFAULT_PERCENTILES)
    except ValueError as e:
        error(f"{e}")
        return EXIT_USAGE
    if args.percentiles and args.fmt != "json":
        print("error: --percentiles: the CSV has one line per second and no per-second latency is "
              "stored; use --format json for each run's percentiles", file=sys.stderr)
        return EXIT_USAGE
    ref = CampaignRef.parse(args.campaign)
    results: list[RunResult]
    if ref.is_file:
        export = ref.read_export()
        campaign_id, targets, results = (export.campaign.campaign_id,
                                         [t.name for t in export.campaign.spec.targets], export.results)
    else:
        with Store(settings) as store:
            c = store.campaigns.get(args.campaign)
            if c is None:
                error(f"no campaign {args.campaign!r} in the results DB")
                return EXIT_USAGE
            campaign_id, targets = c.campaign_id, [t.name for t in c.spec.targets]
            results = store.results.whole(c.campaign_id)
    runs = series_out.ordered(results, targets)
    text = series_out.render_csv(runs) if args.fmt == "csv" else series_out.render_json(campaign_id, runs, percentiles)
    write_output(args.out, text)
    if args.out:
        seconds = sum(len(series_out.second_rows(r)) for r in runs)
        print(f"wrote {args.out}: campaign {campaign_id}, {len(runs)} runs, {seconds} seconds", file=sys.stderr)
    return EXIT_OK
