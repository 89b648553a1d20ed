"""`collector compare A B`: the same cells across two campaigns, each from the results DB or an
export file, in any registered format, with the `--fail-on-slower` gate and `--map` renaming A's
targets to B's names."""

from __future__ import annotations

import argparse
import sys

from services.collector.commands.output import missing_out, options
from services.collector.commands.sources import CampaignRef, load_export
from services.common.cli import EXIT_OK, EXIT_SLOWER, EXIT_USAGE, write_output, error
from services.common.config import Settings
from services.common.store import Store
from services.reporting import load as loading
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.campaign_noise import BetweenCampaigns
from services.reporting.compare import campaign_shifts, compare_campaigns, regressions
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
        a = rename_targets(a, names)
        between = _shifts(a, b, refs, [CampaignRef.parse(x) for x in args.noise_from or []], settings, whole, opts)
        c = compare_campaigns(a, b, opts, between)
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


def _shifts(a: CampaignData, b: CampaignData, refs: list[CampaignRef], noise: list[CampaignRef],
            settings: Settings, whole: bool, opts: ReportOptions) -> BetweenCampaigns | None:
    """How far whole campaigns of the compared cells moved before: from ``--noise-from``'s campaigns
    when given, else from every other campaign of these cells in the results DB when A or B came
    from it (two files and no ``--noise-from`` open no results DB: unknown)."""
    targets = [t for t in a.targets if t in b.targets]
    if noise:
        runs = [r for d in _load_all(noise, settings, whole) for r in d.runs]
    elif all(r.is_file for r in refs):
        return None
    else:
        cells = [(w, t) for w in a.workloads if w in b.workloads for t in a.threads if t in b.threads]
        with Store(settings) as store:
            runs = [e.row for target in targets for w, t in cells
                    for e in store.results.history(target, w, t, with_results=whole)]
        runs, note = loading.without_pools(runs, "the noise between campaigns")
        if note:
            print(note, file=sys.stderr)
    return campaign_shifts(runs, a, b, opts.table_metric, targets)


def _load_all(refs: list[CampaignRef], settings: Settings, whole: bool) -> list[CampaignData]:
    """Campaigns by id, name or export file; the results DB is opened only when one is needed."""
    loaded: list[CampaignData | None] = [load_export(r.read_export()) if r.is_file else None for r in refs]
    if any(d is None for d in loaded):
        with Store(settings) as store:
            loaded = [d if d is not None else loading.load(store, r.text, with_results=whole)
                      for d, r in zip(loaded, refs)]
    return [d for d in loaded if d is not None]


def _load(refs: list[CampaignRef], settings: Settings, whole: bool) -> tuple[CampaignData, CampaignData]:
    """Both campaigns: export files read as they are, the others from the results DB (opened only
    when one is needed, so two files compare without a results DB)."""
    a, b = _load_all(refs, settings, whole)
    return a, b
