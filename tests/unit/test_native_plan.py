"""How the native driver spreads connections over load processes, and which process drives its
connection with blocking calls."""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.native.core import runs_blocking
from services.worker.driver.native.parent import LOOPS_PER_CPU, OWN_PROCESS_MAX_PER_CPU, _plan, loops_for, programs_for
from services.worker.driver.native.protocol import Job
from services.worker.target.connect_params import ConnectParams

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
