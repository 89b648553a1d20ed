"""`scheduler bisect`: find the first build of an ordered series slower than the good one by at least
a stated effect, one campaign per step (the midpoint build beside the good one), followed to its
end and judged on its own runs; the walk itself is bisect_steps.py's, each step's spec bisect_plan.py's."""

from __future__ import annotations

import argparse
import json
import secrets
import time
from dataclasses import dataclass

from services.common.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, error
from services.common.config import Settings
from services.common.errors import StoreError
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.common.terminal import escape_controls
from services.reporting import load as loading
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.report import analyse
from services.scheduler import bisect_plan, build_check, plan, preflight
from services.scheduler.bisect_plan import Cell
from services.scheduler.bisect_steps import Bisect, CellInterval, Probe
from services.scheduler.plan_history import power_of
from services.scheduler.spec_commands import load_checked
from services.scheduler.follow_up import FollowUp, say, submit_and_follow


@dataclass(frozen=True)
class BisectRequest:
    """What was asked: the user's spec, the ordered builds, the cells, the effect and the repetitions."""

    spec: CampaignSpec
    builds: tuple[str, ...]
    cells: tuple[Cell, ...]
    effect: float
    #: The first step's repetitions (None: from the power estimate), and the cap an undecided step reaches.
    repeat: int | None
    max_repeat: int
    poll: float


def _announced(settings: Settings, pool: str) -> list[tuple[str, str]]:
    """(name, version) of every build the pool's workers announced lately."""
    found, _ = build_check.fresh(preflight.stored_announcements(settings, pool), time.time(), settings.announce_ttl_s)
    return list({b.name: (b.name, b.version) for a in found for b in a.builds}.values())


def _builds(args: argparse.Namespace, settings: Settings, pool: str) -> tuple[str, ...]:
    """The ordered series: ``--builds`` as given, or with ``--range`` the pool's announced builds from
    ``--good`` to ``--bad`` in version order; each one announced by the pool (ValueError naming the flag)."""
    announced = _announced(settings, pool)
    names = {n for n, _ in announced}
    if args.range:
        return tuple(bisect_plan.range_between(bisect_plan.version_order(announced), args.good, args.bad))
    builds = [b.strip() for b in args.builds.split(",") if b.strip()]
    if not builds or builds[0] != args.good or builds[-1] != args.bad:
        raise ValueError(f"--builds: must start with --good {args.good} and end with --bad {args.bad}, got {args.builds}")
    for i, b in enumerate(builds):
        if b not in names:
            raise ValueError(f"--builds[{i}]: build {b!r} is not announced by any worker of pool {pool!r} "
                             f"(announced: {', '.join(sorted(names)) or 'none'}); register it: worker builds add {b} ...")
    return tuple(builds)


def _first_repeat(req: BisectRequest, settings: Settings, probe_spec: CampaignSpec) -> int:
    """``--repeat``, else what the power estimate asks for the effect (from earlier campaigns of these
    builds and cells), else the spec's repeat; within 2 and the cap."""
    if req.repeat is not None:
        return max(2, min(req.repeat, req.max_repeat))
    try:
        power = power_of(probe_spec, settings, req.effect)
    except StoreError as e:
        say(f"power: not estimated ({e}); starting at the spec's repeat {req.spec.repeat}")
        return max(2, min(req.spec.repeat, req.max_repeat))
    for line in power.lines():
        say(line)
    wanted = power.advice.repeat if power.advice is not None else req.spec.repeat
    return max(2, min(wanted, req.max_repeat))


def cmd_bisect(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_checked(args, settings)
    try:
        cells = bisect_plan.cells_of(spec, [bisect_plan.parse_cell(c) for c in args.cell or []])
        bisect_plan.template_target(spec)
        builds = _builds(args, settings, spec.pool)
        req = BisectRequest(spec, builds, tuple(cells), args.effect, args.repeat, args.max_repeat, args.poll)
        first = bisect_plan.step_spec(spec, cells, builds[0], builds[len(builds) // 2], 2, name=spec.name,
                                      description="")
        b = Bisect.start(builds, args.effect, _first_repeat(req, settings, first), args.max_repeat)
    except ValueError as e:
        error(str(e))
        return EXIT_USAGE
    bisect_id = secrets.token_hex(3)
    for line in b.lines()[:1]:
        say(f"{line}; bisect {bisect_id}, campaigns {bisect_plan.step_name(spec.name, bisect_id, 1)[:-1]}N")
    while (probe := b.next_probe()) is not None:
        try:
            step = _run_step(settings, req, bisect_id, len(b.steps) + 1, probe)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        if isinstance(step, int):
            return step
        cid, found = step
        b = b.record(probe, cid, found)
        for line in b.lines()[-2 - len(found):-1]:
            say(line)
    if args.fmt == "json":
        print(json.dumps({"bisect_id": bisect_id, **b.as_data()}, indent=1))
    else:
        print("\n".join(escape_controls(line) for line in b.lines()))
    return EXIT_OK if b.state == "found" else EXIT_FAILED


def _run_step(settings: Settings, req: BisectRequest, bisect_id: str, number: int,
              probe: Probe) -> tuple[str, list[CellInterval]] | int:
    """Submit one step's campaign, follow it, and judge its cells; an exit code when it could not be run."""
    n = len(req.builds)
    desc = (f"bisect {bisect_id} step {number}: {probe.build} (build {probe.position + 1} of {n}) beside {probe.good}, "
            f"effect {req.effect * 100:g}%; builds {', '.join(req.builds)}")[:2000]
    spec = bisect_plan.step_spec(req.spec, req.cells, probe.good, probe.build, probe.repeat,
                                 name=bisect_plan.step_name(req.spec.name, bisect_id, number), description=desc)
    cid = plan.new_campaign_id(spec)
    runs = bisect_plan.step_runs(spec, req.cells, cid)
    code = submit_and_follow(settings, FollowUp(
        spec, cid, runs, key=f"bisect/{cid}", connection="benchfleet scheduler bisect",
        undoing="interrupted: undoing the step's submit once the current step ends",
        not_run=f"interrupted: step {number} ({cid}) was not run; the bisect stopped",
        started=f"step {number}: campaign {cid} runs {probe.build} beside {probe.good} ({len(runs)} runs, repeat "
                f"{probe.repeat}, pool {spec.pool})"), req.poll)
    if code is not None:
        return code
    with Store(settings) as store:
        data = loading.load(store, cid, with_results=False)
        failures = store.runs.failed(cid)
    if failures:
        for f in failures:
            say(f"failed: {f.run_id}: {f.error}")
        error(f"step {number}: {len(failures)} run(s) of campaign {cid} failed; the bisect stopped (a build that does "
              "not run cannot be judged)")
        return EXIT_FAILED
    return cid, judged_cells(data, req.cells, probe.build)


def judged_cells(data: CampaignData, cells: tuple[Cell, ...], build: str) -> list[CellInterval]:
    """The step's verdict on each named cell: the q/s table's family over those cells alone."""
    found: dict[Cell, CellInterval] = {}
    for named in analyse(data, ReportOptions()).tables:
        for row in named.table.rows:
            if row.target != build:
                continue
            for threads, cell in zip(named.table.threads, row.cells):
                v = cell.verdict
                if (row.workload, threads) in cells and v is not None:
                    found[(row.workload, threads)] = CellInterval(f"{row.workload} t={threads}", v.ratio, v.low,
                                                                  v.high, v.level)
    nan = float("nan")
    return [found.get(c, CellInterval(f"{c[0]} t={c[1]}", nan, nan, nan, 0.0)) for c in cells]
