"""`worker`: consume runs of a pool and measure them; `worker prepare|cleanup SPEC` for users who
manage their data themselves."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path

from services.common import logs
from services.common.config import SettingsError, add_settings_flags, settings_from
from services.common.server_options import parse_cpus
from services.common.specfile import SpecError, load_spec

EXIT_OK, EXIT_USAGE, EXIT_CONNECT, EXIT_FAILED = 0, 2, 3, 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="worker", description=__doc__)
    p.add_argument("--pool", default=os.environ.get("BENCHFLEET_POOL", "default"), help="worker pool to take runs from (env BENCHFLEET_POOL)")
    p.add_argument("--id", dest="worker_id", default=os.environ.get("BENCHFLEET_WORKER_ID"),
                   help="worker id in results and logs (env BENCHFLEET_WORKER_ID; default host-pid)")
    p.add_argument("--client-cpus", default=os.environ.get("BENCHFLEET_CLIENT_CPUS"),
                   help="CPUs for load processes, e.g. 1 or 2-3 (env BENCHFLEET_CLIENT_CPUS; default all)")
    p.add_argument("--max-runs", type=int, default=None, help="exit after this many runs (tests, one-shot hosts)")
    p.add_argument("--keep-datadirs", action="store_true",
                   help="keep the datadirs of managed servers at exit, for post-mortems (default: remove them)")
    p.add_argument("--managed-dir", default=os.environ.get("BENCHFLEET_MANAGED_DIR"),
                   help="where managed servers keep templates and datadirs (env BENCHFLEET_MANAGED_DIR; "
                        "default /var/lib/benchfleet/managed as root)")
    add_settings_flags(p)
    return p


def cmd_data(action: str, argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"worker {action}", description=f"{action} the sbtest tables of every target of a spec")
    p.add_argument("spec")
    args = p.parse_args(argv)
    from services.worker import prepare
    from services.worker.target import dsn as target

    try:
        spec = load_spec(args.spec)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    for t in spec.targets:
        if t.kind == "managed":
            print(f"{t.name}: managed; the worker prepares its tables after starting its server")
            continue
        try:
            params = target.connect_params(t)
            if action == "prepare":
                # auto_inc off only when every workload that cares asks for it; with a mix, the
                # runs that want the other shape re-prepare.
                auto_inc = ({prepare.auto_inc_of(w) for w in spec.workloads} - {None}) != {False}
                made = prepare.ensure_tables(params, spec.data, auto_inc=auto_inc)
                print(f"{t.name}: {'created' if made else 'already prepared'} {spec.data.marker(auto_inc)} in {t.database}")
            else:
                prepare.cleanup(params, spec.data)
                print(f"{t.name}: dropped sbtest tables in {t.database}")
        except target.TargetError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except Exception as e:  # a server error: say which target, never a traceback
            print(f"error: target {t.name}: {e}", file=sys.stderr)
            return EXIT_CONNECT
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("prepare", "cleanup"):
        return cmd_data(argv[0], argv[1:])
    args = _parser().parse_args(argv)
    try:
        settings = settings_from(args)
    except SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    logs.configure("worker", settings.log_level)
    try:
        cpus = parse_cpus(args.client_cpus) if args.client_cpus else None
    except ValueError as e:
        print(f"error: --client-cpus: {e}", file=sys.stderr)
        return EXIT_USAGE
    from services.worker.driver.native.libmariadb import ClientLibraryError, library
    try:
        library()  # the native driver's client library: missing, the worker would fail every run
    except ClientLibraryError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from services.common.discovery import announced

    from services.worker.target import managed
    from services.worker.consumer import Worker
    from services.worker.metrics import WorkerMetrics
    from services.worker.runner import WorkerIdentity

    worker_id = args.worker_id or f"{socket.gethostname()}-{os.getpid()}"
    metrics = WorkerMetrics(worker_id)
    managed.configure(base_dir=Path(args.managed_dir) if args.managed_dir else None, keep_datadirs=args.keep_datadirs)
    w = Worker(settings, pool=args.pool, identity=WorkerIdentity(worker_id), client_cpus=cpus,
               max_runs=args.max_runs, metrics=metrics)
    signal.signal(signal.SIGTERM, lambda *_: w.stop())
    signal.signal(signal.SIGINT, lambda *_: w.stop())
    try:
        with announced(metrics, settings, "worker", {"worker": worker_id, "pool": args.pool}):
            w.run_forever()
    finally:
        # Stop the managed server cleanly and remove its datadirs (unless --keep-datadirs).
        managed.shutdown()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
