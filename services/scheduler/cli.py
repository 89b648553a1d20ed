"""`scheduler`: validate and plan specs, submit campaigns to the workers, follow their progress."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from typing import Any

from services.common import logs
from services.common.bus.rabbitmq import RabbitBus, Role, rabbit_factory
from services.common.cli import (
    EXIT_COLLAPSE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Parser,
    error,
    run_main,
    write_output,
)
from services.common.config import AMQP, DB, Settings, add_settings_flags, with_db_password
from services.common.spec.durations import format_duration
from services.common.errors import BusError, ConnectError, SettingsError, StoreError, StoreUnavailable
from services.common.spec.campaign import CampaignSpec
from services.common.spec.loading import load_spec_source
from services.common.store import Store
from services.common.store.campaigns import Duplicate
from services.common.terminal import escape_controls
from services.reporting import load as loading
from services.reporting.options import ReportOptions
from services.reporting.plan_power import PlanPower
from services.reporting.render import registry
from services.scheduler import plan, preflight, windows
from services.scheduler.deferred import deferred_sigint
from services.scheduler.plan_history import power_of
from services.scheduler.progress import ConsumerWatch, Progress, ProgressLine
from services.scheduler.submit import RolledBack, StoreLedger, submit


def _err(msg: str) -> None:
    error(msg)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("duration", "warmup", "repeat", "pool"):
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    if "duration" in out:
        out["duration_by_threads"] = {}  # --duration sets the measured time of every run
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
    power, why = _power(spec, settings, args.detect)
    if args.json:
        print(json.dumps({"runs": len(runs), "estimated_seconds": est, "workers": args.workers,
                          "load_hosts": spec.load_hosts,
                          "duration_by_threads": {str(t): spec.duration_for(t) for t in spec.threads},
                          "window_warnings": _window_warnings(spec, settings),
                          "power": power.as_data() if power else {"message": [why]},
                          "order": [{"seq": r.seq, "run_id": r.run_id, **r.cell.model_dump(), "repetition": r.repetition,
                                     "position": r.position}
                                    for r in runs]}, indent=2))
        return EXIT_OK
    print(f"campaign {spec.name}: {len(spec.targets)} targets x {len(spec.workloads)} workloads x "
          f"{len(spec.threads)} thread counts x {spec.repeat} repetitions = {len(runs)} runs")
    measured = ", ".join(f"{format_duration(spec.duration_for(t))} at {t} threads" for t in spec.threads) \
        if spec.duration_by_threads else format_duration(spec.duration)
    print(f"each run: {format_duration(spec.warmup)} warm-up + {measured} measured; "
          f"estimated wall time with {args.workers} worker(s): {format_duration(round(est))}")
    for warning in _window_warnings(spec, settings):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"baseline: {spec.baseline_name}; pool: {spec.pool}; data: {spec.data.tables} tables x "
          f"{spec.data.table_size} rows, {spec.data.engine}")
    if spec.load_hosts > 1:
        print(f"load_hosts: {spec.load_hosts} (each run's threads split over {spec.load_hosts} workers of pool "
              f"{spec.pool}, started together, merged into one result)")
    for line in power.lines() if power else [why]:
        print(line)
    print("order: each cell's targets run back to back in every repetition (a block), the order rotating "
          "from a seeded start so no target is always first; pos is the place within the block")
    print(f"{'seq':>5}  {'target':<16} {'workload':<24} {'threads':>7}  rep  pos")
    for r in runs:
        print(f"{r.seq:>5}  {r.cell.target:<16} {r.cell.workload:<24} {r.cell.threads:>7}  {r.repetition:>3}  {r.position:>3}")
    return EXIT_OK


def _power(spec: CampaignSpec, settings: Settings, detect: float | None) -> tuple[PlanPower | None, str]:
    """What the spec's repeat can detect, from earlier campaigns of its cells; or why it is not known."""
    try:
        return power_of(spec, settings, detect), ""
    except (StoreError, ConnectError) as e:
        return None, f"power: not estimated: the results DB was not read ({e})"


