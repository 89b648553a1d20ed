"""How the native driver spreads connections over load processes, and which process drives its
connection with blocking calls."""

from __future__ import annotations

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.native.core import runs_blocking
from services.worker.driver.native.parent import OWN_PROCESS_MAX_PER_CPU, _plan
from services.worker.driver.native.protocol import Job
from services.worker.target.connect_params import ConnectParams


def test_low_concurrency_gives_each_connection_its_own_process():
    """Up to OWN_PROCESS_MAX_PER_CPU connections per client CPU, one process per connection,
    spread over the CPUs; above it, one process per CPU with the connections dealt round-robin."""
    assert OWN_PROCESS_MAX_PER_CPU == 4
    assert _plan(1, [1], None) == [((0,), (1,))]
    assert _plan(4, [1], None) == [((0,), (1,)), ((1,), (1,)), ((2,), (1,)), ((3,), (1,))]
    assert _plan(3, [2, 3], None) == [((0,), (2,)), ((1,), (3,)), ((2,), (2,))]
    assert _plan(16, [1], None) == [(tuple(range(16)), (1,))]
    assert _plan(10, [0, 1], None) == [((0, 2, 4, 6, 8), (0,)), ((1, 3, 5, 7, 9), (1,))]
    assert _plan(4, [1], 1) == [((0, 1, 2, 3), (1,))]  # an explicit process count wins


def _job(threads: tuple[int, ...], rate: float = 0.0) -> Job:
    return Job(ConnectParams(), WorkloadSpec(name="oltp_point_select"), DataShape(), threads, 4, 1, (), rate=rate)


def test_only_a_lone_closed_loop_connection_blocks():
    """A process's only connection in closed loop uses blocking calls; several connections, or open
    loop (which waits for arrivals on timers), keep the epoll loop."""
    assert runs_blocking(_job((0,)))
    assert not runs_blocking(_job((0, 1)))
    assert not runs_blocking(_job((0,), rate=100.0))
