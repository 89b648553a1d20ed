"""How the native driver spreads connections over load processes, and which process drives its
connection with blocking calls."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from pathlib import Path
from types import SimpleNamespace

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.native.core import runs_blocking
from services.worker.driver.native import contention
from services.worker.driver.native.parent import (
    LOOPS_PER_CPU,
    LOOPS_PER_CPU_APART,
    OWN_PROCESS_MAX_PER_CPU,
    SHARED_CPU_BUSY,
    SHARED_LOOPS_PER_CPU,
    _plan,
    loops_for,
    programs_for,
)
from services.worker.driver.native.protocol import Job
from services.common.spec.targets import ManagedTarget
from services.worker.target.managed_template import ServerBuild
from services.worker.target.connect_params import ConnectParams
from services.worker.target.lifecycle import TargetSession
from services.worker.target.local_server import LocalServer
from services.worker.target.managed_server import ManagedServer

ROOT = Path(__file__).resolve().parents[2]


def test_low_concurrency_gives_each_connection_its_own_process():
    """Up to OWN_PROCESS_MAX_PER_CPU connections per client CPU, one process per connection,
    spread over the CPUs; above it, one process on every client CPU drives them all (its event
    loops spread over the CPUs), so a run of thousands of connections pays one interpreter."""
    assert OWN_PROCESS_MAX_PER_CPU == 4
    assert _plan(1, [1], None) == [((0,), (1,))]
    assert _plan(4, [1], None) == [((0,), (1,)), ((1,), (1,)), ((2,), (1,)), ((3,), (1,))]
    assert _plan(3, [2, 3], None) == [((0,), (2,)), ((1,), (3,)), ((2,), (2,))]
    assert _plan(16, [1], None) == [(tuple(range(16)), (1,))]
    assert _plan(10, [0, 1], None) == [(tuple(range(10)), (0, 1))]
    assert _plan(4096, [0, 1], None) == [(tuple(range(4096)), (0, 1))]
    assert _plan(4, [1], 1) == [((0, 1, 2, 3), (1,))]  # an explicit process count wins


def test_event_loops_follow_the_cpus_and_keep_several_connections_each():
    """A process gets LOOPS_PER_CPU loops per CPU (runnable threads are what a CPU shared with
    another process divides its time by), but never a loop for fewer than 4 connections: one
    loop drives up to 7 connections, 16 on one CPU get 4 loops of 4, thousands get 4 per CPU."""
    assert LOOPS_PER_CPU == 4
    assert [loops_for(n, 1) for n in (1, 5, 7, 8, 12, 16, 256, 4096)] == [1, 1, 1, 2, 3, 4, 4, 4]
    assert loops_for(4096, 2) == 8
    assert loops_for(16, 2) == 4


def test_a_server_kept_off_the_client_cpus_gets_one_loop_per_cpu():
    """With the server elsewhere, nothing but the loops runs on a quiet client CPU: one loop per
    CPU finds the most replies waiting per poll (16 connections on one CPU: one loop, not four);
    a busy CPU still gives each connection a loop of its own."""
    assert LOOPS_PER_CPU_APART == 1
    assert [loops_for(n, 1, server_apart=True) for n in (1, 7, 8, 16, 256, 4096)] == [1, 1, 1, 1, 1, 1]
    assert loops_for(16, 2, server_apart=True) == 2 and loops_for(4, 2, server_apart=True) == 1
    assert loops_for(16, 1, shared=True, server_apart=True) == 16


def test_the_server_is_apart_only_where_the_worker_knows_it_is():
    """A managed server pinned to other CPUs, or a server reached at a non-loopback address, is
    apart; one sharing a client CPU, an unpinned one, or one on this machine's loopback or socket
    may share the client CPUs."""
    target = ManagedTarget(kind="managed", name="m")
    build = ServerBuild("system", Path("/usr/sbin/mariadbd"), None, "10.11.19-MariaDB", None)

    def managed(server_cpus: list[int], client_cpus: list[int]) -> TargetSession:
        server = ManagedServer(target=target, key="k", build=build, dir=Path("/tmp/x"), port=3307, password="pw",
                               server_cpus=server_cpus, client_cpus=client_cpus)
        return TargetSession(params=server.connect_params(), client_cpus=client_cpus, server=server)

    assert managed([0], [1]).server_apart
    assert not managed([0, 1], [1]).server_apart
    assert not managed([0], []).server_apart

    def dsn(**where: object) -> bool:
        return TargetSession(params=ConnectParams(**where), client_cpus=None).server_apart

    assert dsn(host="db1.example", port=3306) and dsn(host="10.0.0.7", port=3306)
    assert not dsn(host="127.0.0.1", port=3306) and not dsn(host="localhost", port=3306)
    assert not dsn(host="::1", port=3306) and not dsn(unix_socket="/run/mysqld/mysqld.sock")


def test_only_a_managed_server_that_may_share_the_client_cpus_is_discounted_from_their_busy_share():
    """The worker knows a managed server's process: where it may run on the client CPUs, its work
    there is the run's own, not another process's; pinned apart, or not started, or a dsn
    target's server (whose process the worker does not know), nothing is discounted."""
    target = ManagedTarget(kind="managed", name="m")
    build = ServerBuild("system", Path("/usr/sbin/mariadbd"), None, "10.11.19-MariaDB", None)

    def session(server_cpus: list[int], client_cpus: list[int], pid: int | None) -> TargetSession:
        server = ManagedServer(target=target, key="k", build=build, dir=Path("/tmp/x"), port=3307, password="pw",
                               server_cpus=server_cpus, client_cpus=client_cpus,
                               proc=SimpleNamespace(pid=pid) if pid else None)  # type: ignore[arg-type]
        return TargetSession(params=server.connect_params(), client_cpus=client_cpus, server=server)

    assert session([0, 1], [1], 4321).local_server == LocalServer(4321, (0, 1))
    assert session([0], [1], 4321).local_server is None
    assert session([0, 1], [1], None).local_server is None
    assert TargetSession(params=ConnectParams(host="127.0.0.1", port=3306), client_cpus=None).local_server is None
    # An unpinned server on two CPUs is taken to spend half its time on a client CPU of them.
    assert LocalServer(1, (0, 1)).share_on((1,)) == 0.5
    assert LocalServer(1, (0, 1)).share_on((0, 1)) == 1.0 and LocalServer(1, (0,)).share_on((1,)) == 0.0


