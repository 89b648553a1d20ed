"""`collector`: store results from the bus (`serve`), print comparison tables (`report`,
`compare`, `history`), move campaigns between results DBs (`export`, `import`,
`import-sysbench`), print per-second series (`series`), compute per-cell statistics (`stats`) and
write the Grafana dashboards."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from services.collector import sysbench_import as sbi
from services.collector.commands.compare import cmd_compare
from services.collector.commands.history import cmd_history
from services.collector.commands.report import cmd_report
from services.collector.commands.series import cmd_series
from services.common.cli import (
    EXIT_COLLAPSE,
    EXIT_OK,
    EXIT_SLOWER,
    EXIT_USAGE,
    Deprecated,
    Parser,
    add_completion,
    percent,
    error,
    run_main,
    write_output,
)
from services.common.config import AMQP, DB, METRICS, Settings, add_settings_flags
from services.common.completion import command_of
from services.common.store import Store
from services.reporting import metrics_catalog as mc
from services.reporting.options import ReportOptions
from services.reporting.render import registry

if TYPE_CHECKING:
    from services.common.store.campaign_file import CampaignExport

_DEFAULTS = ReportOptions()


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here, not at the top: the report commands then load neither pika nor the consumer.
    from services.collector.cancel_relay import CancelRelay
    from services.collector.consumer import Collector
    from services.collector.http_sd import SD_PATH, WorkerDirectory
    from services.collector.prometheus import CollectorMetrics
    from services.common.bus.rabbitmq import Role, rabbit_factory
    from services.common.monitoring.discovery import announced

    from services.collector.spec_regressions import judge_spec
    from services.collector.statistics import refresh_cell_stats
    from services.collector.takeover_check import TakeoverCheck
    from services.common.bus.management import ManagementApi
    from services.common.messages.runs import pool_of_run_id

    metrics = CollectorMetrics()
    directory = WorkerDirectory(ttl_s=settings.announce_ttl_s)
    # Prometheus' http_sd_configs read the fleet's workers beside the collector's /metrics.
    metrics.routes[SD_PATH] = directory.render
    pools = tuple(p for p in args.pools.split(",") if p)
    relay = CancelRelay(check_every_s=settings.cancel_check_s)
    c = Collector(connect=rabbit_factory(settings, Role.COLLECTOR), open_store=lambda: Store(settings).open(), pools=pools,
                  metrics=metrics, directory=directory, reap_grace_s=settings.reap_grace_s,
                  after_store=lambda store, r: refresh_cell_stats(store, r.campaign_id, r.cell.workload, cell=r.cell,
                                                                         pool=pool_of_run_id(r.run_id)),  # type: ignore[arg-type]
                  after_fail=lambda store, cid, workload: refresh_cell_stats(store, cid, workload),  # type: ignore[arg-type]
                  after_end=lambda store, cid: judge_spec(store, metrics, cid),  # type: ignore[arg-type]
                  cancels=lambda bus, store: relay.tick(bus, store.campaigns),  # type: ignore[attr-defined]
                  takeover=TakeoverCheck(ManagementApi(settings).runs_consumers))
    signal.signal(signal.SIGTERM, lambda *_: c.stop())
    signal.signal(signal.SIGINT, lambda *_: c.stop())
    with announced(metrics, settings, "collector"):
        c.run_forever()
    return EXIT_OK


def cmd_retire_old_exchange(args: argparse.Namespace, settings: Settings) -> int:
    from services.common.bus.rabbitmq import RabbitBus, Role

    # Explicit, not at a declare: workers of earlier versions publish there until upgraded.
    with RabbitBus(settings, name="benchfleet collector retire", role=Role.COLLECTOR) as bus:
        gone = bus.retire_old_exchanges()
    print(f"retired (deleted if it was there): exchange {', '.join(gone)}")
    return EXIT_OK


def cmd_dashboards(args: argparse.Namespace, settings: Settings) -> int:
    from services.collector.dashboards import write_dashboards

    for path in write_dashboards(args.out):
        print(f"wrote {path}")
    return EXIT_OK


def _fraction(text: str) -> float:
    v = float(text)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return v


def _nonneg(text: str) -> float:
    v = float(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


def _metric(text: str) -> str:
    try:
        return mc.metric(text).key
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _metrics(text: str) -> str:
    """One metric, or several comma-separated (`history --changes` searches each)."""
    return ",".join(_metric(part.strip()) for part in text.split(","))


_METRIC_HELP = (", ".join(mc.BUILTIN) + " (default qps), "
                "or status:NAME (a server status delta per transaction, e.g. status:Key_reads)")


def _stat_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("--metric", type=_metric, default=_DEFAULTS.metric, help=_METRIC_HELP)
    _test_flags(s)
    s.add_argument("--mark-high-cv", action="store_true", help="mark cells with unusually high CV by * as the seeds did")
    s.add_argument("--cv-threshold", type=_nonneg, default=_DEFAULTS.cv_threshold,
                   help="CV above which --mark-high-cv marks a cell (default 0.05)")


def _test_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("--alpha", type=_fraction, default=_DEFAULTS.alpha, help="significance level (default 0.05)")
    s.add_argument("--min-effect", type=_nonneg, default=_DEFAULTS.min_effect,
                   help="smallest relative difference called a change (default 0.01 = 1%%)")


def _mode_flags(s: argparse.ArgumentParser, delta_help: str, absolute_help: str) -> None:
    g = s.add_mutually_exclusive_group()
    g.add_argument("--delta", dest="mode", action="store_const", const="delta", help=delta_help)
    g.add_argument("--absolute", dest="mode", action="store_const", const="absolute", help=absolute_help)
    s.set_defaults(mode=_DEFAULTS.mode)


def _format_flag(s: argparse.ArgumentParser, document: registry.Document, help: str) -> None:
    """``--format``: the formats the registry has for ``document``, text by default."""
    s.add_argument("--format", dest="fmt", choices=registry.names(document),
                   default=registry.DEFAULT_FORMAT, help=help)
    _json_flag(s)


def _json_flag(s: argparse.ArgumentParser) -> None:
    """``--json``: print JSON, the one meaning it has in every command (here: ``--format json``)."""
    s.add_argument("--json", dest="fmt", action="store_const", const="json", help="print JSON (--format json)")


def _file_formats(document: registry.Document, *, plots: bool) -> str:
    """The formats of ``document`` that write only a file (bytes; for a report, a page with plots too)."""
    found = [n for n in registry.names(document)
             if registry.renderer(n, document).to_file or (plots and registry.renderer(n, document).plots)]
    return " and ".join(found) or "none"


def add_report_flags(s: argparse.ArgumentParser) -> None:
    _stat_flags(s)
    _format_flag(s, "report", f"text (the seeds' layout, default) or another; --out is required for "
                              f"{_file_formats('report', plots=True)}")
    s.add_argument("--out", help="write to this file instead of stdout (required for "
                                 f"{_file_formats('report', plots=True)})")
    s.add_argument("--html", metavar="FILE", action=Deprecated, instead="a second `report --format html --out FILE`")
    s.add_argument("--all-tables", action="store_true", help="text/markdown: every recorded metric, not only --metric")
    s.add_argument("--pool", help="a campaign on several pools (spec pools): this pool's runs only; without it "
                                  "text, markdown and json show each pool's report and the pools compared")
    s.add_argument("--percentiles", metavar="LIST",
                   help="also the latency percentiles of each cell, e.g. 50,90,99.9, from the merged histograms "
                        "of its successful runs (text, markdown, csv, json; n/a where no transaction completed)")
    s.add_argument("--collapse-fraction", type=_fraction, default=_DEFAULTS.collapse_fraction,
                   help="q/s below this fraction of the peak at fewer threads is a collapse (default 0.5)")
    s.add_argument("--fail-on-collapse", action="store_true",
                   help=f"exit {EXIT_COLLAPSE} (EXIT_COLLAPSE) when any cell collapsed")


def add_compare_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("campaign_a", help="the reference campaign: id, name for its latest, or a file written by "
                                      "collector export (two files compare without a results DB)")
    s.add_argument("campaign_b", help="the campaign compared against A (id, name or export file)")
    _mode_flags(s, "cells (B/A*100)-100", "mean value of A and B instead of ratios")
    _stat_flags(s)
    _format_flag(s, "compare", f"text (default) or another; --out is required for {_file_formats('compare', plots=True)}")
    s.add_argument("--out", help=f"write to this file instead of stdout (required for {_file_formats('compare', plots=True)})")
    # PCT is required: an optional value took the next word (`--fail-on-slower A B` read A as PCT).
    s.add_argument("--map", action="append", metavar="OLD=NEW",
                   help="compare A's target OLD as B's target NEW (repeat for more targets), for campaigns "
                        "whose targets are named differently")
    s.add_argument("--noise-from", action="append", metavar="CAMPAIGN",
                   help="earlier campaigns of these cells (id, name or export file; repeat) whose spread from "
                        "one campaign to the next widens every interval; by default every other campaign of "
                        "these cells in the results DB (none when A and B are both files)")
    s.add_argument("--fail-on-slower", metavar="PCT", type=percent, default=None,
                   help=f"exit {EXIT_SLOWER} (EXIT_SLOWER) when any cell of B is slower than A by more than "
                        "PCT percent over its whole adjusted interval (Benjamini-Hochberg over the page at "
                        "--alpha, Benjamini-Yekutieli interval) and by at least --min-effect (0: any "
                        "confirmed slowdown beyond --min-effect); lists the failing cells with their "
                        "intervals; the comparison is still written")


def add_history_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("spec", nargs="?", help="with --changes: the spec's name; its campaigns are the nights searched")
    s.add_argument("--changes", action="store_true",
                   help="the change points of every cell and metric over every campaign of SPEC (E-Divisive means, "
                        "one false-discovery family), instead of one cell's history")
    s.add_argument("--target", help="target name, as in the specs (one cell's history)")
    s.add_argument("--workload", help="workload name, e.g. oltp_point_select (one cell's history)")
    s.add_argument("--threads", type=int, help="thread count of the cell (one cell's history)")
    s.add_argument("--metric", type=_metrics, default=None,
                   help=_METRIC_HELP + "; with --changes several, comma-separated (default qps,p95_ms)")
    _test_flags(s)
    s.add_argument("--fail-on-slower", metavar="PCT", type=percent, default=None,
                   help=f"with --changes: judge the newest campaign against the last good one as `compare "
                        f"--fail-on-slower` does, and exit {EXIT_SLOWER} (EXIT_SLOWER) when a cell is slower by "
                        "more than PCT percent (the regression the alert names)")
    s.add_argument("--format", dest="fmt", choices=tuple(dict.fromkeys(registry.names("history")
                                                                       + registry.names("changes"))),
                   default=registry.DEFAULT_FORMAT,
                   help="text (aligned table with a legend, default) or another (markdown: --changes only)")
    _json_flag(s)


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    with Store(settings) as store:
        export = store.transfer.export_campaign(args.campaign)
    if export is None:
        error(f"no campaign {args.campaign!r} in the results DB")
        return EXIT_USAGE
    if (why := export.unfinished()) is not None:
        error(why)
        return EXIT_USAGE
    write_output(args.out, export.encode())
    if args.out:
        print(f"wrote {args.out}: campaign {export.campaign.campaign_id}, {len(export.runs)} runs, "
              f"{len(export.results)} results", file=sys.stderr)
    return EXIT_OK


def _import(settings: Settings, export: "CampaignExport", *, replace: bool) -> None:
    from services.collector.statistics import refresh_cell_stats

    with Store(settings) as store:
        store.transfer.import_campaign(export, replace=replace)
        refresh_cell_stats(store, export.campaign.campaign_id)


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from services.common.store.campaign_file import decode_export

    try:
        text = Path(args.file).read_bytes() if args.file != "-" else sys.stdin.buffer.read()
    except OSError as e:
        error(f"{args.file}: {e.strerror}")
        return EXIT_USAGE
    export = decode_export(text, args.file)
    _import(settings, export, replace=args.replace)
    print(f"imported campaign {export.campaign.campaign_id}: {len(export.runs)} runs, {len(export.results)} results")
    return EXIT_OK


def cmd_import_sysbench(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from services.collector.sysbench_import import SysbenchFile, campaign_of, is_import, threads_of

    files = []
    counts: dict[tuple[str, int | None], int] = {}
    for name in args.files:
        try:
            text = Path(name).read_text(encoding="utf-8", errors="replace")
            mtime = Path(name).stat().st_mtime
        except OSError as e:
            error(f"{name}: {e.strerror}")
            return EXIT_USAGE
        f = SysbenchFile(name, text, args.target, args.workload, args.threads, 0, mtime)
        cell = (args.target, threads_of(f))
        # Files of one cell are its repetitions, in the order given (the same command run again
        # replaces them: run ids are deterministic).
        counts[cell] = counts.get(cell, args.first_repetition - 1) + 1
        files.append(SysbenchFile(name, text, args.target, args.workload, cell[1], counts[cell], mtime))
    with Store(settings) as store:
        earlier = store.transfer.export_campaign(args.campaign)
    if earlier is not None and earlier.campaign.campaign_id != args.campaign:
        earlier = None  # a campaign of that name, not that id: leave it alone
    if earlier is not None and not is_import(earlier) and not args.force:
        # Its spec would be replaced by the import's: the fleet's own campaign is never overwritten by accident.
        error(f"--campaign: {args.campaign} is a campaign the fleet ran ({earlier.campaign.state}, "
              f"{earlier.campaign.total_runs} runs), not an earlier import-sysbench; choose another id, "
              "or --force to add the imported runs to it (its spec becomes the import's)")
        return EXIT_USAGE
    export = campaign_of(files, args.campaign, baseline=args.baseline, earlier=earlier, now=time.time())
    # The export holds the earlier import's runs too (earlier=): replacing it adds the new ones.
    _import(settings, export, replace=True)
    print(f"imported {len(files)} sysbench run(s) into campaign {args.campaign} "
          f"({len(export.results)} runs in all): collector report {args.campaign}")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    from services.collector.statistics import refresh_cell_stats

    with Store(settings) as store:
        try:
            n = refresh_cell_stats(store, args.campaign)
            c = store.campaigns.get(args.campaign)
            # Results stored compressed before migration 11 get their per-second rows here.
            store.results.rewrite_series(c.campaign_id if c else args.campaign)
        except LookupError:
            error(f"no campaign {args.campaign!r} in the results DB")
            return EXIT_USAGE
    print(f"{n} cell statistics stored for {args.campaign} (cell_stats)")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="collector", description=__doc__)
    p.add_version()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help)

    s = command("serve", "consume results and store them in the results DB")
    s.add_argument("--pools", default=os.environ.get("BENCHFLEET_POOLS", "default"),
                   help="worker pools whose queue depth to export, comma-separated (env BENCHFLEET_POOLS)")
    add_settings_flags(s, AMQP, DB, METRICS, ("announce_ttl_s", "amqp_management_url"))
    s.set_defaults(fn=cmd_serve, long_running=True)
    s = command("report", "print the comparison table of a campaign")
    s.add_argument("campaign", help="campaign id, or a name for its latest campaign")
    _mode_flags(s, "cells (target/baseline*100)-100", "mean value per target instead of ratios")
    add_report_flags(s)
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_report)
    s = command("compare", "the same cells across two campaigns (B against A)")
    add_compare_flags(s)
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_compare)
    s = command("history", "one cell (target, workload, threads) across every campaign, or a spec's change "
                           "points (SPEC --changes)")
    add_history_flags(s)
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_history)
    s = command("series", "every run's per-second figures (transactions, queries, errors, ignored errors, "
                          "reconnects, open-loop queue) as CSV or JSON")
    s.add_argument("campaign", help="campaign id, name for its latest, or a file written by collector export")
    s.add_argument("--format", dest="fmt", choices=("csv", "json"), default="csv",
                   help="csv: one line per run and second (default); json: per run, its seconds and percentiles")
    _json_flag(s)
    s.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    s.add_argument("--percentiles", metavar="LIST",
                   help="json: each run's latency percentiles from its histogram, e.g. 50,90,99.9 (default 50,95,99)")
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_series)
    s = command("export", "write a campaign with every run and whole result (series, histograms, server "
                          "figures) to one portable JSON file")
    s.add_argument("campaign", help="campaign id, or a name for its latest campaign")
    s.add_argument("--out", metavar="FILE", help="the file to write (default: stdout)")
    s.add_argument("--json", dest="out", metavar="FILE", action=Deprecated, instead="--out FILE")
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_export)
    s = command("import", "bring an exported campaign into this results DB (same ids; a campaign id already "
                          "there is refused unless --replace)")
    s.add_argument("file", help="a file written by collector export (- for stdin)")
    s.add_argument("--replace", action="store_true",
                   help="replace a campaign of the same id: its runs and results become the file's")
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_import)
    s = command("import-sysbench", "store runs measured with plain sysbench 1.0 (its text output) as a campaign")
    s.add_argument("files", nargs="+", metavar="FILE",
                   help="sysbench run output (with --report-interval=1 for the per-second series, --histogram "
                        "for p50/p95/p99); the files of one thread count are its repetitions, in order")
    s.add_argument("--campaign", required=True, type=sbi.CAMPAIGN_FLAG,
                   help="campaign id (and name) to create or add to; run again with another --target to add one")
    s.add_argument("--target", required=True, type=sbi.TARGET_FLAG, help="target name the runs measured, e.g. mysql-5.7")
    s.add_argument("--workload", required=True, help="sysbench test, e.g. oltp_read_only")
    s.add_argument("--threads", type=sbi.THREADS_FLAG, help="thread count (default: the output's 'Number of threads')")
    s.add_argument("--baseline", type=sbi.TARGET_FLAG, help="baseline target (default: the first target imported)")
    s.add_argument("--first-repetition", type=sbi.REPETITION_FLAG, default=1,
                   help="repetition number of the first file of each thread count (default 1)")
    s.add_argument("--force", action="store_true",
                   help="add to a campaign the fleet ran (refused without: its spec would become the import's)")
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_import_sysbench)
    s = command("stats", "compute a campaign's per-cell statistics into the results DB (cell_stats)")
    s.add_argument("campaign", help="campaign id, or a name for its latest campaign")
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_stats)
    s = command("retire-old-exchange", "after upgrading every worker: delete the results exchange of earlier "
                                       "versions (named like the results queue), which the collector keeps bound")
    add_settings_flags(s, AMQP)
    s.set_defaults(fn=cmd_retire_old_exchange)
    s = command("dashboards", "write the Grafana dashboards (JSON) into a directory")
    s.add_argument("--out", default="dashboards", help="directory (default: dashboards)")
    s.set_defaults(fn=cmd_dashboards)
    add_completion(command("completion", "print the shell completion script (bash or zsh)"),
                   lambda: command_of("collector", p))
    return p


def main(argv: list[str] | None = None) -> int:
    return run_main("collector", lambda: _parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
