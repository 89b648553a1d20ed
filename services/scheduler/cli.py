"""`scheduler`: validate and plan specs, submit campaigns to the workers, follow their progress."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from services.common import logs
from services.common.bus import RabbitBus, Role, rabbit_factory
from services.common.campaigns import Duplicate
from services.common.cli import EXIT_CODES_HELP, EXIT_COLLAPSE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, run_main
from services.common.config import (
    Settings,
    add_settings_flags,
)
from services.common.durations import format_duration
from services.common.errors import StoreUnavailable
from services.common.run_finality import failed_runs
from services.common.spec import CampaignSpec
from services.common.specfile import load_spec_source
from services.common.store import Store
from services.scheduler import plan, preflight
from services.scheduler.deferred import deferred_sigint
from services.scheduler.progress import Progress, render
from services.scheduler.submit import RolledBack, StoreLedger, submit


def _err(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("duration", "warmup", "repeat", "pool"):
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    if getattr(args, "threads", None):
        out["threads"] = [int(t) if t.strip().isdigit() else t for t in args.threads.split(",")]
    return out


def _load(args: argparse.Namespace, settings: Settings) -> CampaignSpec:
    """The spec, checked as submit checks it (validate, plan and submit accept the same specs)."""
    spec, source = load_spec_source(args.spec, _overrides(args) or None)
    for note in preflight.check(spec, settings, source):
        print(f"note: {note}", file=sys.stderr)
    return spec


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    spec = _load(args, settings)
    print(f"{args.spec}: ok ({spec.total_runs} runs)")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    print(json.dumps(CampaignSpec.model_json_schema(), indent=2))
    return EXIT_OK


def cmd_plan(args: argparse.Namespace, settings: Settings) -> int:
    spec = _load(args, settings)
    runs = plan.expand(spec, f"{spec.name}-<id>")
    est = plan.estimated_seconds(spec, args.workers)
    if args.json:
        print(json.dumps({"runs": len(runs), "estimated_seconds": est, "workers": args.workers,
                          "order": [{"seq": r.seq, "run_id": r.run_id, **r.cell.model_dump(), "repetition": r.repetition}
                                    for r in runs]}, indent=2))
        return EXIT_OK
    print(f"campaign {spec.name}: {len(spec.targets)} targets x {len(spec.workloads)} workloads x "
          f"{len(spec.threads)} thread counts x {spec.repeat} repetitions = {len(runs)} runs")
    print(f"each run: {format_duration(spec.warmup)} warm-up + {format_duration(spec.duration)} measured; "
          f"estimated wall time with {args.workers} worker(s): {format_duration(round(est))}")
    print(f"baseline: {spec.baseline_name}; pool: {spec.pool}; data: {spec.data.tables} tables x "
          f"{spec.data.table_size} rows, {spec.data.engine}")
    print(f"{'seq':>5}  {'target':<16} {'workload':<24} {'threads':>7}  rep")
    for r in runs:
        print(f"{r.seq:>5}  {r.cell.target:<16} {r.cell.workload:<24} {r.cell.threads:>7}  {r.repetition}")
    return EXIT_OK


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    from services.common import campaigns
    from services.common.store import spec_hash

    spec = _load(args, settings)
    campaign_id = plan.new_campaign_id(spec)
    runs = plan.run_specs(spec, campaign_id)
    key = args.idempotency_key or campaigns.default_key(spec_hash(spec))
    with Store(settings) as store, RabbitBus(settings, name="benchfleet scheduler", role=Role.SCHEDULER) as bus:
        with deferred_sigint("interrupted: undoing the submit once the current step ends") as interrupted:
            outcome = submit(StoreLedger(store), bus, spec, campaign_id, runs, key=key,
                             explicit_key=bool(args.idempotency_key), force=args.force, interrupted=interrupted)
        earlier = store.campaign(outcome.campaign_id) if isinstance(outcome, Duplicate) else None
    if isinstance(outcome, RolledBack):
        if outcome.published:
            _err(f"interrupted: campaign {campaign_id} was cancelled (its runs had been published; workers drop them)")
        else:
            _err("interrupted: nothing was recorded or published")
        return EXIT_INTERRUPTED
    if isinstance(outcome, Duplicate):
        _err(f"campaign {outcome.campaign_id} ({outcome.state}) was already submitted with this "
             f"{'idempotency key' if args.idempotency_key else 'spec'}; nothing published "
             "(--force submits it again)")
        if args.json:
            print(json.dumps({"campaign_id": outcome.campaign_id, "duplicate": True}))
        if earlier is None or not args.wait:
            return EXIT_OK
        return _wait(settings, earlier.campaign_id, earlier.spec, args)
    logs.get("scheduler").bind(campaign_id=campaign_id).info("campaign_submitted", runs=outcome.runs, pool=outcome.pool)
    if args.json and not args.wait:
        print(json.dumps({"campaign_id": campaign_id, "runs": outcome.runs, "pool": outcome.pool}))
    else:
        print(f"campaign {campaign_id}: {outcome.runs} runs published to pool {outcome.pool}")
    if not args.wait:
        return EXIT_OK
    return _wait(settings, campaign_id, spec, args)


def _progress(store: Store, campaign_id: str, total: int, started: float, planned_run_s: float) -> Progress:
    counts = store.run_counts(campaign_id)
    active = store.active_runs(campaign_id)
    current = None
    if active:
        t, w, th, rep, _, _ = active[0]
        current = f"{t} {w} t={th} r{rep}" + (f" (+{len(active) - 1} more)" if len(active) > 1 else "")
    return Progress(total=total, done=counts["done"], failed=counts["failed"], cancelled=counts["cancelled"],
                    running=counts["running"], current=current, elapsed_s=time.time() - started,
                    planned_run_s=planned_run_s)


def _wait(settings: Settings, campaign_id: str, spec: CampaignSpec, args: argparse.Namespace) -> int:
    from services.reporting.load import load_report
    from services.reporting.options import ReportOptions
    from services.reporting.report import render_lines

    started = time.time()
    total = spec.repeat * len(spec.workloads) * len(spec.threads) * len(spec.targets)
    planned = spec.warmup + spec.duration + plan.RUN_OVERHEAD_S
    tty = sys.stderr.isatty()
    last_line = ""
    last_print = 0.0
    store: Store | None = None
    away = False
    try:
        while True:
            try:
                if store is None:
                    store = Store(settings).open()
                p = _progress(store, campaign_id, total, started, planned)
            except StoreUnavailable as e:
                # Every run ends in a final state (the collector fails or reaps it), so waiting
                # out a results-DB outage (a restart) ends too.
                if store is not None:
                    store.close()
                    store = None
                if not away:
                    print(f"\nresults DB away ({e}); still waiting", file=sys.stderr, flush=True)
                    away = True
                time.sleep(max(args.poll, 1.0))
                continue
            away = False
            line = render(p)
            if tty:
                print("\r" + line.ljust(len(last_line)), end="", file=sys.stderr, flush=True)
            elif line != last_line and (time.time() - last_print > 10 or p.finished == total):
                print(line, file=sys.stderr, flush=True)
                last_print = time.time()
            last_line = line
            if p.finished >= total:
                break
            time.sleep(args.poll)
        if tty:
            print(file=sys.stderr)
        report = load_report(store, campaign_id, ReportOptions())
        for line in render_lines(report):
            print(line)
        for f in failed_runs(store, campaign_id):
            print(f"failed: {f.run_id}: {f.error}", file=sys.stderr)
        if p.failed:
            return EXIT_FAILED
        if getattr(args, "fail_on_collapse", False) and report.collapsed:
            _err(f"{len(report.collapsed)} collapsed cell(s) in {campaign_id}")
            return EXIT_COLLAPSE
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"\nstopped waiting; the campaign goes on: scheduler status {campaign_id}", file=sys.stderr)
        return EXIT_OK
    finally:
        if store is not None:
            store.close()


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    from services.scheduler.guards import cancel_campaign

    done = cancel_campaign(settings, args.campaign, rabbit_factory(settings, Role.SCHEDULER))
    if done is None:
        _err(f"no campaign {args.campaign!r} in the results DB")
        return EXIT_USAGE
    campaign_id, dropped = done
    print(f"campaign {campaign_id} cancelled: {dropped} pending runs dropped; active runs stop within seconds")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    with Store(settings) as store:
        if not args.campaign:
            rows = store.campaigns(limit=args.limit)
            if args.json:
                print(json.dumps([{"campaign_id": c.campaign_id, "state": c.state, "runs": c.total_runs,
                                   **store.run_counts(c.campaign_id)} for c in rows], indent=2))
                return EXIT_OK
            print(f"{'campaign':<48} {'state':<24} {'done':>5} {'failed':>6} {'total':>6}")
            for c in rows:
                n = store.run_counts(c.campaign_id)
                print(f"{c.campaign_id:<48} {c.state:<24} {n['done']:>5} {n['failed']:>6} {c.total_runs:>6}")
            return EXIT_OK
        c = store.campaign(args.campaign)
        if c is None:
            _err(f"no campaign {args.campaign!r} in the results DB")
            return EXIT_USAGE
        counts = store.run_counts(c.campaign_id)
        active = store.active_runs(c.campaign_id)
        failures = failed_runs(store, c.campaign_id)
        if args.json:
            print(json.dumps({"campaign_id": c.campaign_id, "state": c.state, "total_runs": c.total_runs,
                              "counts": counts, "active": [list(a) for a in active],
                              "failures": [{"run_id": f.run_id, "error": f.error} for f in failures]}, indent=2))
            return EXIT_OK
        print(f"campaign {c.campaign_id} ({c.state}): " + ", ".join(f"{k} {v}" for k, v in counts.items()) +
              f" of {c.total_runs}")
        for t, w, th, rep, worker, _ in active:
            print(f"  running: {t} {w} t={th} r{rep} on {worker}")
        for f in failures:
            print(f"  failed: {f.run_id}: {f.error}")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scheduler", description=__doc__, epilog=EXIT_CODES_HELP)
    sub = p.add_subparsers(dest="command", required=True)

    def spec_cmd(name: str, help: str) -> argparse.ArgumentParser:
        s = sub.add_parser(name, help=help)
        s.add_argument("spec", help="campaign spec (YAML)")
        s.add_argument("--duration", help="override the measured time of every run, e.g. 5s")
        s.add_argument("--warmup", help="override the warm-up of every run")
        s.add_argument("--repeat", type=int, help="override the number of repetitions")
        s.add_argument("--threads", help="override the thread counts, e.g. 1,4,16")
        s.add_argument("--pool", help="override the worker pool")
        add_settings_flags(s)
        return s

    spec_cmd("validate", "check a spec; exit 2 naming each wrong field").set_defaults(fn=cmd_validate)
    s = spec_cmd("plan", "print the expanded run matrix and estimated wall time")
    s.add_argument("--workers", type=int, default=1, help="workers sharing the campaign (for the estimate)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_plan)
    s = spec_cmd("submit", "record the campaign and publish its runs")
    s.add_argument("--wait", action="store_true", help="follow progress and print the report at the end")
    s.add_argument("--fail-on-collapse", action="store_true",
                   help=f"with --wait: exit {EXIT_COLLAPSE} (EXIT_COLLAPSE) when any cell collapsed (runs failing "
                        "exit 1 first)")
    s.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
    s.add_argument("--json", action="store_true")
    s.add_argument("--idempotency-key", help="refuse a second submit with this key (default: the spec's hash, "
                                             "while its campaign is still running)")
    s.add_argument("--force", action="store_true", help="submit even if the same spec or key was submitted")
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("cancel", help="drop a campaign's pending runs and stop its active ones")
    s.add_argument("campaign", help="campaign id or name (latest of that name)")
    add_settings_flags(s)
    s.set_defaults(fn=cmd_cancel)
    s = sub.add_parser("status", help="runs by state for a campaign, or the latest campaigns")
    s.add_argument("campaign", nargs="?", help="campaign id or name (latest of that name)")
    s.add_argument("--limit", type=int, default=20)
    s.add_argument("--json", action="store_true")
    add_settings_flags(s)
    s.set_defaults(fn=cmd_status)
    sub.add_parser("schema", help="print the spec's JSON Schema").set_defaults(fn=cmd_schema)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_main("scheduler", lambda: _parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
