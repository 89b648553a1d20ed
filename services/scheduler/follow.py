"""Following a submitted campaign to its end (`scheduler submit --wait`, and the confirming
campaign of a gate): the progress line, notices when no worker takes the runs or the broker or
results DB is away, and the report at the end."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time

from services.common.bus.rabbitmq import RabbitBus, Role
from services.common.cli import EXIT_COLLAPSE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, error, write_output
from services.common.config import Settings
from services.common.errors import BusError, StoreUnavailable
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.common.terminal import escape_controls
from services.reporting import load as loading
from services.reporting.options import ReportOptions
from services.reporting.pools_compared import PoolsReport
from services.reporting.render import registry
from services.reporting.report import Report
from services.scheduler import plan
from services.scheduler.progress import ConsumerWatch, Progress, ProgressLine


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


class PoolConsumers:
    """How many workers consume a pool's runs queue (a passive declare), or None while the broker
    cannot say: following a campaign reads the results DB and must outlive a broker restart."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.bus: RabbitBus | None = None
        #: What to tell once when the broker went away (None: nothing new to tell).
        self.notice: str | None = None
        self._away = False

    def count(self, pool: str) -> int | None:
        try:
            if self.bus is None:
                self.bus = RabbitBus(self.settings, name="benchfleet scheduler wait", role=Role.SCHEDULER).connect(attempts=1)
            n = self.bus.consumer_count(self.bus.names.runs_queue(pool))
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

    def abandon(self) -> None:
        """Let go of the connection without closing it: Ctrl-C may have landed inside a broker call,
        leaving the connection mid-frame, where a polite close waits for an answer that may never
        come. The process is ending, and its end closes the socket."""
        self.bus = None


def follow(settings: Settings, campaign_id: str, spec: CampaignSpec, total: int, poll: float) -> Progress:
    """Show the campaign's progress on stderr until every one of its ``total`` runs is in a final
    state; its last progress. KeyboardInterrupt (Ctrl-C) propagates with the line closed."""
    started = time.time()
    planned = plan.mean_run_seconds(spec)
    shown = ProgressLine(sys.stderr, tty=sys.stderr.isatty(), columns=shutil.get_terminal_size().columns)
    watches = [ConsumerWatch(pool, needed=spec.load_hosts) for pool in spec.pool_names]
    consumers = PoolConsumers(settings)
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
                time.sleep(max(poll, 1.0))
                continue
            away = False
            shown.show(p)
            if p.finished >= total:
                return p
            for watch in watches:
                # One pool with a run running has a worker; of several, each pool is asked.
                n = 1 if len(watches) == 1 and p.running else consumers.count(watch.pool)
                notice = watch.update(n, time.monotonic()) if n is not None else consumers.notice
                consumers.notice = None
                if notice:
                    shown.note(notice)
            time.sleep(poll)
    except KeyboardInterrupt:
        consumers.abandon()
        raise
    finally:
        shown.close()
        consumers.close()
        if store is not None:
            store.close()


def stopped_waiting(campaign_id: str) -> int:
    """What Ctrl-C while following prints; the exit code it gives."""
    print(f"stopped waiting (Ctrl-C); the campaign goes on: scheduler status {campaign_id}, "
          f"scheduler cancel {campaign_id}", file=sys.stderr)
    return EXIT_INTERRUPTED


def wait(settings: Settings, campaign_id: str, spec: CampaignSpec, args: argparse.Namespace) -> int:
    """`submit --wait`: follow the campaign, then print its report in the chosen format (a campaign on
    several pools: each pool's and the pools compared, as `collector report` prints it)."""
    total = spec.run_count
    as_json = getattr(args, "json", False)
    # --json wraps the JSON report in its own document; otherwise the report's --format.
    r = registry.renderer("json" if as_json else getattr(args, "fmt", None) or registry.DEFAULT_FORMAT, "report")
    opts = r.options(ReportOptions())
    if spec.pools and not r.renders("pools"):
        error(f"--format {r.name} has no page for a campaign on several pools; the campaign goes on: "
              f"collector report {campaign_id} --pool POOL")
        return EXIT_USAGE
    try:
        p = follow(settings, campaign_id, spec, total, args.poll)
        store = Store(settings).open()
        try:
            report: Report | PoolsReport = (loading.load_pools(store, campaign_id, opts, plots=r.plots) if spec.pools
                                            else loading.load_report(store, campaign_id, opts, plots=r.plots))
            failures = store.runs.failed(campaign_id)
        finally:
            store.close()
    except KeyboardInterrupt:
        return stopped_waiting(campaign_id)
    if isinstance(report, PoolsReport):
        rendered, collapsed = r.render_pools(report), report.collapsed
    else:
        rendered, collapsed = r.render_report(report), len(report.collapsed)
    if as_json:
        print(json.dumps({"campaign_id": campaign_id, "runs": total, "pool": ",".join(spec.pool_names), "done": p.done,
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
    if getattr(args, "fail_on_collapse", False) and collapsed:
        error(f"{collapsed} collapsed cell(s) in {campaign_id}")
        return EXIT_COLLAPSE
    return EXIT_OK
