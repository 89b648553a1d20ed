"""The server side of one run: reach (or start) the target, then record what the server did.

The runner calls open_target() before preparing tables, wraps the load in sampling(), and
puts report() into the result's ``server`` field:

  kind, version, version_comment      what answered
  options, variables                  the spec's options and their effective values
  binary, server_cpus, client_cpus,   managed targets only: the build, the pinning, the start
  start_s, reused, pid                (template copy to ready) or reuse of the previous run's
  status_deltas, status_end,          SHOW GLOBAL STATUS over the measured interval
  threads_running_peak
  server_cpu_s, client_cpu_s,         CPU seconds over the measured interval (server: /proc,
  server_cpu_us_per_query, ...        managed targets only)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from services.common import logs, server_options
from services.common.errors import TargetError
from services.common.spec import DataShape, ManagedTarget
from services.worker.target import dsn, info, managed

log = logs.get(__name__)


@dataclass
class TargetSession:
    params: dict[str, Any]
    client_cpus: list[int] | None
    server: managed.ManagedServer | None = None
    info: dict[str, Any] = field(default_factory=dict)
    sampler: info.StatusSampler | None = None


def open_target(servers: managed.ServerManager | None, spec_target: Any, data: DataShape,
                client_cpus: list[int] | None) -> TargetSession:
    """Connection parameters for the run (starting a managed server, through the worker's
    ``servers``, when the target is one); raise TargetError naming the field to fix."""
    if isinstance(spec_target, ManagedTarget):
        if servers is None:
            raise TargetError("kind", "this worker was started without managed servers")
        server = servers.ensure(spec_target, data, client_cpus)
        info = {"kind": "managed", "binary": str(server.binary), "options": dict(spec_target.options),
                "server_cpus": server_options.format_cpus(server.server_cpus),
                "client_cpus": server_options.format_cpus(server.client_cpus),
                "reused": server.reused, "start_s": round(server.start_s, 3), "pid": server.pid,
                "port": server.port}
        return TargetSession(server.connect_params(), server.client_cpus, server, info)
    # A dsn run must have the machine alone: stop a managed server left by earlier runs.
    if servers is not None:
        servers.release()
    return TargetSession(dsn.connect_params(spec_target), client_cpus, None, {"kind": "dsn"})


@contextlib.contextmanager
def sampling(session: TargetSession) -> Iterator[None]:
    """Sample the server's status (and CPU) while the load runs."""
    options = session.server.target.options if session.server is not None else {}
    try:
        session.info.update(info.server_identity(session.params, options))
    except Exception as e:  # extra information: a server that answers the load must not fail for it
        session.info["identity_error"] = f"{type(e).__name__}: {e}"
    session.sampler = info.StatusSampler(
        session.params, server_pid=session.server.pid if session.server is not None else None).start()
    try:
        yield
    finally:
        session.sampler.stop()


def report(session: TargetSession, outcome: Any) -> dict[str, Any]:
    """The result's ``server`` field for a finished load ``outcome`` (a loadgen.LoadOutcome)."""
    out = dict(session.info)
    t0 = outcome.started_at + outcome.warmup_s
    t1 = t0 + outcome.measured_s
    if session.sampler is not None and outcome.measured_s > 0:
        out.update(session.sampler.report(t0, t1))
    client_cpu = getattr(outcome, "client_cpu_s", None)
    if client_cpu is not None:
        out["client_cpu_s"] = round(client_cpu, 3)
    queries = outcome.totals.queries
    if queries:
        if "server_cpu_s" in out:
            out["server_cpu_us_per_query"] = round(1e6 * out["server_cpu_s"] / queries, 2)
        if client_cpu:
            out["client_cpu_us_per_query"] = round(1e6 * client_cpu / queries, 2)
    return out