def test_the_servers_own_ticks_come_out_of_the_busy_share():
    """cpu1 was busy 40 of 40 ticks; 30 of them the server's own leave a quarter busy, and more
    than the CPUs' busy ticks never reads below nothing. A process's ticks are its user and system
    fields, counted after its name, which may hold spaces and parentheses."""
    before, after = contention.cpu_ticks(_STAT_BEFORE, (1,)), contention.cpu_ticks(_STAT_AFTER, (1,))
    assert contention.busy_share(before, after, 30) == 0.25
    assert contention.busy_share(before, after, 80) == 0.0
    stat = "4321 (mysqld (a) b) S 1 4321 4321 0 -1 4194560 5000 0 0 0 170 35 0 0 20 0 40 0 1234 0 0"
    assert contention.process_ticks(stat) == 205


def test_a_busy_server_beside_the_clients_does_not_read_as_another_process():
    """The work a run before this one left the server (a purge, a flush) kept a client CPU busy:
    discounted as the server's own, its part of the CPU does not count, so on an otherwise quiet CPU
    the run keeps its loops instead of taking one a connection; read as a stranger it reads busy."""
    cpu = max(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        time.sleep(0.3)
        # Other tests may share the CPU too (a parallel suite): the spinner's part, whatever it gets
        # of the CPU beside them, is what the discount takes out.
        as_server = contention.sample_busy_share((cpu,), 0.5, server=LocalServer(busy.pid, (cpu,)))
        as_stranger = contention.sample_busy_share((cpu,), 0.5)
        assert as_stranger > max(SHARED_CPU_BUSY, 0.6)
        assert as_server <= as_stranger - SHARED_CPU_BUSY
    finally:
        busy.kill()
        busy.wait()


def test_on_client_cpus_another_process_keeps_busy_each_connection_gets_a_loop():
    """Beside a CPU hog, 4 loops would get 4/5 of the CPU where sysbench's 16 threads get 16/17,
    so a shared CPU gives each connection a loop of its own, as sysbench gives it a thread, up
    to SHARED_LOOPS_PER_CPU a CPU (32/33 of it beside one hog)."""
    assert SHARED_LOOPS_PER_CPU == 32
    assert [loops_for(n, 1, shared=True) for n in (1, 5, 16, 32, 256, 4096)] == [1, 5, 16, 32, 32, 32]
    assert loops_for(16, 2, shared=True) == 16
    assert loops_for(4096, 2, shared=True) == 64


#: Two CPUs' lines of /proc/stat (user nice system idle iowait irq softirq steal guest guest_nice).
_STAT_BEFORE = """cpu  300 0 100 900 0 0 0 0 0 0
cpu0 100 0 50 800 0 0 0 0 0 0
cpu1 200 0 50 100 0 0 0 0 0 0
intr 1 2 3
"""
_STAT_AFTER = """cpu  340 0 100 920 20 0 0 0 0 0
cpu0 100 0 50 820 20 0 0 0 0 0
cpu1 238 0 52 100 0 0 0 0 0 0
intr 1 2 3
"""


def test_the_busy_share_of_the_client_cpus_counts_only_their_own_lines():
    """cpu1 stayed busy (40 of 40 ticks), cpu0 idle or waiting on I/O (0 of 40): each reads
    alone, and the two together read half busy; the all-CPU line and other lines are ignored."""
    assert contention.cpu_ticks(_STAT_BEFORE, (1,)) == (250, 350)
    assert contention.busy_share(contention.cpu_ticks(_STAT_BEFORE, (1,)), contention.cpu_ticks(_STAT_AFTER, (1,))) == 1.0
    assert contention.busy_share(contention.cpu_ticks(_STAT_BEFORE, (0,)), contention.cpu_ticks(_STAT_AFTER, (0,))) == 0.0
    assert contention.busy_share(contention.cpu_ticks(_STAT_BEFORE, (0, 1)),
                                 contention.cpu_ticks(_STAT_AFTER, (0, 1))) == 0.5
    assert contention.busy_share((5, 10), (5, 10)) == 0.0


def test_a_cpu_hog_on_a_client_cpu_reads_as_shared():
    """A process spinning on the last CPU makes that CPU read busy well past SHARED_CPU_BUSY."""
    cpu = max(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        time.sleep(0.3)
        assert contention.sample_busy_share((cpu,), 0.5) > max(SHARED_CPU_BUSY, 0.6)
    finally:
        hog.kill()
        hog.wait()


def _job(threads: tuple[int, ...], rate: float = 0.0) -> Job:
    programs, program_of = programs_for(WorkloadSpec(name="oltp_point_select"), DataShape(), threads, 4, 1)
    return Job(ConnectParams(), programs, program_of, threads, 4, 1, (), rate=rate)


def test_only_a_lone_closed_loop_connection_blocks():
    """A process's only connection in closed loop uses blocking calls; several connections, or open
    loop (which waits for arrivals on timers), keep the epoll loop."""
    assert runs_blocking(_job((0,)))
    assert not runs_blocking(_job((0, 1)))
    assert not runs_blocking(_job((0,), rate=100.0))


def test_a_load_process_imports_neither_the_spec_parser_nor_the_messages():
    """A load process holds its connections and little else: what it imports (its entry, the load
    core, the pipe messages) leaves out pydantic and the spec and message models, which would
    add about 15 MiB to every load process."""
    code = ("import sys; import services.worker.driver.native.load_process, services.worker.driver.native.child; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' "
            "or m.startswith(('services.common.spec.', 'services.common.messages'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['services.common.spec.ignore_policy']"


def test_a_load_process_starts_with_its_workers_interpreter_flags():
    """A worker run as ``python -I -B -O`` starts its load processes the same way, so they import
    the same code from the same places; a worker without flags passes none."""
    code = "from services.worker.driver.native.load_process import interpreter_flags; print(interpreter_flags())"
    flagged = subprocess.run([sys.executable, "-I", "-B", "-O", "-c", f"import sys; sys.path.insert(0, {repr(str(ROOT))}); {code}"],
                             capture_output=True, text=True, check=True).stdout
    assert eval(flagged) == ["-I", "-E", "-s", "-B", "-P", "-O"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                           env=env).stdout
    assert eval(plain) == []
