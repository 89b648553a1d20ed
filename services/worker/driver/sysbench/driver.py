"""The second driver: run the real sysbench binary with a run's options and read its reports.

Users cross-check the native driver against it and keep continuity with numbers measured by
sysbench itself. The command line is built by a pure function (``command``) so tests check it
literally; the password travels in a mode-600 --config-file, never on the command line where
``ps`` would show it.

sysbench 1.0.20 (Debian 12's package) has no --warmup-time (that came with 1.1), so a warm-up
is a separate ``sysbench ... run --time=<warmup>`` right before the measured one, on the same
tables, and the measured run's final report covers the measured interval only.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Callable

from services.common.spec import ignore_errors as ignore
from services.common.spec.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.spec.ignore_errors import IgnoreErrors
from services.common.errors import TargetError
from services.common.messages.base import MAX_RUN_SEED
from services.common.messages.results import Latency, Series, Totals
from services.common.spec.targets import DsnTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.contract import ConnectParams, LoadError, LoadOutcome, LoadRequest
from services.common.results import sysbench_output as so
from services.worker.driver.sysbench.live import LiveProgress
from services.worker.target import info, parent_death
from services.workload.registry import SYSBENCH_SPELLING, definition
from services.worker.driver.sysbench.scripts import find_script

#: The binary and the Debian package that ships it (named in the error when it is missing).
BINARY = "sysbench"
PACKAGE = "sysbench"
#: Seconds sysbench may run past --time before it is killed (it only stops between events).
OVERRUN_S = 30.0
#: rand_type values sysbench 1.0.20 does not know (zipfian came with 1.1).
UNSUPPORTED_RAND_TYPES = frozenset({"zipfian"})
_BOOL = {True: "on", False: "off"}


def find_binary(binary: str = BINARY) -> str:
    """The path of the sysbench binary; LoadError naming the binary and package when absent."""
    path = shutil.which(binary)
    if path is None:
        raise LoadError(
            f"driver sysbench: the '{binary}' binary is not on this worker's PATH; install the "
            f"Debian package '{PACKAGE}' (deploy/ensure-services sysbench) or use driver: native"
        )
    return path


def check_workload(workload: WorkloadSpec) -> None:
    """LoadError, naming the spec field, for a script workload whose script this worker does not
    have: checked before the worker starts, stops or prepares anything for the run."""
    if workload.script is not None:
        find_script(workload.script, f"workloads.{workload.key}.script")


def check_target(target: object) -> None:
    """TargetError (naming the field) for a target whose TLS sysbench cannot give: 1.0.20's
    --mysql-ssl never checks the server's certificate, so a password meant for verified TLS
    would reach whoever answers. The spec refuses this too; a run message is checked again."""
    if isinstance(target, DsnTarget) and target.tls_mode == "verify":
        raise TargetError(f"targets.{target.name}.tls", "verify: driver sysbench (1.0.20) cannot verify the "
                                                         "server's certificate; use driver: native, or tls: "
                                                         "preferred to send the password unverified")


#: sysbench's own defaults, for a command built without a connection (its tests).
SYSBENCH_DEFAULTS = ConnectParams(host="127.0.0.1", port=3306, user="root", database="sbtest")


def mysql_options(params: ConnectParams) -> list[str]:
    """sysbench's --mysql-* options for ``params``, the password aside (it goes in the config
    file, where ps cannot see it); a socket replaces host and port."""
    where = ([f"--mysql-socket={params.unix_socket}"] if params.unix_socket else
             [f"--mysql-host={params.host or '127.0.0.1'}", f"--mysql-port={params.port or 3306}"])
    return [*where, f"--mysql-user={params.user}", f"--mysql-db={params.database or 'sbtest'}"]


def _option_value(v: object) -> str:
    if isinstance(v, bool):
        return _BOOL[v]
    return str(v)


def command(workload: WorkloadSpec, data: DataShape, *, threads: int, seed: int, duration: float | None = None,
            events: int | None = None, rate: float | None = None, report_interval: int = 1,
            ignore_errors: IgnoreErrors = IGNORE_DEFAULT, binary: str = BINARY, config_file: str | None = None,
            params: ConnectParams | None = None, percentile: int = 95, script_path: str | None = None) -> list[str]:
    """The sysbench ``run`` command for one run (pure). ``duration`` None with ``events`` gives
    sysbench's fixed-event mode (--events=N --time=0). A script workload runs ``script_path``,
    the file the worker found for it (scripts.find_script)."""
    rand_type = str(workload.option("rand_type"))
    if rand_type in UNSUPPORTED_RAND_TYPES or "rand_zipfian_exp" in workload.options:
        raise LoadError(f"driver sysbench: sysbench 1.0.20 has no rand_type {rand_type} "
                        "(zipfian and rand_zipfian_exp came with sysbench 1.1); use the native driver for it")
    if workload.script is not None:
        if script_path is None:
            raise LoadError(f"driver sysbench: script {workload.script!r} was not looked up on this worker")
        test = script_path
    else:
        test = definition(workload.name).sysbench_test
    if test is None:
        raise LoadError(f"driver sysbench: sysbench 1.0.20 has no script running what sysbench 0.5 ran as "
                        f"{workload.name} in 2010 (docs/workloads.md); use driver: native for it")
    if not 1 <= percentile <= 100:
        # 0 would stop sysbench's latency histogram, which the result's percentiles come from.
        raise LoadError(f"driver sysbench: percentile {percentile} is outside 1..100")
    argv = [binary]
    if config_file:
        argv.append(f"--config-file={config_file}")
    argv.append(test)
    argv += mysql_options(params or SYSBENCH_DEFAULTS)
    argv.append(f"--mysql-ignore-errors={ignore.sysbench_value(ignore_errors)}")
    if params is not None and params.ssl_ca and not params.ssl_disabled:
        argv.append("--mysql-ssl=on")
    argv += [f"--tables={data.tables}", f"--table_size={data.table_size}",
             f"--mysql_storage_engine={data.engine}"]
    for key in sorted(workload.options):
        if key not in SYSBENCH_SPELLING:
            argv.append(f"--{key}={_option_value(workload.options[key])}")
    argv.append(f"--rand-type={rand_type}")
    # sysbench's global options, each as sysbench spells it, when the spec set it.
    for key, flag in SYSBENCH_SPELLING.items():
        if flag is not None and key != "rand_type" and key in workload.options:
            argv.append(f"{flag}={_option_value(workload.options[key])}")
    if not 0 <= seed <= MAX_RUN_SEED:
        raise LoadError(f"driver sysbench: seed {seed} is outside sysbench's --rand-seed range 0..{MAX_RUN_SEED}")
    # sysbench seeds from the clock when --rand-seed is 0, which is also what it does unseeded.
    if seed:
        argv.append(f"--rand-seed={seed}")
    argv.append(f"--threads={threads}")
    if duration is None:
        argv += [f"--events={events or 0}", "--time=0"]
    else:
        argv.append(f"--time={max(1, math.ceil(duration))}")
        if events:
            argv.append(f"--events={events}")
    if rate:
        argv.append(f"--rate={rate:g}")
    if report_interval:
        argv.append(f"--report-interval={report_interval}")
    argv += ["--histogram=on", f"--percentile={percentile}", "run"]
    return argv


#: Where Debian's libmariadb3 (the library sysbench links) keeps its authentication plugins.
PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu/libmariadb3/plugin", "/usr/lib/aarch64-linux-gnu/libmariadb3/plugin",
               "/usr/lib/mariadb/plugin")
#: Plugins that send the password as it is: kept out of sysbench's reach unless the operator
#: allows clear text. sysbench 1.0.20 sets no option that restricts them and reads no option
#: file, so its libmariadb is given a plugin directory without them (MARIADB_PLUGIN_DIR).
CLEARTEXT_PLUGINS = frozenset({"mysql_clear_password.so", "dialog.so"})


def safe_plugin_dir(into: str, sources: tuple[str, ...] = PLUGIN_DIRS) -> str:
    """A directory in ``into`` holding links to the system's client plugins but the clear-text
    ones (empty when there is no plugin directory: mysql_native_password is built in)."""
    out = os.path.join(into, "plugin")
    os.mkdir(out, 0o700)
    source = next((d for d in sources if os.path.isdir(d)), None)
    for name in sorted(os.listdir(source)) if source else []:
        if name.endswith(".so") and name not in CLEARTEXT_PLUGINS:
            os.symlink(os.path.join(source, name), os.path.join(out, name))
    return out


def sysbench_env(params: ConnectParams, plugin_dir: str | None) -> dict[str, str]:
    """sysbench's environment: the worker's, with the clear-text-free plugin directory unless
    ``params`` allow clear text."""
    env = dict(os.environ)
    if not params.allow_cleartext and plugin_dir is not None:
        env["MARIADB_PLUGIN_DIR"] = plugin_dir
    return env


def _config_file(params: ConnectParams) -> str:
    fd, path = tempfile.mkstemp(prefix="benchfleet-sysbench-", suffix=".cfg")
    with os.fdopen(fd, "w") as f:  # mkstemp creates it 0600
        f.write(f"mysql-password={params.password}\n")
    return path


def _pin(pid: int, cpus: tuple[int, ...] | None) -> None:
    if not cpus:
        return
    try:
        os.sched_setaffinity(pid, cpus)
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), cpus)
    except (OSError, ValueError):
        pass  # the process already ended; its exit status tells what happened


#: The line sysbench prints once every client thread has connected and prepared its statements,
#: right before the timed events begin.
STARTED_LINE = "Threads started!"


def _usage_so_far(pid: int) -> tuple[float, int]:
    """CPU seconds and context switches of every thread of the running process ``pid`` (sysbench
    forks nothing, so wait4's totals hold the same and no more); (0, 0) when it cannot be read."""
    cpu = info.read_proc_cpu(pid)
    threads = info.read_thread_switches(pid)
    return (cpu or 0.0), sum((threads or {}).values())


def _run_once(argv: list[str], *, cpus: tuple[int, ...] | None, deadline: float, stop: threading.Event | None,
              on_line: Callable[[str], None] | None = None,
              env: dict[str, str] | None = None) -> tuple[int, str, float, int]:
    """Run sysbench to its end; return (exit status, stdout+stderr, CPU seconds it used,
    context switches of its threads), both from its STARTED_LINE on: start, connecting and
    preparing statements are not the measured interval (the native driver counts only that)."""
    # Tied to the worker: a worker killed mid-run must not leave sysbench loading the target while
    # another worker measures that run again (this thread waits for sysbench, so it outlives it).
    worker = os.getpid()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
                            preexec_fn=lambda: parent_death.die_with(worker))
    _pin(proc.pid, cpus)
    lines: list[str] = []
    baseline: tuple[float, int] | None = None
    killer_done = threading.Event()

    def watchdog() -> None:
        # Stops sysbench on cancel or when it overruns; the read loop below then sees EOF.
        while not killer_done.wait(0.2):
            if (stop is not None and stop.is_set()) or time.monotonic() > deadline:
                try:
                    proc.send_signal(signal.SIGTERM if time.monotonic() <= deadline + 5 else signal.SIGKILL)
                except ProcessLookupError:
                    return

    guard = threading.Thread(target=watchdog, daemon=True)
    guard.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if baseline is None and line.startswith(STARTED_LINE):
                baseline = _usage_so_far(proc.pid)
            if on_line is not None:
                on_line(line)
    finally:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        killer_done.set()
        guard.join()
        proc.stdout.close() if proc.stdout else None
    cpu0, switches0 = baseline or (0.0, 0)
    return (proc.returncode, "".join(lines), max(0.0, usage.ru_utime + usage.ru_stime - cpu0),
            max(0, usage.ru_nvcsw + usage.ru_nivcsw - switches0))


