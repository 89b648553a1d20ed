"""`collector`: store results from the bus (`serve`) and print comparison tables (`report`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from services.common import logs
from services.common.bus import BusError
from services.common.config import SettingsError, Settings, add_settings_flags, settings_from
from services.common.store import StoreError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CONNECT = 0, 1, 2, 3
#: `report --fail-on-collapse` found a collapsed cell (the report is still written).
EXIT_COLLAPSE = 4


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from services.common.discovery import announced

    from services.collector.consumer import Collector
    from services.collector.prometheus import CollectorMetrics

    metrics = CollectorMetrics()
    pools = tuple(p for p in args.pools.split(",") if p)
    c = Collector(settings, pools=pools, metrics=metrics)
    signal.signal(signal.SIGTERM, lambda *_: c.stop())
    signal.signal(signal.SIGINT, lambda *_: c.stop())
    with announced(metrics, settings, "collector"):
        c.run_forever()
    return EXIT_OK


def cmd_dashboards(args: argparse.Namespace, settings: Settings) -> int:
    from services.collector.dashboards import write_dashboards

    for path in write_dashboards(args.out):
        print(f"wrote {path}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from services.collector.reporting_cli import run_report

    return run_report(args, settings)


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    from services.collector.reporting_cli import run_compare

    return run_compare(args, settings)


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    from services.collector.reporting_cli import run_history

    return run_history(args, settings)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="collector", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="consume results and store them in the results DB")
    s.add_argument("--pools", default="default", help="worker pools whose queue depth to export, comma-separated")
    add_settings_flags(s)
    s.set_defaults(fn=cmd_serve)
    s = sub.add_parser("report", help="print the comparison table of a campaign")
    s.add_argument("campaign", help="campaign id, or a name for its latest campaign")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--delta", action="store_true", help="cells (target/baseline*100)-100")
    g.add_argument("--absolute", action="store_true", help="mean value per target instead of ratios")
    from services.collector.reporting_cli import add_compare_flags, add_history_flags, add_report_flags

    add_report_flags(s)
    add_settings_flags(s)
    s.set_defaults(fn=cmd_report)
    s = sub.add_parser("compare", help="the same cells across two campaigns (B against A)")
    add_compare_flags(s)
    add_settings_flags(s)
    s.set_defaults(fn=cmd_compare)
    s = sub.add_parser("history", help="one cell (target, workload, threads) across every campaign")
    add_history_flags(s)
    add_settings_flags(s)
    s.set_defaults(fn=cmd_history)
    s = sub.add_parser("dashboards", help="write the Grafana dashboards (JSON) into a directory")
    s.add_argument("--out", default="dashboards", help="directory (default: dashboards)")
    s.set_defaults(fn=cmd_dashboards)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = settings_from(args)
    except SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    # Reports print what they have to say; only the long-running `serve` logs at info by default.
    explicit = getattr(args, "log_level", None) or os.environ.get("BENCHFLEET_LOG_LEVEL")
    logs.configure("collector", settings.log_level if explicit or args.command == "serve" else "warning")
    try:
        return int(args.fn(args, settings))
    except (BusError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONNECT


if __name__ == "__main__":
    sys.exit(main())
