"""What a run records about the server: version, effective option values, SHOW GLOBAL STATUS
deltas over the measured interval, the Threads_running peak, and server CPU seconds.

A sampler thread reads SHOW GLOBAL STATUS (and the server's /proc CPU time when the server
runs on this host) every ``interval`` seconds on a connection of its own. The load engine
reports the measured interval only afterwards, so counters are interpolated linearly between
the two samples around each end of it; at steady load that error is a fraction of one
interval's worth of queries. The sampler's own statements (about 2 per second) are included
in Questions. The pure parts (interpolation, deltas, /proc parsing) are tested on literal data.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from services.common import logs, server_options
from services.worker.target.dsn import connect

log = logs.get(__name__)

#: Counters reported as deltas over the measured interval.
COUNTERS = (
    "Questions", "Queries", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_replace",
    "Com_begin", "Com_commit", "Com_rollback", "Com_stmt_execute", "Com_stmt_prepare",
    "Key_reads", "Key_read_requests", "Key_writes", "Key_write_requests",
    "Threads_created", "Connections", "Aborted_connects", "Aborted_clients",
    "Innodb_buffer_pool_reads", "Innodb_buffer_pool_read_requests",
    "Innodb_rows_read", "Innodb_rows_inserted", "Innodb_rows_updated", "Innodb_rows_deleted",
    "Innodb_row_lock_waits", "Table_locks_waited", "Table_locks_immediate",
    "Created_tmp_tables", "Created_tmp_disk_tables", "Select_range", "Select_scan", "Sort_rows",
    "Bytes_received", "Bytes_sent",
)
#: Gauges reported as their value at the end of the measured interval.
GAUGES = ("Key_blocks_used", "Key_blocks_unused", "Threads_connected", "Threads_cached",
          "Innodb_buffer_pool_pages_free", "Open_tables")
#: Default seconds between samples.
INTERVAL_S = 0.5

Sample = tuple[float, dict[str, float], float | None]  # (wall time, status, server cpu s)


# ------------------------------------------------------------------------------- pure parts


def proc_cpu_seconds(stat_text: str, ticks_per_s: float) -> float:
    """utime + stime of a /proc/<pid>/stat line (all threads), in seconds."""
    # The command name may contain spaces and parentheses: fields start after the last ')'.
    fields = stat_text[stat_text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def _value_at(samples: Sequence[Sample], t: float, get) -> float | None:
    """Linear interpolation of ``get(sample)`` at wall time ``t`` (clamped to the ends)."""
    pts = [(s[0], get(s)) for s in samples if get(s) is not None]
    if not pts:
        return None
    if t <= pts[0][0]:
        return pts[0][1]
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return pts[-1][1]


def status_deltas(samples: Sequence[Sample], t0: float, t1: float,
                  counters: Sequence[str] = COUNTERS) -> dict[str, int]:
    """Counter increase between wall times ``t0`` and ``t1`` (rounded to whole counts)."""
    out = {}
    for name in counters:
        a = _value_at(samples, t0, lambda s: s[1].get(name))
        b = _value_at(samples, t1, lambda s: s[1].get(name))
        if a is not None and b is not None:
            out[name] = int(round(b - a))
    return out


def peak(samples: Sequence[Sample], t0: float, t1: float, name: str = "Threads_running") -> int | None:
    """The highest sampled value of gauge ``name`` within [t0, t1] (or the nearest sample)."""
    inside = [s[1][name] for s in samples if t0 <= s[0] <= t1 and name in s[1]]
    if not inside:
        near = [s for s in samples if name in s[1]]
        if not near:
            return None
        inside = [min(near, key=lambda s: abs(s[0] - t1))[1][name]]
    return int(max(inside))


def effective_names(options: Mapping[str, Any]) -> dict[str, str]:
    """spec option name -> the variable name to look up (`skip-name-resolve` -> skip_name_resolve)."""
    return {name: server_options.normalise(name).removeprefix("loose_") for name in options}


# ------------------------------------------------------------------------------- I/O parts


def read_proc_cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return proc_cpu_seconds(f.read(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class ServerIdentity:
    """What answered: its version, and the effective value of every option the spec set."""

    version: str
    version_comment: str
    variables: dict[str, str | None]


@dataclass(frozen=True)
class StatusReport:
    """What SHOW GLOBAL STATUS (and /proc) said about the measured interval."""

    status_deltas: dict[str, int]
    status_end: dict[str, int]
    status_samples: int
    threads_running_peak: int | None
    server_cpu_s: float | None
    status_error: str | None


def server_identity(params: Mapping[str, Any], options: Mapping[str, Any]) -> ServerIdentity:
    """Server version and the effective value of every option the spec set."""
    conn = connect(params)
    try:
        cur = conn.cursor()
        cur.execute("SELECT VERSION(), @@version_comment")
        version, comment = cur.fetchone()
        names = effective_names(options)
        wanted = sorted({v.upper() for v in names.values()} | {v.upper().removeprefix("SKIP_") for v in names.values()})
        values: dict[str, str] = {}
        if wanted:
            cur.execute(
                "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
                f"WHERE VARIABLE_NAME IN ({', '.join(['%s'] * len(wanted))})", tuple(wanted))
            values = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        effective = {}
        for spec_name, var in names.items():
            effective[spec_name] = values.get(var, values.get(var.removeprefix("skip_")))
        return ServerIdentity(str(version), str(comment), effective)
    finally:
        conn.close()


class StatusSampler:
    """Samples SHOW GLOBAL STATUS (and server CPU) in a thread between start() and stop()."""

    def __init__(self, params: Mapping[str, Any], *, server_pid: int | None = None, interval: float = INTERVAL_S):
        self.params = dict(params)
        self.server_pid = server_pid
        self.interval = interval
        self.samples: list[Sample] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Any = None

    def _sample(self) -> None:
        cur = self._conn.cursor()
        cur.execute("SHOW GLOBAL STATUS")
        status: dict[str, float] = {}
        for name, value in cur.fetchall():
            try:
                status[str(name)] = float(value)
            except (TypeError, ValueError):
                pass
        cpu = read_proc_cpu(self.server_pid) if self.server_pid else None
        self.samples.append((time.time(), status, cpu))

    def start(self) -> "StatusSampler":
        try:
            self._conn = connect(self.params)
            self._sample()
        except Exception as e:  # status is extra information: never fail a run for it
            self.error = f"{type(e).__name__}: {e}"
            return self
        self._thread = threading.Thread(target=self._loop, name="status-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except Exception as e:
                self.error = f"{type(e).__name__}: {e}"
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._conn is not None:
            try:
                if self.error is None:
                    self._sample()
                self._conn.close()
            except Exception as e:
                self.error = self.error or f"{type(e).__name__}: {e}"

    def report(self, t0: float, t1: float) -> StatusReport:
        """What the server did between wall times ``t0`` and ``t1`` (the measured interval)."""
        end = {}
        for g in GAUGES:
            v = _value_at(self.samples, t1, lambda s: s[1].get(g))
            if v is not None:
                end[g] = int(round(v))
        a = _value_at(self.samples, t0, lambda s: s[2])
        b = _value_at(self.samples, t1, lambda s: s[2])
        return StatusReport(status_deltas=status_deltas(self.samples, t0, t1), status_end=end,
                            status_samples=len(self.samples), threads_running_peak=peak(self.samples, t0, t1),
                            server_cpu_s=round(b - a, 3) if a is not None and b is not None else None,
                            status_error=self.error)