def run_sysbench(request: LoadRequest, *, binary: str = BINARY) -> LoadOutcome:
    """Warm up, then measure with sysbench; the outcome has the native driver's shape."""
    r = request
    if r.start_gate is not None:
        raise LoadError("driver sysbench: a run split over load hosts (load_hosts) needs driver: native")
    if r.latency_by_kind:
        raise LoadError("driver sysbench: sysbench reports latency per event only; "
                        "latency_by_kind needs driver: native")
    if r.params.ssl_verify_cert:
        raise LoadError("driver sysbench: these connection parameters ask for a verified certificate, "
                        "which sysbench 1.0.20 cannot check; the password is not sent")
    path = find_binary(binary)
    script = None if r.workload.script is None else find_script(r.workload.script, f"workloads.{r.workload.key}.script")
    scratch = tempfile.mkdtemp(prefix="benchfleet-sysbench-")
    cfg = _config_file(r.params)
    try:
        env = sysbench_env(r.params, safe_plugin_dir(scratch))
        started = time.time()
        t0 = time.monotonic()
        if r.warmup > 0:
            argv = command(r.workload, r.data, threads=r.threads, seed=r.seed, duration=r.warmup, rate=r.rate,
                           report_interval=0, ignore_errors=r.ignore_errors, binary=path, config_file=cfg,
                           params=r.params, percentile=r.percentile, script_path=script)
            rc, out, _, _ = _run_once(argv, cpus=r.client_cpus, deadline=time.monotonic() + r.warmup + OVERRUN_S,
                                      stop=r.stop, env=env)
            _check(rc, out, r.stop)
        warm_s = time.monotonic() - t0
        if r.stop is not None and r.stop.is_set():
            now = time.time()
            return _cancelled(started, now, warm_s)
        argv = command(r.workload, r.data, threads=r.threads, seed=r.seed, duration=r.duration, events=r.events,
                       rate=r.rate, ignore_errors=r.ignore_errors, binary=path, config_file=cfg, params=r.params,
                       percentile=r.percentile, script_path=script)
        # The warm-up's process has ended and the measured one has not started: the server's
        # counters stand still, and its window starts where sysbench's totals do.
        quiet_from = r.read_server() if r.read_server is not None else None
        measure_wall = time.time()
        limit = (r.duration or 3600.0) + OVERRUN_S
        live = LiveProgress(r.on_progress, open_loop=bool(r.rate)) if r.on_progress is not None else None
        rc, out, cpu_s, switches = _run_once(argv, cpus=r.client_cpus, deadline=time.monotonic() + limit,
                                             stop=r.stop, on_line=None if live is None else live.feed, env=env)
        if live is not None:
            live.flush()
        quiet_to = r.read_server() if r.read_server is not None and quiet_from is not None else None
        if r.stop is not None and r.stop.is_set():
            return _from_intervals(so.intervals(out), started, measure_wall, warm_s, cpu_s)
        _check(rc, out, r.stop)
        report = so.parse_final(out)
        totals = so.totals(report)
        return LoadOutcome(
            totals=totals,
            series=so.with_last_second(so.series(so.intervals(out)), totals, report.total_time_s),
            latency=so.latency(report),
            # sysbench counts ignored errors but does not say which codes they were.
            errors_by_code={},
            warmup_s=warm_s,
            measured_s=report.total_time_s,
            started_at=started,
            ended_at=measure_wall + report.total_time_s,
            client_cpu_s=cpu_s,
            client_ctxt_switches=switches,
            server_window=(quiet_from, quiet_to) if quiet_from is not None and quiet_to is not None else None,
        )
    finally:
        os.unlink(cfg)
        shutil.rmtree(scratch, ignore_errors=True)


