"""`collector history --target X --workload Y --threads N`: one cell across every campaign, in any
registered format that renders a history."""

from __future__ import annotations

import argparse

from services.collector.commands.output import options
from services.common.cli import EXIT_OK, write_output
from services.common.config import Settings
from services.common.store import Store
from services.reporting.history import History, history_points
from services.reporting.render import registry


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    r = registry.renderer(args.fmt, "history")
    opts = options(args)
    with Store(settings) as store:
        # Metrics beyond the result columns (p50, CPU, status deltas) need the whole results.
        entries = store.results.history(args.target, args.workload, args.threads,
                                        with_results=not opts.table_metric.column)
    cell = f"{args.target} / {args.workload} / {args.threads} threads"
    write_output(None, r.render_history(History(cell, tuple(history_points(entries, opts)), opts)))
    return EXIT_OK
