"""`worker`: consume runs of a pool and measure them; `worker prepare|cleanup SPEC` for users who
manage their data themselves; `worker builds add|list|remove` for the server builds managed
targets may name."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path

from services.common.cli import (
    add_completion,
    EXIT_CONNECT,
    EXIT_OK,
    EXIT_USAGE,
    Parser,
    error,
    run_main,
)
from services.common.completion import Command, command_of
from services.common.config import AMQP, METRICS, Settings, add_settings_flags
from services.common.errors import SettingsError, TargetError
from services.common.spec.server_options import parse_cpus
from services.common.spec.loading import load_spec


USAGE = """worker [-h] [--version] [--pool POOL] [--id WORKER_ID] [options]   take runs of a pool and measure them
       worker prepare SPEC   create the sbtest tables of every dsn target of SPEC
       worker cleanup SPEC   drop them
       worker builds {add,list,remove} ...   the server builds managed targets may name
       worker completion {bash,zsh}   print the shell completion script"""


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="worker", usage=USAGE, description=__doc__)
    p.add_version()
    p.add_argument("--pool", default=os.environ.get("BENCHFLEET_POOL", "default"), help="worker pool to take runs from (env BENCHFLEET_POOL)")
    p.add_argument("--id", dest="worker_id", default=os.environ.get("BENCHFLEET_WORKER_ID"),
                   help="worker id in results and logs (env BENCHFLEET_WORKER_ID; default host-pid)")
    p.add_argument("--client-cpus", default=os.environ.get("BENCHFLEET_CLIENT_CPUS"),
                   help="CPUs for load processes, e.g. 1 or 2-3 (env BENCHFLEET_CLIENT_CPUS; default all)")
    p.add_argument("--max-runs", type=int, default=None, help="exit after this many runs (one-shot hosts)")
    p.add_argument("--keep-datadirs", action="store_true",
                   help="keep the datadirs of managed servers at exit, for post-mortems (default: remove them)")
    p.add_argument("--managed-dir", default=os.environ.get("BENCHFLEET_MANAGED_DIR"),
                   help="where managed servers keep templates and datadirs (env BENCHFLEET_MANAGED_DIR; "
                        "default /var/lib/benchfleet/managed as root)")
    _builds_dir_flag(p)
    # The worker talks to the broker and serves /metrics; it never touches the results DB.
    add_settings_flags(p, AMQP, METRICS, ("run_attempts", "part_join_s"))
    p.set_defaults(fn=cmd_serve, long_running=True)
    return p


def _builds_dir_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--builds-dir", default=os.environ.get("BENCHFLEET_BUILDS_DIR"),
                   help="the build registry (env BENCHFLEET_BUILDS_DIR; default /var/lib/benchfleet/builds as root)")


def _registry(args: argparse.Namespace):
    from services.worker.target.builds import Registry

    return Registry(Path(args.builds_dir) if args.builds_dir else None)


def cmd_builds(args: argparse.Namespace, settings: Settings) -> int:
    """``worker builds add|list|remove``: the server builds registered on this host."""
    reg = _registry(args)
    if args.action == "list":
        records = reg.list()
        if args.json:
            import json

            print(json.dumps([r.model_dump(mode="json", by_alias=True) for r in records], indent=2))
            return EXIT_OK
        if not records:
            print(f"no builds registered in {reg.root}")
        for r in records:
            print(f"{r.name}\t{r.version}\t{r.source}\tsha256:{r.server_sha256[:16]}\t{r.basedir}")
        return EXIT_OK
    if args.action == "remove":
        r = reg.remove(args.name)
        print(f"removed build {r.name} ({r.version})")
        return EXIT_OK
    if args.debian:
        r = reg.add_debian(args.name, args.debian)
    elif args.tarball:
        r = reg.add_tarball(args.name, Path(args.tarball))
    else:
        r = reg.add_dir(args.name, Path(args.dir))
    print(f"registered build {r.name}: {r.version} ({r.source}: {r.origin}), server {r.binary}, "
          f"sha256 {r.server_sha256}")
    print("running workers announce it before their next run; others when they (re)connect")
    return EXIT_OK


def cmd_data(args: argparse.Namespace, settings: Settings) -> int:
    """``worker prepare|cleanup SPEC``: the sbtest tables of every dsn target of a spec."""
    from services.worker import prepare
    from services.worker.target import account_check, dsn
    from services.worker.target.account_policy import AccountPolicy
    from services.worker.target.lifecycle import protected_schemas

    spec = load_spec(args.spec)
    accounts = AccountPolicy.from_environ(os.environ)
    for t in spec.targets:
        if t.kind == "managed":
            print(f"{t.name}: managed; the worker prepares its tables after starting its server")
            continue
        try:
            params = dsn.connect_params(t)
        except TargetError as e:  # the spec names a password this host does not have
            error(str(e))
            return EXIT_USAGE
        try:
            # The same refusal as a run's: a spec handed to the operator must not make these
            # commands act as root or as an account holding more than the tables need.
            account_check.check(params, f"targets.{t.name}", accounts, protected_schemas(os.environ))
        except TargetError as e:
            error(str(e))
            return EXIT_USAGE
        except Exception as e:  # the server refused the connection: say which target
            error(f"target {t.name}: {e}")
            return EXIT_CONNECT
        try:
            if args.action == "prepare":
                # auto_inc off only when every workload that cares asks for it; with a mix, the
                # runs that want the other shape re-prepare.
                auto_inc = ({prepare.auto_inc_of(w) for w in spec.workloads} - {None}) != {False}
                made = prepare.ensure_tables(params, spec.data, auto_inc=auto_inc)
                print(f"{t.name}: {'created' if made else 'already prepared'} {spec.data.marker(auto_inc)} in {t.database}")
            else:
                prepare.cleanup(params, spec.data)
                print(f"{t.name}: dropped sbtest tables in {t.database}")
        except Exception as e:  # a server error: say which target, never a traceback
            error(f"target {t.name}: {e}")
            return EXIT_CONNECT
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Consume runs of the pool until stopped."""
    cpus = _cpus(args.client_cpus)
    from services.common import logs
    from services.worker.target.account_policy import LIBMYSQL_CLEARTEXT, AccountPolicy
    from services.worker.target.secret_policy import SecretPolicy

    # Which passwords specs may name here, and where they may go: refused at start when
    # misconfigured, not per run.
    policy = SecretPolicy.from_environ(os.environ)
    accounts = AccountPolicy.from_environ(os.environ)
    log = logs.get("worker")
    log.info("target_password_policy", **policy.describe(), **accounts.describe())
    if policy.unbound:
        # The allow-list's earlier form: still honoured, for this host's own servers only.
        log.warning("target_password_unbound", entries=policy.unbound,
                    hint="these passwords go only to this worker's loopback; bind each to its server "
                         "(NAME@HOST:PORT, /DIR@HOST:PORT) to send it elsewhere (docs/security.md)")
    if accounts.allow_cleartext:
        # mysql.connector's client library reads this when it starts; the native driver and
        # sysbench read the run's connection parameters.
        os.environ[LIBMYSQL_CLEARTEXT] = "1"
    from services.worker.driver.native.core import module

    module()  # the native driver's compiled core: missing, the worker would fail every run
    from services.common.bus.rabbit_parts import rabbit_parts_factory
    from services.common.bus.rabbitmq import Role, rabbit_factory
    from services.common.monitoring.discovery import announced, scrape_address
    from services.worker.consumer import Worker
    from services.worker.metrics import WorkerMetrics
    from services.worker.runner import WorkerIdentity
    from services.worker.target.managed import ServerManager

    worker_id = args.worker_id or f"{socket.gethostname()}-{os.getpid()}"
    metrics = WorkerMetrics(worker_id)
    servers = ServerManager(base_dir=Path(args.managed_dir) if args.managed_dir else None,
                            keep_datadirs=args.keep_datadirs, builds=_registry(args))
    try:
        with announced(metrics, settings, "worker", {"worker": worker_id, "pool": args.pool}) as port:
            w = Worker(settings, pool=args.pool, identity=WorkerIdentity(worker_id),
                       connect=rabbit_factory(settings, Role.WORKER), client_cpus=cpus, max_runs=args.max_runs,
                       metrics=metrics, servers=servers, scrape_address=scrape_address(settings, port),
                       parts_connect=rabbit_parts_factory(settings),
                       part_options={"join_base_s": float(settings.part_join_s)})
            signal.signal(signal.SIGTERM, lambda *_: w.stop())
            signal.signal(signal.SIGINT, lambda *_: w.stop())
            w.run_forever()
    finally:
        # Stop the managed server cleanly and remove its datadirs (unless --keep-datadirs).
        servers.close()
    return EXIT_OK


