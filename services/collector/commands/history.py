"""`collector history --target X --workload Y --threads N`: one cell across every campaign, and
`collector history SPEC --changes [--fail-on-slower PCT]`: a spec's change points and the gate of its
newest campaign; in any registered format that renders them."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Sequence

from services.collector.commands.output import options
from services.common.cli import EXIT_OK, error, write_output
from services.common.config import Settings
from services.common.errors import BenchfleetRegression, UsageError
from services.common.results.cut_windows import rejudge_entries
from services.common.results.rows import CampaignNight, HistoryEntry
from services.common.store import Store
from services.common.store.judgements import GateRecord, outcome
from services.reporting import load as loading
from services.reporting.analysis import CampaignData
from services.reporting.compare import compare_campaigns, regressions
from services.reporting.gate import Regression
from services.reporting.history import History, history_points
from services.reporting.options import ReportOptions
from services.reporting.render import registry
from services.reporting.spec_history import DEFAULT_METRICS, GateVerdict, last_good, spec_changes, worse_since


def _usage(args: argparse.Namespace) -> None:
    """Refuse flags that belong to the other form of the command, naming them."""
    cell = {"--target": args.target, "--workload": args.workload, "--threads": args.threads}
    if args.changes:
        if not args.spec:
            raise UsageError("--changes: give the spec's name (collector history SPEC --changes)")
        given = [f for f, v in cell.items() if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: --changes searches every cell of the spec; leave them out")
        return
    if args.spec:
        raise UsageError(f"{args.spec}: a spec's name is read with --changes only")
    if args.fail_on_slower is not None:
        raise UsageError("--fail-on-slower: gates a spec's newest campaign, with --changes only")
    missing = [f for f, v in cell.items() if v is None]
    if missing:
        raise UsageError(f"{', '.join(missing)}: required for one cell's history (or SPEC --changes)")


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    _usage(args)
    try:
        r = registry.renderer(args.fmt, "changes" if args.changes else "history")
    except ValueError as e:
        raise UsageError(f"--format: {e}") from None
    if args.changes:
        return _changes(args, settings, r)
    if args.metric and "," in args.metric:
        raise UsageError(f"--metric: one metric for one cell's history, got {args.metric}")
    opts = options(argparse.Namespace(**{**vars(args), "metric": args.metric or ReportOptions().metric}))
    with Store(settings) as store:
        # Metrics beyond the result columns (p50, CPU, status deltas) need the whole results.
        entries = store.results.history(args.target, args.workload, args.threads,
                                        with_results=not opts.table_metric.column)
        entries = _as_reported(store, entries)
    entries = _one_pool(entries, "history")
    cell = f"{args.target} / {args.workload} / {args.threads} threads"
    write_output(None, r.render_history(History(cell, tuple(history_points(entries, opts)), opts)))
    return EXIT_OK


def _as_reported(store: Store, entries: list[HistoryEntry]) -> list[HistoryEntry]:
    """The entries as their campaigns' reports read them: a window a hung server cut short, stored
    before the worker measured it to its end, over its planned length (cut_windows)."""
    return rejudge_entries(entries, store.campaigns.specs([e.row.campaign_id for e in entries]))


def _one_pool(entries: list[HistoryEntry], what: str) -> list[HistoryEntry]:
    """The entries of campaigns on one pool; a note on stderr names the campaigns left out."""
    kept, note = loading.without_pools([e.row for e in entries], what)
    if note is None:
        return entries
    print(note, file=sys.stderr)
    ids = {r.run_id for r in kept}
    return [e for e in entries if e.row.run_id in ids]


def _changes(args: argparse.Namespace, settings: Settings, r: registry.Renderer) -> int:
    metrics = tuple(dict.fromkeys(args.metric.split(","))) if args.metric else DEFAULT_METRICS
    opts = ReportOptions(alpha=args.alpha, min_effect=args.min_effect)
    with Store(settings) as store:
        nights = store.campaigns.named(args.spec)
        if not nights:
            raise UsageError(f"{args.spec}: no campaign of that name in the results DB")
        entries = _as_reported(store, store.results.of_spec(args.spec))
        entries = _one_pool(entries, f"history {args.spec} --changes")
        changes = spec_changes(args.spec, nights, entries, metrics=metrics, alpha=args.alpha)
        if args.fail_on_slower is not None:
            gate = _gate(store, args, nights, opts, worse_since(changes.search, nights))
            changes = replace(changes, gate=gate)
            slower = len(gate.regressions)
            verdict = outcome(gate.reference is not None, slower)
            store.judgements.keep_gate(GateRecord(gate.newest, gate.reference, verdict, gate.beyond, slower, time.time()),
                                       error)
    write_output(None, r.render_changes(changes))
    gate = changes.gate
    if gate is not None and gate.failed:
        assert gate.reference is not None
        raise BenchfleetRegression(args.spec, gate.newest, gate.reference, len(gate.regressions))
    return EXIT_OK


def _gate(store: Store, args: argparse.Namespace, nights: Sequence[CampaignNight], opts: ReportOptions,
          worse_from: str | None) -> GateVerdict:
    """The newest night against the last good one (none at or after ``worse_from``, a worse change point
    that still stands), judged as `compare --fail-on-slower` judges B against A (q/s, unpaired)."""
    loaded: dict[str, CampaignData] = {}

    def data(cid: str) -> CampaignData:
        if cid not in loaded:
            loaded[cid] = loading.load(store, cid, with_results=False)
        return loaded[cid]

    def slower(a: str, b: str) -> list[Regression]:
        try:
            return regressions(compare_campaigns(data(a), data(b), replace(opts, metric="qps")), args.fail_on_slower)
        except ValueError:
            return []  # no shared cell: nothing to judge

    newest = nights[-1].campaign_id
    reference = last_good(nights, lambda a, b: bool(slower(a, b)), worse_from=worse_from)
    found = tuple(slower(reference, newest)) if reference is not None else ()
    return GateVerdict(newest, reference, args.fail_on_slower, found, "q/s")
