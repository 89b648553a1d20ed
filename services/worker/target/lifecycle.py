"""The server side of one run: reach (or start) the target, then record what the server did.

The runner calls open_target() before preparing tables, waits for the target to settle with
a Settling (settling_for()) around the prepare, wraps the load in sampling(), and puts report()
(a ServerReport) into the result's ``server`` field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

from services.common import logs
from services.common.spec import server_options
from services.common.errors import TargetError
from services.common.messages.pool import PoolSeries
from services.common.messages.results import QuiesceReport, ServerCount, ServerReport, Totals
from services.common.messages.server_work import server_work
from services.common.config import Settings
from services.common.spec.targets import SYSTEM_SCHEMAS, DsnTarget, ManagedTarget, is_loopback
from services.common.spec.workloads import DataShape
from services.worker.target import account_check, dsn, info, managed, managed_server, pool_figures, pool_probe, quiesce
from services.worker.target.account_policy import AccountPolicy
from services.worker.target.connect_params import ConnectParams
from services.worker.target.local_server import LocalServer
from services.worker.target.quiesce import TargetUnsettled
from services.workload.server_counter import ServerCounter


class Measured(Protocol):
    """What the server's report needs of a finished load (the drivers' LoadOutcome; targets sit
    below the drivers, so they do not import it)."""

    started_at: float
    warmup_s: float
    measured_s: float
    client_cpu_s: float
    client_ctxt_switches: int | None
    totals: Totals
    server_window: tuple[float, float] | None

log = logs.get(__name__)


@dataclass
class TargetSession:
    """One run's target: how to connect, the client CPUs, and what is known of the server."""

    params: ConnectParams
    client_cpus: list[int] | None
    server: managed_server.ManagedServer | None = None
    #: What the report says before the load: the kind, and for managed targets the start.
    base: ServerReport = ServerReport(kind="dsn")
    identity: info.ServerIdentity | None = None
    identity_error: str | None = None
    sampler: info.StatusSampler | None = None
    #: Why the monitor's counts are not the server's count of the window (it queues behind the
    #: load in a thread pool without extra_port); None when they are.
    monitor_problem: str | None = None
    #: The pool's information_schema tables, read by the sampler (None: no thread pool to read),
    #: and why there are no such figures where there are none.
    pool_probe: pool_probe.PoolProbe | None = None
    pool_reason: str | None = None

    @property
    def server_apart(self) -> bool:
        """Whether the server is known not to run on the client CPUs: a managed server pinned to
        others, or a server reached at an address that is not this machine's loopback (a name or
        address of this host's own network card is taken for another host's)."""
        if self.server is not None:
            return server_options.cpus_apart(self.server.server_cpus, self.client_cpus or ())
        return self.params.unix_socket is None and self.params.host is not None and not is_loopback(self.params.host)

    @property
    def local_server(self) -> LocalServer | None:
        """The managed server where it may share the client CPUs (None where it cannot, and for
        a dsn target, whose server process the worker does not know)."""
        if self.server is None or self.server.pid is None or self.server_apart:
            return None
        return LocalServer(self.server.pid, tuple(self.server.server_cpus))


def open_target(servers: managed.ServerManager | None, spec_target: DsnTarget | ManagedTarget, data: DataShape,
                client_cpus: list[int] | None) -> TargetSession:
    """Connection parameters for the run (starting a managed server, through the worker's
    ``servers``, when the target is one); raise TargetError naming the field to fix."""
    if isinstance(spec_target, ManagedTarget):
        if servers is None:
            raise TargetError("kind", "this worker was started without managed servers")
        server = servers.ensure(spec_target, data, client_cpus)
        base = ServerReport(kind="managed", binary=str(server.binary), build=server.build.name,
                            build_version=server.build.version, server_sha256=server.build.server_sha256,
                            malloc=server.malloc_loaded, options=server_options.hide_secrets(spec_target.options),
                            server_cpus=server_options.format_cpus(server.server_cpus),
                            client_cpus=server_options.format_cpus(server.client_cpus),
                            reused=server.reused, start_s=round(server.start_s, 3), pid=server.pid,
                            port=server.port)
        return TargetSession(server.connect_params(), server.client_cpus, server, base)
    params = dsn.connect_params(spec_target)
    # Before prepare or load: a spec must not make the worker act as root or as an account
    # holding more than a run needs.
    account_check.check(params, f"targets.{spec_target.name}", AccountPolicy.from_environ(os.environ),
                        protected_schemas(os.environ))
    # A dsn run must have the machine alone: stop a managed server left by earlier runs.
    if servers is not None:
        servers.release()
    return TargetSession(params, client_cpus)


