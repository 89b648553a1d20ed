"""What a run records about the server: version, effective option values, SHOW GLOBAL STATUS
deltas over the measured interval, the Threads_running peak, and the server process's CPU
seconds, context switches and disk bytes.

A sampler thread reads the global status (and the server's /proc counters when the server
runs on this host) every ``interval`` seconds, and at instants asked for (a window's edges), on
a connection of its own. Each sample is dated by the server's own clock, read in the same
statement as the counters (status_clock.py), so a slow reply under load does not misdate it.
Counters are interpolated linearly between the samples around an instant. The sampler's own
statements are included in Questions; its SELECTs are taken out of Com_select, which counts the
load's autocommit transactions. The pure parts (interpolation, deltas, /proc parsing) are tested
on literal data.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from services.common import logs
from services.common.spec import server_options
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connect
from services.worker.target.status_clock import CALIBRATION_SAMPLES, DATED_STATUS, clock_offset, dated_status

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
#: Server threads whose context switches the sampler reads per second at most. One thread's
#: /proc/PID/task/TID/status costs the worker about 23 us of CPU (bench/sampler: 94 ms a sample
#: at 4096 threads, 19 % of a core every 0.5 s), so this keeps it near 1 % of a core.
SWITCH_READS_PER_S = 400

Sample = tuple[float, dict[str, float], float | None]  # (wall time, status, server cpu s)

@dataclass(frozen=True)
class ProcSample:
    """The server process's cumulative counters at wall time ``t``; None where unreadable."""

    t: float
    #: Voluntary + involuntary context switches of its threads, summed as SwitchTotal keeps them.
    ctxt_switches: int | None
    #: /proc/PID/io read_bytes and write_bytes: what the process made the block layer read or write.
    read_bytes: int | None
    write_bytes: int | None


# ------------------------------------------------------------------------------- pure parts


