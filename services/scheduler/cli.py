"""`scheduler`: validate and plan specs, submit campaigns to the workers, follow their progress."""

from __future__ import annotations

import argparse
import json
import sys

from services.common import logs
from services.common.bus.rabbitmq import RabbitBus, Role, rabbit_factory
from services.common.cli import (
    add_completion,
    EXIT_COLLAPSE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SLOWER,
    EXIT_USAGE,
    Parser,
    error,
    percent,
    run_main,
)
from services.common.completion import command_of
from services.common.config import AMQP, DB, Settings, add_settings_flags
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.common.store.campaigns import Duplicate
from services.common.terminal import escape_controls
from services.reporting.render import registry
from services.scheduler import plan, validation
from services.scheduler.bisect import cmd_bisect
from services.scheduler.confirm import GateRequest, gate_campaign
from services.scheduler.deferred import deferred_sigint
from services.scheduler.follow import PoolConsumers, wait
from services.scheduler.spec_commands import change, cmd_plan, cmd_schema, cmd_validate, load_checked
from services.scheduler.submit import RolledBack, StoreLedger, submit


def _err(msg: str) -> None:
    error(msg)


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    from services.common.store.campaigns import default_key, spec_hash

    if (why := _report_flags_refused(args)) is not None:
        _err(why)
        return EXIT_USAGE
    spec = load_checked(args, settings)
    if spec.pools and args.fail_on_slower is not None:
        # The gate reads one campaign's cells, which several pools would mix: refused before anything is published.
        _err(f"--fail-on-slower: not for a campaign on several pools (pools: {', '.join(spec.pools)}); "
             "its report's Pools compared table says which pool a cell is slower on")
        return EXIT_USAGE
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
        return _wait_and_gate(settings, earlier.campaign_id, earlier.spec, args)
    logs.get("scheduler").bind(campaign_id=campaign_id).info("campaign_submitted", runs=outcome.runs, pool=outcome.pool)
    _warn_few_workers(settings, spec)
    if args.json and not args.wait:
        print(json.dumps({"campaign_id": campaign_id, "runs": outcome.runs, "pool": outcome.pool}))
    else:
        # With --wait --json or --format, stdout is one document at the end; this line goes to stderr.
        pools = "pools" if "," in outcome.pool else "pool"
        print(f"campaign {campaign_id}: {outcome.runs} runs published to {pools} {outcome.pool}",
              file=sys.stderr if args.json or args.fmt is not None else sys.stdout)
    if not args.wait:
        return EXIT_OK
    return _wait_and_gate(settings, campaign_id, spec, args)


def _wait_and_gate(settings: Settings, campaign_id: str, spec: CampaignSpec, args: argparse.Namespace) -> int:
    """`--wait`, then the gate of `--fail-on-slower` when the campaign ended without another failure."""
    rc = wait(settings, campaign_id, spec, args)
    if rc != EXIT_OK or args.fail_on_slower is None:
        return rc
    return gate_campaign(settings, GateRequest(campaign_id, args.fail_on_slower, args.confirm, args.poll))


def cmd_gate(args: argparse.Namespace, settings: Settings) -> int:
    return gate_campaign(settings, GateRequest(args.campaign, args.fail_on_slower, args.confirm, args.poll))


def _warn_few_workers(settings: Settings, spec: CampaignSpec) -> None:
    """A run split over more load hosts than the pool has workers connected cannot start: say so
    (workers may still connect; each part gives up after its join timeout, and the run fails)."""
    if spec.load_hosts <= 1:
        return
    consumers = PoolConsumers(settings)
    try:
        for pool in spec.pool_names:
            n = consumers.count(pool)
            if n is not None and n < spec.load_hosts:
                _err(f"warning: load_hosts: {spec.load_hosts} but only {n} worker(s) of pool {pool} are connected now; "
                     f"each run needs {spec.load_hosts} free workers at once")
    finally:
        consumers.close()


def _report_flags_refused(args: argparse.Namespace) -> str | None:
    """Why ``--format``/``--out`` or the gate's flags cannot be honoured (checked before submitting,
    not after the wait)."""
    if args.fail_on_slower is not None and not args.wait:
        return "--fail-on-slower gates the campaign once it ended: add --wait"
    if args.confirm and args.fail_on_slower is None:
        return "--confirm re-runs the cells that fail --fail-on-slower PCT: add it"
    chosen = args.fmt is not None or args.out is not None
    if chosen and not args.wait:
        return "--format and --out choose the report of --wait: add --wait"
    if chosen and args.json:
        return "--json prints the report inside its JSON document: leave out --format and --out"
    r = registry.renderer(args.fmt or registry.DEFAULT_FORMAT, "report")
    if (r.to_file or r.plots) and not args.out:
        return f"--format {r.name} writes a file: give --out FILE"
    return None


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    from services.scheduler.guards import TOLD_WITHIN_S, cancel_campaign

    done = cancel_campaign(settings, args.campaign, rabbit_factory(settings, Role.SCHEDULER))
    if done is None:
        _err(f"no campaign {args.campaign!r} in the results DB")
        return EXIT_USAGE
    if done.told:
        print(f"campaign {done.campaign_id} cancelled: {done.dropped} pending runs dropped; active runs stop within seconds")
    else:
        # The results DB holds the cancel: the collector tells the workers once it runs.
        print(f"campaign {done.campaign_id} cancelled: {done.dropped} pending runs dropped")
        _err(f"warning: the collector has not told the workers within {TOLD_WITHIN_S:g} s (is it running?); "
             "they stop the campaign's runs once it does")
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


