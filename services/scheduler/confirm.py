"""The gate of a finished campaign (`scheduler submit --wait --fail-on-slower PCT`, `scheduler gate`),
and with `--confirm` its confirmation: the failing cells re-run as a campaign of their own, judged
again on those runs alone, the gate failing only when they fail again."""

from __future__ import annotations

import time
from dataclasses import dataclass

from services.common.cli import EXIT_OK, EXIT_SLOWER, EXIT_USAGE, error
from services.common.config import Settings
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.common.store.judgements import GateRecord, outcome
from services.reporting import load as loading
from services.reporting.gate import Regression, confirm, regressions
from services.reporting.options import ReportOptions
from services.reporting.report import analyse
from services.scheduler import plan
from services.scheduler.confirm_plan import confirming_runs, confirming_spec
from services.scheduler.follow_up import FollowUp, say, submit_and_follow


@dataclass(frozen=True)
class GateRequest:
    """What a gate was asked: the campaign, the threshold (a fraction), whether to confirm, the options."""

    campaign: str
    beyond: float
    confirm: bool = False
    poll: float = 1.0
    opts: ReportOptions = ReportOptions()


def gate_campaign(settings: Settings, req: GateRequest) -> int:
    """Gate a finished campaign's targets against its baseline; with ``req.confirm``, re-run the
    failing cells and fail only on the cells that fail again. The exit code."""
    m = req.opts.table_metric
    pct = f"{req.beyond * 100:g}%"
    with Store(settings) as store:
        c = store.campaigns.get(req.campaign)
        if c is None:
            error(f"no campaign {req.campaign!r} in the results DB")
            return EXIT_USAGE
        counts = store.runs.counts(c.campaign_id)
        if counts["pending"] or counts["running"]:
            error(f"campaign {c.campaign_id} is not finished ({counts['pending']} runs pending, {counts['running']} "
                  "running): gate it once every run ended (scheduler submit --wait does)")
            return EXIT_USAGE
        data = loading.load(store, c.campaign_id, with_results=not m.column)
    first = regressions(analyse(data, req.opts).tables, req.beyond)
    label = f"vs {data.baseline}"
    if not first or not req.confirm:  # a confirmed gate is recorded once its confirming campaign judged it
        _keep(settings, GateRecord(c.campaign_id, None, outcome(True, len(first)), req.beyond, len(first), time.time()))
    if not first:
        say(f"gate: no cell of {c.campaign_id} slower than baseline {data.baseline} by more than {pct} ({m.unit}, "
             "adjusted interval)")
        return EXIT_OK
    error(f"{len(first)} cell(s) of {c.campaign_id} significantly slower than baseline {data.baseline} by more "
          f"than {pct}: over their whole adjusted interval, and by at least --min-effect "
          f"{req.opts.min_effect * 100:g}%:")
    for r in first:
        error(f"  {r.describe(m.unit, label)}")
    if not req.confirm:
        return EXIT_SLOWER
    return _confirm(settings, c.spec, c.campaign_id, first, req, label)


def _keep(settings: Settings, verdict: GateRecord) -> None:
    """The gate's verdict in the results DB, against the campaign that decided it (None: its own baseline)."""
    with Store(settings) as store:
        store.judgements.keep_gate(verdict, error)


def _confirm(settings: Settings, spec: CampaignSpec, campaign_id: str, first: list[Regression], req: GateRequest, label: str) -> int:
    """Submit the failing cells again, follow them, and judge them on those runs alone."""
    cells = [r.key for r in first]
    again = confirming_spec(spec, cells)
    cid = plan.new_campaign_id(again)
    runs = confirming_runs(again, cells, cid)
    code = submit_and_follow(settings, FollowUp(
        again, cid, runs, key=f"confirm/{cid}", connection="benchfleet scheduler gate",
        undoing="interrupted: undoing the confirming submit once the current step ends",
        not_run=f"interrupted: the confirming campaign {cid} was not run; the gate stands unconfirmed",
        started=f"confirming: campaign {cid} re-runs the {len(cells)} failing cell(s) of {campaign_id} with their "
                f"baseline ({len(runs)} runs, repeat {again.repeat}, pool {again.pool})"), req.poll)
    if code is not None:
        return code
    with Store(settings) as store:
        data = loading.load(store, cid, with_results=not req.opts.table_metric.column)
        failures = store.runs.failed(cid)
    for f in failures:
        say(f"failed: {f.run_id}: {f.error}")
    result = confirm(first, analyse(data, req.opts).tables, req.beyond, cid)
    unit = req.opts.table_metric.unit
    for line in result.lines(unit, label):
        say(line)
    slower = sum(c.state != "cleared" for c in result.cells)
    _keep(settings, GateRecord(campaign_id, cid, outcome(True, slower), req.beyond, slower, time.time()))
    if result.failed:
        n, confirmed, unmeasured = len(result.cells), len(result.of("confirmed")), len(result.of("unmeasured"))
        error(f"{confirmed} of {n} failing cell(s) of {campaign_id} slower again in confirming campaign {cid}"
              + (f", {unmeasured} not measured again (not cleared)" if unmeasured else ""))
        return EXIT_SLOWER
    say(f"gate passed: none of the {len(result.cells)} failing cell(s) of {campaign_id} was confirmed by "
         f"campaign {cid}")
    return EXIT_OK