def _check(rc: int, out: str, stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        return
    fatal = list(dict.fromkeys(so.fatal_lines(out)))  # every thread repeats the same lines
    if rc != 0 or fatal:
        why = "; ".join(fatal) if fatal else (out.strip().splitlines() or ["no output"])[-1]
        error = so.fatal_error(fatal)
        # Led by the MySQL error, worded as the native driver words it, so a report's failures
        # read alike whichever driver ran them.
        lead = f"MySQL error {error[0]}: {error[1]}; " if error else ""
        raise LoadError(f"{lead}sysbench exited with status {rc}: {why}", so.fatal_error_code(fatal))


def _cancelled(started: float, now: float, warm_s: float) -> LoadOutcome:
    return LoadOutcome(Totals(), Series(), Latency(), {}, warm_s, 0.0, started, now)


def _from_intervals(ivs: list[so.Interval], started: float, measure_wall: float, warm_s: float,
                    cpu_s: float) -> LoadOutcome:
    """A cancelled run: what the per-second reports said up to the cancel (no final report)."""
    s = so.series(ivs)
    totals = Totals(transactions=sum(s.transactions), reads=sum(round(iv.reads) for iv in ivs),
                    writes=sum(round(iv.writes) for iv in ivs), other=sum(round(iv.other) for iv in ivs),
                    ignored_errors=sum(s.ignored_errors), reconnects=sum(s.reconnects))
    return LoadOutcome(totals, s, Latency(), {}, warm_s, float(len(ivs)), started,
                       measure_wall + len(ivs), client_cpu_s=cpu_s)
