"""The scheduler's commands on a spec alone: validate, plan and schema (submit loads its spec the
same way, so a spec that validates is one that is accepted). With ``--offline`` they read neither the
settings nor the results DB nor this host's server, and give the same answer on any machine."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from services.common.cli import EXIT_OK, EXIT_USAGE
from services.common.config import Settings, with_db_password
from services.common.errors import ConnectError, SettingsError, SpecError, StoreError
from services.common.spec.campaign import CampaignSpec
from services.common.spec.durations import format_duration
from services.common.spec.windows import workload_windows
from services.common.spec.json_schema import spec_json_schema
from services.common.spec.loading import load_spec_source
from services.common.store import Store
from services.reporting.plan_power import PlanPower
from services.scheduler import plan, preflight, windows
from services.scheduler.plan_history import power_of
from services.scheduler.validation import OFFLINE_SKIPPED, Validation


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("duration", "warmup", "repeat", "pool"):
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    if getattr(args, "threads", None):
        out["threads"] = [int(t) if t.strip().isdigit() else t for t in args.threads.split(",")]
    return out


def _checked(args: argparse.Namespace, settings: Settings) -> tuple[CampaignSpec, list[str]]:
    """The spec and the notes of its checks: submit's checks, or with ``--offline`` only those
    that need no fleet (SpecError naming every wrong field)."""
    spec, source = load_spec_source(args.spec, _overrides(args) or None)
    if getattr(args, "offline", False):
        return spec, [OFFLINE_SKIPPED]
    return spec, preflight.check(spec, settings, source)


def load_checked(args: argparse.Namespace, settings: Settings) -> CampaignSpec:
    """The spec, checked as submit checks it (validate, plan and submit accept the same specs);
    notes go to stderr."""
    spec, notes = _checked(args, settings)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return spec


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    if not args.json:
        spec = load_checked(args, settings)  # a SpecError prints one error line per wrong field
        print(f"{args.spec}: ok ({spec.total_runs} runs)")
        return EXIT_OK
    try:
        spec, notes = _checked(args, settings)
        result = Validation.accepted(args.spec, spec, notes, offline=args.offline)
    except SpecError as e:
        result = Validation.refused(args.spec, e, offline=args.offline)
    print(json.dumps(result.as_data(), indent=2))
    return EXIT_OK if result.ok else EXIT_USAGE


def cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    print(json.dumps(spec_json_schema(), indent=2))
    return EXIT_OK


def cmd_plan(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_checked(args, settings)
    runs = plan.expand(spec, f"{spec.name}-<id>")
    est = plan.estimated_seconds(spec, args.workers)
    power, why = _power(spec, settings, args.detect, args.offline)
    if args.json:
        print(json.dumps({"runs": len(runs), "estimated_seconds": est, "workers": args.workers,
                          "load_hosts": spec.load_hosts,
                          "duration_by_threads": {str(t): spec.duration_for(t) for t in spec.threads},
                          "windows": {w.key: {str(t): {"warmup": spec.warmup_for(t, w.key),
                                                                "duration": spec.duration_for(t, w.key)}
                                                      for t in spec.threads}
                                      for w in spec.workloads},
                          "window_warnings": _window_warnings(spec, settings, args.offline),
                          "power": power.as_data() if power else {"message": [why]},
                          "order": [{"seq": r.seq, "run_id": r.run_id, **r.cell.model_dump(), "repetition": r.repetition,
                                     "position": r.position}
                                    for r in runs]}, indent=2))
        return EXIT_OK
    print(f"campaign {spec.name}: {len(spec.targets)} targets x {len(spec.workloads)} workloads x "
          f"{len(spec.threads)} thread counts x {spec.repeat} repetitions = {len(runs)} runs")
    lines = _window_lines(spec)
    estimate = f"estimated wall time with {args.workers} worker(s): {format_duration(round(est))}"
    print(f"{lines[0]}; {estimate}" if len(lines) == 1 else "\n".join([*lines, estimate]))
    for warning in _window_warnings(spec, settings, args.offline):
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


def _window_lines(spec: CampaignSpec) -> list[str]:
    """What each run warms up and measures: one line for the whole spec, or one per group of
    workloads that share their windows."""
    groups = workload_windows([w.key for w in spec.workloads], spec.threads,
                              lambda w, t: (spec.warmup_for(t, w), spec.duration_for(t, w)))
    if len(groups) == 1:
        return [f"each run: {groups[0][1]}"]
    return [f"runs of {', '.join(keys)}: {text}" for keys, text in groups]


def _power(spec: CampaignSpec, settings: Settings, detect: float | None,
           offline: bool = False) -> tuple[PlanPower | None, str]:
    """What the spec's repeat can detect, from earlier campaigns of its cells; or why it is not known."""
    if offline:
        return None, "power: not estimated offline (it reads earlier campaigns from the results DB)"
    try:
        return power_of(spec, settings, detect), ""
    except (StoreError, ConnectError) as e:
        return None, f"power: not estimated: the results DB was not read ({e})"


def change(text: str) -> float:
    """A change to detect, ``3%`` or ``3``, as a fraction."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 3%)") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"{text!r}: the change must be above 0% and below 100%")
    return value / 100


def _window_warnings(spec: CampaignSpec, settings: Settings, offline: bool = False) -> list[str]:
    """Warnings for windows shorter than 10 mean response times the results DB last measured on
    the spec's cells; none when the DB cannot be read (a plan needs no DB, and says nothing
    when there is none, as on a fresh host, or offline)."""
    if offline:
        return []
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

