"""`collector compare A B`: the same cells across two campaigns, each from the results DB or an
export file, in any registered format, with the `--fail-on-slower` gate and `--map` renaming A's
targets to B's names."""

from __future__ import annotations

import argparse

from services.collector.commands.output import missing_out, options
from services.collector.commands.sources import CampaignRef, load_export
from services.common.cli import EXIT_OK, EXIT_SLOWER, EXIT_USAGE, write_output, error
from services.common.config import Settings
from services.common.store import Store
from services.reporting import load as loading
from services.reporting.analysis import CampaignData
from services.reporting.compare import compare_campaigns, regressions
from services.reporting.target_map import parse_map, rename_targets
from services.reporting.render import registry


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    r = registry.renderer(args.fmt, "compare")
    opts = r.options(options(args))
    if (why := missing_out(r, args.out)) is not None:
        error(why)
        return EXIT_USAGE
    # A comparison shows the chosen metric only: whole results only for a metric they alone hold.
    whole = not opts.table_metric.column
    refs = [CampaignRef.parse(args.campaign_a), CampaignRef.parse(args.campaign_b)]
    try:
        names = parse_map(args.map or [])
        a, b = _load(refs, settings, whole)
        c = compare_campaigns(rename_targets(a, names), b, opts)
    except LookupError as e:
        error(e.args[0])
        return EXIT_USAGE
    except ValueError as e:
        error(str(e))
        return EXIT_USAGE
    write_output(args.out, r.render_compare(c))
    if args.fail_on_slower is not None:
        slower = regressions(c, args.fail_on_slower)
        if slower:
            error(f"{len(slower)} cell(s) of {c.b.campaign_id} significantly slower than {c.a.campaign_id} "
                  f"by more than {args.fail_on_slower * 100:g}%: over their whole adjusted interval, and by at "
                  f"least --min-effect {opts.min_effect * 100:g}%:")
            for s in slower:
                error(f"  {s.describe(c.metric.unit)}")
            return EXIT_SLOWER
    return EXIT_OK


def _load(refs: list[CampaignRef], settings: Settings, whole: bool) -> tuple[CampaignData, CampaignData]:
    """Both campaigns: export files read as they are, the others from the results DB (opened only
    when one is needed, so two files compare without a results DB)."""
    loaded: list[CampaignData | None] = [load_export(r.read_export()) if r.is_file else None for r in refs]
    if any(d is None for d in loaded):
        with Store(settings) as store:
            loaded = [d if d is not None else loading.load(store, r.text, with_results=whole)
                      for d, r in zip(loaded, refs)]
    a, b = loaded
    assert a is not None and b is not None
    return a, b