def _change(text: str) -> float:
    """A change to detect, ``3%`` or ``3``, as a fraction."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 3%)") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"{text!r}: the change must be above 0% and below 100%")
    return value / 100


def _window_warnings(spec: CampaignSpec, settings: Settings) -> list[str]:
    """Warnings for windows shorter than 10 mean response times the results DB last measured on
    the spec's cells; none when the DB cannot be read (a plan needs no DB, and says nothing
    when there is none, as on a fresh host)."""
    try:
        store = Store(with_db_password(settings)).open(migrate=False)
    except (StoreError, SettingsError):
        return []
    try:
        found = [windows.previous_measurement(store.results.history(t.name, w.key, n))
                 for t in spec.targets for w in spec.workloads for n in spec.threads]
    except StoreError:
        return []
    finally:
        store.close()
    return windows.window_warnings(spec, [m for m in found if m is not None])


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    from services.common.store.campaigns import default_key, spec_hash

    if (why := _report_flags_refused(args)) is not None:
        _err(why)
        return EXIT_USAGE
    spec = _load(args, settings)
    campaign_id = plan.new_campaign_id(spec)
    runs = plan.run_specs(spec, campaign_id)
    key = args.idempotency_key or default_key(spec_hash(spec))
    with Store(settings) as store, RabbitBus(settings, name="benchfleet scheduler", role=Role.SCHEDULER) as bus:
        with deferred_sigint("interrupted: undoing the submit once the current step ends") as interrupted:
            outcome = submit(StoreLedger(store, publisher=bus.user), bus, spec, campaign_id, runs, key=key,
                             explicit_key=bool(args.idempotency_key), force=args.force, interrupted=interrupted)
        earlier = store.campaigns.get(outcome.campaign_id) if isinstance(outcome, Duplicate) else None
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
        if args.json and not args.wait:
            print(json.dumps({"campaign_id": outcome.campaign_id, "duplicate": True}))
        if earlier is None or not args.wait:
            return EXIT_OK
        return _wait(settings, earlier.campaign_id, earlier.spec, args)
    logs.get("scheduler").bind(campaign_id=campaign_id).info("campaign_submitted", runs=outcome.runs, pool=outcome.pool)
    _warn_few_workers(settings, spec)
    if args.json and not args.wait:
        print(json.dumps({"campaign_id": campaign_id, "runs": outcome.runs, "pool": outcome.pool}))
    else:
        # With --wait --json or --format, stdout is one document at the end; this line goes to stderr.
        print(f"campaign {campaign_id}: {outcome.runs} runs published to pool {outcome.pool}",
              file=sys.stderr if args.json or args.fmt is not None else sys.stdout)
    if not args.wait:
        return EXIT_OK
    return _wait(settings, campaign_id, spec, args)


def _progress(store: Store, campaign_id: str, total: int, started: float, planned_run_s: float) -> Progress:
    counts = store.runs.counts(campaign_id)
    active = store.runs.active(campaign_id)
    current = None
    if active:
        t, w, th, rep, _, _ = active[0]
        current = f"{t} {w} t={th} r{rep}" + (f" (+{len(active) - 1} more)" if len(active) > 1 else "")
    return Progress(total=total, done=counts["done"], failed=counts["failed"], cancelled=counts["cancelled"],
                    running=counts["running"], current=current, elapsed_s=time.time() - started,
                    planned_run_s=planned_run_s)


class _PoolConsumers:
    """How many workers consume a pool's runs queue (a passive declare), or None while the broker
    cannot say: following a campaign reads the results DB and must outlive a broker restart."""

    def __init__(self, settings: Settings, pool: str):
        self.settings, self.pool = settings, pool
        self.bus: RabbitBus | None = None
        #: What to tell once when the broker went away (None: nothing new to tell).
        self.notice: str | None = None
        self._away = False

    def count(self) -> int | None:
        try:
            if self.bus is None:
                self.bus = RabbitBus(self.settings, name="benchfleet scheduler wait", role=Role.SCHEDULER).connect(attempts=1)
            n = self.bus.consumer_count(self.bus.names.runs_queue(self.pool))
            self._away = False
            return n
        except BusError as e:
            self.close()
            if not self._away:
                self.notice = f"note: broker away ({e}); still waiting"
            self._away = True
            return None

    def close(self) -> None:
        if self.bus is not None:
            self.bus.close()
            self.bus = None


def _warn_few_workers(settings: Settings, spec: CampaignSpec) -> None:
    """A run split over more load hosts than the pool has workers connected cannot start: say so
    (workers may still connect; each part gives up after its join timeout, and the run fails)."""
    if spec.load_hosts <= 1:
        return
    consumers = _PoolConsumers(settings, spec.pool)
    try:
        n = consumers.count()
    finally:
        consumers.close()
    if n is not None and n < spec.load_hosts:
        _err(f"warning: load_hosts: {spec.load_hosts} but only {n} worker(s) of pool {spec.pool} are connected now; "
             f"each run needs {spec.load_hosts} free workers at once")


def _report_flags_refused(args: argparse.Namespace) -> str | None:
    """Why ``--format``/``--out`` cannot be honoured (checked before submitting, not after the wait)."""
    chosen = args.fmt is not None or args.out is not None
    if chosen and not args.wait:
        return "--format and --out choose the report of --wait: add --wait"
    if chosen and args.json:
        return "--json prints the report inside its JSON document: leave out --format and --out"
    r = registry.renderer(args.fmt or registry.DEFAULT_FORMAT, "report")
    if (r.to_file or r.plots) and not args.out:
        return f"--format {r.name} writes a file: give --out FILE"
    return None


def _wait(settings: Settings, campaign_id: str, spec: CampaignSpec, args: argparse.Namespace) -> int:
    started = time.time()
    total = spec.repeat * len(spec.workloads) * len(spec.threads) * len(spec.targets)
    planned = spec.warmup + sum(map(spec.duration_for, spec.threads)) / len(spec.threads) + plan.RUN_OVERHEAD_S
    shown = ProgressLine(sys.stderr, tty=sys.stderr.isatty(), columns=shutil.get_terminal_size().columns)
    watch = ConsumerWatch(spec.pool, needed=spec.load_hosts)
    consumers = _PoolConsumers(settings, spec.pool)
    as_json = getattr(args, "json", False)
    # --json wraps the JSON report in its own document; otherwise the report's --format.
    r = registry.renderer("json" if as_json else getattr(args, "fmt", None) or registry.DEFAULT_FORMAT, "report")
    away = False
    store: Store | None = None
    try:
        while True:
            try:
                if store is None:
                    store = Store(settings).open()
                p = _progress(store, campaign_id, total, started, planned)
            except StoreUnavailable as e:
                # Every run ends in a final state (the collector fails or reaps it), so waiting
                # out a results-DB outage (a restart) ends too; the connection is made anew.
                if store is not None:
                    store.close()
                    store = None
                if not away:
                    shown.note(f"results DB away ({e}); still waiting")
                away = True
                time.sleep(max(args.poll, 1.0))
                continue
            away = False
            shown.show(p)
            if p.finished >= total:
                break
            n = consumers.count() if p.running == 0 else 1
            notice = watch.update(n, time.monotonic()) if n is not None else consumers.notice
            consumers.notice = None
            if notice:
                shown.note(notice)
            time.sleep(args.poll)
        shown.close()
        report = loading.load_report(store, campaign_id, r.options(ReportOptions()), plots=r.plots)
        failures = store.runs.failed(campaign_id)
    except KeyboardInterrupt:
        shown.close()
        print(f"stopped waiting (Ctrl-C); the campaign goes on: scheduler status {campaign_id}, "
              f"scheduler cancel {campaign_id}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        consumers.close()
        if store is not None:
            store.close()
    rendered = r.render_report(report)
    if as_json:
        print(json.dumps({"campaign_id": campaign_id, "runs": total, "pool": spec.pool, "done": p.done,
                          "failed": p.failed, "cancelled": p.cancelled,
                          "failures": [{"run_id": f.run_id, "error": f.error} for f in failures],
                          "report": json.loads(rendered)}, indent=1))
    else:
        out = getattr(args, "out", None)
        write_output(out, rendered)
        if out:
            print(f"wrote {out}", file=sys.stderr)
        for f in failures:
            print(escape_controls(f"failed: {f.run_id}: {f.error}"), file=sys.stderr)
    if p.failed:
        return EXIT_FAILED
    if getattr(args, "fail_on_collapse", False) and report.collapsed:
        _err(f"{len(report.collapsed)} collapsed cell(s) in {campaign_id}")
        return EXIT_COLLAPSE
    return EXIT_OK


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
            rows = store.campaigns.latest(limit=args.limit)
            if args.json:
                print(json.dumps([{"campaign_id": c.campaign_id, "state": c.state, "runs": c.total_runs,
                                   **store.runs.counts(c.campaign_id)} for c in rows], indent=2))
                return EXIT_OK
            print(f"{'campaign':<48} {'state':<24} {'done':>5} {'failed':>6} {'total':>6}")
            for c in rows:
                n = store.runs.counts(c.campaign_id)
                print(escape_controls(f"{c.campaign_id:<48} {c.state:<24} {n['done']:>5} {n['failed']:>6} {c.total_runs:>6}"))
            return EXIT_OK
        c = store.campaigns.get(args.campaign)
        if c is None:
            _err(f"no campaign {args.campaign!r} in the results DB")
            return EXIT_USAGE
        counts = store.runs.counts(c.campaign_id)
        active = store.runs.active(c.campaign_id)
        failures = store.runs.failed(c.campaign_id)
        if args.json:
            print(json.dumps({"campaign_id": c.campaign_id, "state": c.state, "total_runs": c.total_runs,
                              "counts": counts, "active": [list(a) for a in active],
                              "failures": [{"run_id": f.run_id, "error": f.error} for f in failures]}, indent=2))
            return EXIT_OK
        print(escape_controls(f"campaign {c.campaign_id} ({c.state}): " +
                              ", ".join(f"{k} {v}" for k, v in counts.items()) + f" of {c.total_runs}"))
        for t, w, th, rep, worker, _ in active:
            print(escape_controls(f"  running: {t} {w} t={th} r{rep} on {worker}"))
        for f in failures:
            print(escape_controls(f"  failed: {f.run_id}: {f.error}"))
    return EXIT_OK


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="scheduler", description=__doc__)
    p.add_version()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # Each command shows the settings it reads: validate and plan only the ones their checks use.
    spec_settings = {"validate": [("db_name", "max_run_s", "announce_ttl_s")],
                     "plan": [("db_name", "max_run_s", "announce_ttl_s")],
                     "submit": [AMQP, DB, ("max_run_s", "announce_ttl_s")]}

    def spec_cmd(name: str, help: str) -> argparse.ArgumentParser:
        s = sub.add_parser(name, help=help, description=help)
        s.add_argument("spec", help="campaign spec (YAML)")
        s.add_argument("--duration", help="override the measured time of every run, e.g. 5s")
        s.add_argument("--warmup", help="override the warm-up of every run")
        s.add_argument("--repeat", type=_positive, help="override the number of repetitions")
        s.add_argument("--threads", help="override the thread counts, e.g. 1,4,16")
        s.add_argument("--pool", help="override the worker pool")
        add_settings_flags(s, *spec_settings[name])
        return s

    # validate and plan connect nowhere: they need the settings (results DB name, run length
    # limit) but none of the fleet's secrets.
    spec_cmd("validate", "check a spec; exit 2 naming each wrong field").set_defaults(fn=cmd_validate, secrets=False)
    s = spec_cmd("plan", "print the expanded run matrix and estimated wall time")
    s.add_argument("--workers", type=_positive, default=1,
                   help="workers sharing the campaign, for the estimate (default 1)")
    s.add_argument("--json", action="store_true", help="print the plan as JSON")
    s.add_argument("--detect", metavar="PCT", type=_change, default=None,
                   help="also print the repetitions needed to detect a change of PCT (e.g. 3%%) at 80%% power, "
                        "from the noise of earlier campaigns of the same cells (capped at 20)")
    s.set_defaults(fn=cmd_plan, secrets=False)
    s = spec_cmd("submit", "record the campaign and publish its runs")
    s.add_argument("--wait", action="store_true",
                   help="follow progress and print the report at the end; Ctrl-C stops waiting (exit 130), "
                        "not the campaign")
    s.add_argument("--fail-on-collapse", action="store_true",
                   help=f"with --wait: exit {EXIT_COLLAPSE} (EXIT_COLLAPSE) when any cell collapsed (runs failing "
                        "exit 1 first)")
    s.add_argument("--poll", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    s.add_argument("--json", action="store_true",
                   help="print JSON: the campaign id and runs, or with --wait the final report")
    s.add_argument("--format", dest="fmt", choices=registry.names("report"),
                   help=f"with --wait: the final report's format (default {registry.DEFAULT_FORMAT}, as "
                        "`collector report` takes)")
    s.add_argument("--out", help="with --wait: write the final report to this file instead of stdout (needed "
                                 "for the formats that write a file)")
    s.add_argument("--idempotency-key", help="refuse a second submit with this key (default: the spec's hash, "
                                             "while its campaign is still running)")
    s.add_argument("--force", action="store_true", help="submit even if the same spec or key was submitted")
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("cancel", help="drop a campaign's pending runs and stop its active ones",
                       description="drop a campaign's pending runs and stop its active ones")
    s.add_argument("campaign", help="campaign id or name (latest of that name)")
    add_settings_flags(s, AMQP, DB)
    s.set_defaults(fn=cmd_cancel)
    s = sub.add_parser("status", help="runs by state for a campaign, or the latest campaigns",
                       description="runs by state for a campaign, or the latest campaigns")
    s.add_argument("campaign", nargs="?", help="campaign id or name (latest of that name)")
    s.add_argument("--limit", type=_positive, default=20, help="without CAMPAIGN: how many campaigns (default 20)")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_settings_flags(s, DB)
    s.set_defaults(fn=cmd_status)
    s = sub.add_parser("schema", help="print the spec's JSON Schema", description="print the spec's JSON Schema")
    s.set_defaults(fn=cmd_schema, secrets=False)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_main("scheduler", lambda: _parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