def protected_schemas(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Schemas a dsn target's account may hold nothing on: the server's own and the results DB."""
    return (*sorted(SYSTEM_SCHEMAS), environ.get("BENCHFLEET_DB_NAME") or Settings.db_name)


@contextlib.contextmanager
def sampling(session: TargetSession) -> Iterator[None]:
    """Sample the server's status (and CPU) while the load runs."""
    options = session.server.target.options if session.server is not None else {}
    try:
        session.identity = info.server_identity(session.params, options)
    except Exception as e:  # extra information: a server that answers the load must not fail for it
        session.identity_error = f"{type(e).__name__}: {e}"
    params, session.monitor_problem = monitor_route(session)
    if _runs_pool(session):
        session.pool_probe = pool_probe.PoolProbe()
    else:
        handling = session.identity.thread_handling if session.identity is not None else None
        session.pool_reason = f"the server runs no thread pool (thread_handling {handling or 'unknown'})"
    # Connected (and a first sample taken) here, before the load opens its connections.
    session.sampler = info.StatusSampler(
        params, server_pid=session.server.pid if session.server is not None else None,
        probes=[session.pool_probe] if session.pool_probe is not None else []).start()
    try:
        yield
    finally:
        session.sampler.stop()


def _runs_pool(session: TargetSession) -> bool:
    if session.identity is not None:
        return session.identity.thread_pool
    return session.server is not None and server_options.thread_pool(session.server.target.options)


def pool_series(session: TargetSession, outcome: Measured) -> PoolSeries | None:
    """The monitor's per-second thread and pool figures over the run, warm-up included; None
    when the monitor took no sample."""
    sampler = session.sampler
    if sampler is None or not sampler.samples:
        return None
    probe = session.pool_probe
    reason = session.pool_reason if probe is None else probe.reason
    if probe is not None and reason is None and not probe.samples:
        reason = f"the monitor read no pool table ({sampler.error or 'no sample'})"
    window_start = outcome.started_at + outcome.warmup_s
    return pool_figures.pool_series([(t, status) for t, status, _ in sampler.samples],
                                    probe.samples if probe is not None else [], started_at=outcome.started_at,
                                    window_start=window_start, ended_at=window_start + outcome.measured_s,
                                    tables_reason=reason)


#: Why the monitor cannot see past a thread pool, for a result's ``server.count.reason``.
POOL_WITHOUT_EXTRA_PORT = ("the server runs a thread pool without an extra_port: the monitor's SHOW GLOBAL STATUS "
                           "queues behind the load, so its counts are not the window's")


def monitor_route(session: TargetSession) -> tuple[ConnectParams, str | None]:
    """How the status monitor reaches the server without queueing behind the load (a thread
    pool's extra_port where there is one), and why its counts cannot be trusted where not."""
    if session.server is not None:
        if session.server.monitored_past_pool:
            return session.server.monitor_params(), None
        if server_options.thread_pool(session.server.target.options):
            return session.params, POOL_WITHOUT_EXTRA_PORT
        return session.params, None
    ident = session.identity
    if ident is None or not ident.thread_pool:
        return session.params, None
    if ident.extra_port and session.params.host:
        return dataclasses.replace(session.params, port=ident.extra_port, unix_socket=None), None
    return session.params, POOL_WITHOUT_EXTRA_PORT


def server_count(counter: ServerCounter | None, session: TargetSession,
                 deltas: dict[str, int] | None) -> ServerCount | None:
    """The server's count of the window's transactions from the monitor's ``deltas`` (None: no
    report), or the reason it is n/a; None when the run named no counter."""
    if counter is None:
        return None
    if counter.reason is not None:
        return ServerCount(reason=counter.reason)
    named = ServerCount(counter=list(counter.counters), per_transaction=counter.per_transaction)
    problem = session.monitor_problem
    if problem is None and (session.sampler is None or session.sampler.error is not None or deltas is None):
        error = session.sampler.error if session.sampler is not None else None
        problem = f"no SHOW GLOBAL STATUS over the window ({error or 'nothing measured'})"
    n = counter.transactions(deltas or {}) if problem is None else None
    if problem is None and n is None:
        problem = f"the server has no {' or '.join(counter.counters)} counter"
    return named.model_copy(update={"server_transactions": n, "reason": problem})


def report(session: TargetSession, outcome: Measured, counter: ServerCounter | None = None, *,
           to_end: bool = False) -> ServerReport:
    """The result's ``server`` field for a finished load ``outcome``, with the server's count of
    its transactions by ``counter`` (the workload's: services.workload.server_counter); ``to_end``:
    the client's totals are a whole process's run (sysbench), so the server's count runs to its end."""
    out: dict[str, Any] = {"identity_error": session.identity_error}
    if session.identity is not None:
        # The live values of secret-named options stay on the worker: the result is stored and exported.
        out.update(version=session.identity.version, version_comment=session.identity.version_comment,
                   variables=server_options.hide_secrets(session.identity.variables))
    t0 = outcome.started_at + outcome.warmup_s
    if session.sampler is not None and outcome.measured_s > 0:
        st = session.sampler.report(t0, t0 + outcome.measured_s)
        out.update(status_deltas=st.status_deltas, status_end=st.status_end, status_samples=st.status_samples,
                   threads_running_peak=st.threads_running_peak, server_cpu_s=st.server_cpu_s,
                   status_error=st.status_error, server_ctxt_switches=st.server_ctxt_switches,
                   disk_read_bytes=st.disk_read_bytes, disk_write_bytes=st.disk_write_bytes)
    deltas = out.get("status_deltas")
    if outcome.server_window is not None and session.sampler is not None and counter is not None:
        # Read where none of the run's transactions ran (sysbench, between its processes): the
        # counters stood still there, so the samples at those instants are the window's edges.
        deltas = info.status_deltas(session.sampler.samples, *outcome.server_window, counter.counters)
    elif to_end and session.sampler is not None and deltas is not None and counter is not None:
        # The client's totals are its whole measured process's: the server's count runs from the
        # window's start to the monitor's last sample, taken after that process ended.
        deltas = info.status_deltas(session.sampler.samples, t0, math.inf, counter.counters)
    out["count"] = server_count(counter, session, deltas)
    out["pool"] = pool_series(session, outcome)
    out["client_cpu_s"] = round(outcome.client_cpu_s, 3)
    out["client_ctxt_switches"] = outcome.client_ctxt_switches
    work = server_work(queries=outcome.totals.queries, transactions=outcome.totals.transactions,
                       status_deltas=out.get("status_deltas", {}), server_cpu_s=out.get("server_cpu_s"),
                       client_cpu_s=outcome.client_cpu_s, server_ctxt_switches=out.get("server_ctxt_switches"),
                       client_ctxt_switches=outcome.client_ctxt_switches,
                       disk_read_bytes=out.get("disk_read_bytes"), disk_write_bytes=out.get("disk_write_bytes"))
    for name, digits in _ROUNDING.items():
        v = getattr(work, name)
        out[name] = None if v is None else round(v, digits)
    return session.base.model_copy(update=out)


#: The per-query figures a result stores, and the digits each keeps (hit ratios: 0.9999 and
#: 0.999 differ by ten times the misses).
_ROUNDING = {"server_cpu_us_per_query": 2, "client_cpu_us_per_query": 2, "server_ctxt_switches_per_query": 3,
             "client_ctxt_switches_per_query": 3, "disk_read_kb_per_transaction": 3,
             "disk_write_kb_per_transaction": 3, "key_cache_hit_ratio": 6, "buffer_pool_hit_ratio": 6}


class Settling:
    """One run's quiesce: ``before_prepare`` ends what a failed run left running, ``settle``
    waits for the target before the warm-up. A managed target that does not settle is restarted."""

    def __init__(self, servers: managed.ServerManager | None, session: TargetSession,
                 spec_target: DsnTarget | ManagedTarget, *, after_failure: bool, stop: threading.Event | None = None):
        self.servers = servers
        self.session = session
        self.waits = quiesce.Quiescer(
            session.params, spec_target.quiesce, field=f"targets.{spec_target.name}.quiesce",
            end_leftovers=after_failure, flush=session.server is not None, managed=session.server is not None,
            stop=stop)
        #: The latest report, also when the target did not settle.
        self.report: QuiesceReport | None = None

    def _guarded(self, step: Callable[[], QuiesceReport | None]) -> None:
        try:
            self.report = step() or self.report
        except quiesce.FlushNotRestored:
            if self.session.server is not None:
                # Its dirty page options may still be 0: a fresh start puts its own back.
                self.session.server.restart_before_reuse = True
            raise
        except TargetUnsettled as e:
            if self.session.server is not None and self.servers is not None:
                # A fresh server for the retry, without the statements that would not end.
                e.report = e.report.model_copy(update={"restarted": self.servers.restart()})
            self.report = e.report
            raise

    def before_prepare(self) -> None:
        self._guarded(self.waits.before_prepare)

    def settle(self) -> None:
        self._guarded(self.waits.settle)


def settling_for(servers: managed.ServerManager | None, session: TargetSession,
                 spec_target: DsnTarget | ManagedTarget, *, after_failure: bool,
                 stop: threading.Event | None = None) -> Settling | None:
    """The run's Settling, or None when the target's quiesce is off."""
    if not spec_target.quiesce.enabled:
        return None
    return Settling(servers, session, spec_target, after_failure=after_failure, stop=stop)