def _gate_flags(s: argparse.ArgumentParser, prefix: str, *, required: bool = False) -> None:
    # PCT is required: an optional value would take the next word for it.
    s.add_argument("--fail-on-slower", metavar="PCT", type=percent, default=None, required=required,
                   help=f"{prefix}exit {EXIT_SLOWER} (EXIT_SLOWER) when a target's cell is slower than the baseline's "
                        "by more than PCT percent over its whole adjusted interval (the q/s table's family) and by at "
                        "least the 1%% min effect; lists the failing cells on stderr")
    s.add_argument("--confirm", action="store_true",
                   help="with --fail-on-slower: re-run only the failing cells (with their baseline, same targets and "
                        "repeat) as a new campaign, follow it, and fail only on the cells slower again there, "
                        "judged on those runs alone")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="scheduler", description=__doc__)
    p.add_version()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # Each command shows the settings it reads: validate and plan only the ones their checks use.
    spec_settings = {"validate": [("db_name", "max_run_s", "consumer_timeout_ms", "announce_ttl_s")],
                     "plan": [("db_name", "max_run_s", "consumer_timeout_ms", "announce_ttl_s")],
                     "submit": [AMQP, DB, ("max_run_s", "consumer_timeout_ms", "announce_ttl_s")],
                     "bisect": [AMQP, DB, ("max_run_s", "consumer_timeout_ms", "announce_ttl_s")]}

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
    # limit) but none of the fleet's secrets; --offline not even those.
    offline_help = ("check only what needs no fleet: read no settings file, results DB or server binary, so the "
                    "answer is the same on any machine (a CI job)")
    s = spec_cmd("validate", "check a spec; exit 2 naming each wrong field")
    s.add_argument("--offline", action="store_true", help=offline_help)
    s.add_argument("--json", action="store_true",
                   help=f"print the result as one JSON document ({validation.SCHEMA}: errors with file, line, field, "
                        "message, suggestion; notes); exit 2 when the spec is wrong")
    s.set_defaults(fn=cmd_validate, secrets=False)
    s = spec_cmd("plan", "print the expanded run matrix and estimated wall time")
    s.add_argument("--offline", action="store_true", help=offline_help + "; no power estimate or window warnings")
    s.add_argument("--workers", type=_positive, default=1,
                   help="workers sharing the campaign, for the estimate (default 1)")
    s.add_argument("--json", action="store_true", help="print the plan as JSON")
    s.add_argument("--detect", metavar="PCT", type=change, default=None,
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
    _gate_flags(s, "with --wait: ")
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
    s = spec_cmd("bisect", "find the first build of a series slower than the good one by at least an effect, "
                           "one campaign per step")
    s.add_argument("--good", required=True, metavar="BUILD", help="the build known good (the series' first)")
    s.add_argument("--bad", required=True, metavar="BUILD", help="the build known slower (the series' last)")
    series = s.add_mutually_exclusive_group(required=True)
    series.add_argument("--builds", metavar="B1,...,Bn", help="the series in order, from --good to --bad")
    series.add_argument("--range", action="store_true",
                        help="the pool's announced builds from --good to --bad, in version order (then by name)")
    s.add_argument("--cell", action="append", metavar="WORKLOAD:THREADS",
                   help="a cell to judge (repeatable; default: every cell of the spec); a step is slower when any "
                        "cell is, not slower when every cell is clear of the effect")
    s.add_argument("--effect", metavar="PCT", type=change, required=True,
                   help="the slowdown that counts, e.g. 5%%: a step is slower when a cell's whole interval lies at "
                        "least this far below the good build's q/s")
    s.add_argument("--max-repeat", type=_positive, default=20,
                   help="the repetitions an undecided step may reach, doubling each time (default 20); undecided "
                        "there ends the bisect without an answer (exit 1)")
    s.add_argument("--format", dest="fmt", choices=("text", "json"), default="text",
                   help="the path and verdict as text (default) or one JSON document")
    s.add_argument("--poll", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_bisect)
    s = sub.add_parser("gate", help="gate a finished campaign's targets against its baseline (--fail-on-slower)",
                       description="gate a finished campaign's targets against its baseline, as submit --wait "
                                   "--fail-on-slower does; with --confirm, re-run the failing cells first")
    s.add_argument("campaign", help="campaign id or name (latest of that name)")
    _gate_flags(s, "", required=True)
    s.add_argument("--poll", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    add_settings_flags(s, AMQP, DB)
    s.set_defaults(fn=cmd_gate)
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
    s = sub.add_parser("schema", help="print the spec's JSON Schema (Draft 2020-12) for editors",
                       description="print the spec's JSON Schema (Draft 2020-12) for editors")
    s.set_defaults(fn=cmd_schema, secrets=False)
    help = "print the shell completion script (bash or zsh)"
    add_completion(sub.add_parser("completion", help=help, description=help), lambda: command_of("scheduler", p))
    return p


def _offline(argv: list[str]) -> bool:
    """Whether the command line asks validate or plan for --offline. Read before parsing, because
    the settings file is read before parsing (flag defaults come from it), and offline reads none."""
    return bool(argv) and argv[0] in ("validate", "plan") and "--offline" in argv


def main(argv: list[str] | None = None) -> int:
    offline = _offline(sys.argv[1:] if argv is None else list(argv))
    return run_main("scheduler", lambda: _parser().parse_args(argv), settings_file=not offline)


if __name__ == "__main__":
    sys.exit(main())