def proc_cpu_seconds(stat_text: str, ticks_per_s: float) -> float:
    """utime + stime of a /proc/<pid>/stat line (all threads), in seconds."""
    # The command name may contain spaces and parentheses: fields start after the last ')'.
    fields = stat_text[stat_text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def task_switches(status_text: str) -> int:
    """voluntary_ctxt_switches + nonvoluntary_ctxt_switches of a /proc/PID/task/TID/status text."""
    total = 0
    for line in status_text.splitlines():
        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
            total += int(line.split(":", 1)[1])
    return total


def switches_interval(threads: int, interval_s: float) -> float:
    """Seconds between two reads of a server's per-thread context switches: every sample while
    its threads are few, less often with many (the counts are interpolated between reads)."""
    return max(interval_s, threads / SWITCH_READS_PER_S)


def proc_io_bytes(io_text: str) -> tuple[int, int]:
    """(read_bytes, write_bytes) of a /proc/PID/io text."""
    fields = dict(line.split(":", 1) for line in io_text.splitlines() if ":" in line)
    return int(fields["read_bytes"]), int(fields["write_bytes"])


class SwitchTotal:
    """A process's context switches as one count that only grows, from per-thread counts.

    /proc/PID/status counts the main thread only, and a thread's counts vanish with it, so the
    sum over threads would drop when a connection thread exits. Each sample adds what every
    thread did since the previous one (a thread not seen before: all it did); switches of a
    thread between its last sample and its exit are lost, a few at most."""

    def __init__(self) -> None:
        self.total = 0
        self._last: dict[int, int] = {}

    def add(self, by_thread: Mapping[int, int]) -> int:
        """Take one sample of ``thread id -> switches``; return the total so far."""
        last = self._last
        self.total += sum(max(0, n - last.get(tid, 0)) for tid, n in by_thread.items())
        self._last = dict(by_thread)
        return self.total


def _interpolate(pts: Sequence[tuple[float, float]], t: float) -> float | None:
    """Linear interpolation of (time, value) points at time ``t`` (clamped to the ends)."""
    if not pts:
        return None
    if t <= pts[0][0]:
        return pts[0][1]
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return pts[-1][1]


def _value_at(samples: Sequence[Sample], t: float, get) -> float | None:
    """Linear interpolation of ``get(sample)`` at wall time ``t`` (clamped to the ends)."""
    return _interpolate([(s[0], get(s)) for s in samples if get(s) is not None], t)


def proc_delta(samples: Sequence[ProcSample], t0: float, t1: float, name: str) -> int | None:
    """Increase of counter ``name`` of the process samples between wall times ``t0`` and ``t1``."""
    pts = [(s.t, float(getattr(s, name))) for s in samples if getattr(s, name) is not None]
    a, b = _interpolate(pts, t0), _interpolate(pts, t1)
    return int(round(b - a)) if a is not None and b is not None else None


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


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


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


def read_thread_switches(pid: int) -> dict[int, int] | None:
    """thread id -> context switches of every thread of process ``pid``; None if it is gone."""
    out: dict[int, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[int(tid)] = task_switches(f.read())
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
    return out


def read_proc_io(pid: int) -> tuple[int, int] | None:
    """(read_bytes, write_bytes) of process ``pid``; None when unreadable (another user's
    process without the privilege to trace it, or a kernel without I/O accounting)."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return proc_io_bytes(f.read())
    except (OSError, ValueError, KeyError):
        return None


@dataclass(frozen=True)
class ServerIdentity:
    """What answered: its version, and the effective value of every option the spec set."""

    version: str
    version_comment: str
    variables: dict[str, str | None]
    #: @@thread_handling and @@extra_port (0: none; None where the server has no such variable).
    thread_handling: str | None = None
    extra_port: int | None = None

    @property
    def thread_pool(self) -> bool:
        return (self.thread_handling or "").replace("-", "_") == "pool_of_threads"


@dataclass(frozen=True)
class StatusReport:
    """What SHOW GLOBAL STATUS (and /proc) said about the measured interval."""

    status_deltas: dict[str, int]
    status_end: dict[str, int]
    status_samples: int
    threads_running_peak: int | None
    server_cpu_s: float | None
    status_error: str | None
    #: The server process over the interval (managed targets; None for dsn targets).
    server_ctxt_switches: int | None = None
    disk_read_bytes: int | None = None
    disk_write_bytes: int | None = None


def server_identity(params: ConnectParams, options: Mapping[str, Any]) -> ServerIdentity:
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
        cur.execute("SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
                    "WHERE VARIABLE_NAME IN ('THREAD_HANDLING', 'EXTRA_PORT')")
        threads = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        extra = threads.get("extra_port")
        return ServerIdentity(str(version), str(comment), effective, thread_handling=threads.get("thread_handling"),
                              extra_port=int(extra) if extra and extra.isdigit() else None)
    finally:
        conn.close()


class Probe(Protocol):
    """More the sampler reads on its connection after each status sample (the thread pool's
    tables: pool_probe.py); it keeps what it read and never raises."""

    #: (wall time, SELECTs sent): the server counts them in Com_select, which the sampler corrects.
    selects: list[tuple[float, int]]

    def sample(self, cursor: Any, now: float) -> None: ...


class StatusSampler:
    """Samples the global status (and server CPU) in a thread between start() and stop()."""

    def __init__(self, params: ConnectParams, *, server_pid: int | None = None, interval: float = INTERVAL_S,
                 probes: Sequence[Probe] = ()):
        self.params = params
        self.probes = tuple(probes)
        self.server_pid = server_pid
        self.interval = interval
        self.samples: list[Sample] = []
        self.proc_samples: list[ProcSample] = []
        self._switches = SwitchTotal()
        #: When the server's threads are read next (switches_interval).
        self._switches_due = 0.0
        self.error: str | None = None
        #: The server's clock minus the worker's (clock_offset); None: the samples are dated by
        #: their round trip's midpoint (a server without information_schema.GLOBAL_STATUS).
        self.offset: float | None = None
        #: information_schema's upper-case status names -> SHOW GLOBAL STATUS's.
        self._names: dict[str, str] = {}
        #: The SELECTs this connection sent (DATED_STATUS's): each counted in Com_select.
        self._own_selects = 0
        #: Wall-clock instants still to sample at (the measured window's edges), and the stop;
        #: the condition wakes the loop for either, and read_now() for a sample taken.
        self._edges: list[float] = []
        self._stopping = False
        self._wake = threading.Condition()
        #: When the latest sample's statement was sent, on the worker's clock.
        self._last_sent = 0.0
        self._thread: threading.Thread | None = None
        self._conn: Any = None

    def _read(self, cur: Any) -> tuple[float, dict[str, float], float]:
        """(sent, status, its instant on the worker's clock) of one reading."""
        sent = time.time()
        if self.offset is None:
            cur.execute("SHOW GLOBAL STATUS")
            status = {str(k): float(v) for k, v in cur.fetchall() if _is_number(v)}
            # The server read its counters somewhere between the send and the reply.
            now = (sent + time.time()) / 2
        else:
            cur.execute(DATED_STATUS)
            status, server_t = dated_status(cur.fetchall(), self._names)
            self._own_selects += 1
            now = server_t - self.offset
        if "Com_select" in status:
            # Its own SELECTs (this one included: Com_select counts a statement as it begins)
            # and its probes' are the monitor's, not the load's.
            status["Com_select"] -= self._own_selects + sum(n for p in self.probes for _, n in p.selects)
        return sent, status, now

    def _sample(self, *, last: bool = False) -> None:
        cur = self._conn.cursor()
        sent, status, now = self._read(cur)
        cpu = read_proc_cpu(self.server_pid) if self.server_pid else None
        self.samples.append((now, status, cpu))
        for probe in self.probes:
            probe.sample(cur, now)
        if self.server_pid:
            switches = None
            if last or now >= self._switches_due:
                threads = read_thread_switches(self.server_pid)
                if threads is not None:
                    switches = self._switches.add(threads)
                    self._switches_due = now + switches_interval(len(threads), self.interval)
            io = read_proc_io(self.server_pid)
            self.proc_samples.append(ProcSample(now, switches, *(io if io is not None else (None, None))))
        with self._wake:
            self._last_sent = sent
            self._wake.notify_all()

    def _calibrate(self) -> None:
        """Date samples by the server's clock where it can: learn the status names, then the
        offset from a few quiet trips (before the load, round trips are shortest)."""
        cur = self._conn.cursor()
        cur.execute("SHOW GLOBAL STATUS")
        self._names = {str(k).upper(): str(k) for k, _ in cur.fetchall()}
        trips = []
        try:
            # UTC: UNIX_TIMESTAMP of a local time is ambiguous in the hour a clock goes back.
            cur.execute("SET time_zone = '+00:00'")
            for _ in range(CALIBRATION_SAMPLES):
                sent = time.time()
                # Counted in Com_select even when it fails on a missing table.
                self._own_selects += 1
                cur.execute(DATED_STATUS)
                _, server_t = dated_status(cur.fetchall(), self._names)
                trips.append((sent, time.time(), server_t))
        except Exception as e:  # a server without the table: the round trip dates its samples
            log.info("status samples dated by their round trip: %s", e)
            return
        self.offset = clock_offset(trips)

    def start(self) -> "StatusSampler":
        try:
            self._conn = connect(self.params)
            self._calibrate()
            self._sample()
        except Exception as e:  # status is extra information: never fail a run for it
            self.error = f"{type(e).__name__}: {e}"
            return self
        self._thread = threading.Thread(target=self._loop, name="status-sampler", daemon=True)
        self._thread.start()
        return self

    def sample_at(self, *instants: float) -> None:
        """Also sample at these wall-clock instants: the measured window's first and last, so
        its counters are read there rather than interpolated between samples."""
        with self._wake:
            self._edges = sorted([*self._edges, *instants])
            self._wake.notify_all()

    def read_now(self, timeout: float = 10.0) -> float | None:
        """Sample now and wait for it; the sample's instant, or None when the sampler is not
        running or gave no sample in ``timeout`` seconds. For an instant at which no transaction
        of the run is running (between sysbench's processes): the counters stand still there,
        so the reading is exact however long it took."""
        asked = time.time()
        with self._wake:
            if self._thread is None or not self._thread.is_alive() or self._stopping:
                return None
            self._edges = sorted([*self._edges, asked])
            self._wake.notify_all()
            give_up = time.monotonic() + timeout
            while self._last_sent < asked:
                left = give_up - time.monotonic()
                if left <= 0 or self.error is not None or not self._thread.is_alive():
                    return None
                self._wake.wait(min(left, 0.1))
            return self.samples[-1][0]

    def _wait(self, regular: float) -> bool:
        """Sleep until the next regular sample or edge; False when stopped."""
        with self._wake:
            while not self._stopping:
                now = time.time()
                due = min([regular, *self._edges])
                if now >= due:
                    self._edges = [e for e in self._edges if e > now]
                    return True
                self._wake.wait(due - now)
            return False

    def _loop(self) -> None:
        regular = time.time() + self.interval
        while self._wait(regular):
            try:
                self._sample()
            except Exception as e:
                self.error = f"{type(e).__name__}: {e}"
                return
            if time.time() >= regular:
                regular = time.time() + self.interval

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(10)
        if self._conn is not None:
            try:
                if self.error is None:
                    self._sample(last=True)
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
                            status_error=self.error,
                            server_ctxt_switches=proc_delta(self.proc_samples, t0, t1, "ctxt_switches"),
                            disk_read_bytes=proc_delta(self.proc_samples, t0, t1, "read_bytes"),
                            disk_write_bytes=proc_delta(self.proc_samples, t0, t1, "write_bytes"))