def _cpus(text: str | None) -> list[int] | None:
    try:
        return parse_cpus(text) if text else None
    except ValueError as e:
        raise SettingsError(f"--client-cpus: {e}") from None


def _data_parser(action: str) -> argparse.ArgumentParser:
    what = "create" if action == "prepare" else "drop"
    p = Parser(prog=f"worker {action}",
               description=f"{what} the sbtest tables of every dsn target of a spec (managed targets: the worker does it)")
    p.add_version()
    p.add_argument("spec", help="campaign spec (YAML) naming the targets and the data shape")
    add_settings_flags(p, ())
    p.set_defaults(fn=cmd_data, action=action)
    return p


def _builds_parser() -> argparse.ArgumentParser:
    p = Parser(prog="worker builds", description="server builds managed targets may name (build: NAME)")
    p.add_version()
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = sub.add_parser("add", help="register a build: Debian packages at a version, a tarball, or a directory")
    a.add_argument("name", help="the build's name, as specs give it (build: NAME)")
    src = a.add_mutually_exclusive_group(required=True)
    src.add_argument("--debian", metavar="VERSION",
                     help="mariadb-server-core and mariadb-client-core at this version (10.11.18 or 1:10.11.18-0+deb12u1)")
    src.add_argument("--tarball", metavar="FILE", help="a binary tarball (extracted into the registry)")
    src.add_argument("--dir", metavar="PATH", help="a directory left where it is (a build you compiled)")
    ls = sub.add_parser("list", help="the registered builds")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rm = sub.add_parser("remove", help="unregister a build and delete its tree")
    rm.add_argument("name", help="the build's name")
    for s in (a, ls, rm):
        _builds_dir_flag(s)
    p.set_defaults(fn=cmd_builds)
    return p


def _completion_parser() -> argparse.ArgumentParser:
    p = Parser(prog="worker completion", description="print the shell completion script (bash or zsh)")
    add_completion(p, _tree)
    return p


def _tree() -> Command:
    """Every worker command for completion: the consumer's flags, prepare, cleanup and builds."""
    extra = tuple(command_of(name, parser) for name, parser in
                  (("prepare", _data_parser("prepare")), ("cleanup", _data_parser("cleanup")),
                   ("builds", _builds_parser()), ("completion", _completion_parser())))
    return command_of("worker", _parser(), extra)


def _parse(argv: list[str]) -> argparse.Namespace:
    if argv and argv[0] == "completion":
        return _completion_parser().parse_args(argv[1:])
    if argv and argv[0] in ("prepare", "cleanup"):
        return _data_parser(argv[0]).parse_args(argv[1:])
    if argv and argv[0] == "builds":
        return _builds_parser().parse_args(argv[1:])
    return _parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_main("worker", lambda: _parse(argv))


if __name__ == "__main__":
    sys.exit(main())
