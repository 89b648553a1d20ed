"""The thread-pool study's spec: windows long enough for 10 transactions a connection at every
thread count by the response times the issue measured, and the pool's exact queue statistics."""

from __future__ import annotations

from pathlib import Path

from services.common.spec import server_options
from services.common.spec.loading import load_spec
from services.scheduler.windows import MeasuredCell, window_warnings

SPEC = Path(__file__).resolve().parents[2] / "examples" / "studies" / "thread-pool.yaml"
#: One oltp_read_write transaction at 4096 clients took about 7 s on this machine, and the median
#: latency doubled with the client count (the previous campaign of this study).
SECONDS_AT_4096 = 7.0


def measured(threads: list[int], targets: list[str], workloads: list[str]) -> list[MeasuredCell]:
    return [MeasuredCell(t, w, n, "previous", SECONDS_AT_4096 * n / 4096, 3)
            for t in targets for w in workloads for n in threads]


def test_the_plan_warns_of_no_short_window_at_the_response_times_measured_before():
    spec = load_spec(SPEC)
    cells = measured(list(spec.threads), [t.name for t in spec.targets], [w.key for w in spec.workloads])
    assert window_warnings(spec, cells) == []


def test_the_old_three_second_windows_would_have_been_warned_of():
    """The rule does warn: the previous spec's 3 s at every thread count is short from 4096 down to 1024."""
    spec = load_spec(SPEC).model_copy(update={"duration": 3.0, "duration_by_threads": {}})
    warned = window_warnings(spec, measured([256, 1024, 2048, 4096], ["pool"], ["oltp_read_write"]))
    assert [w.split(":")[0] for w in warned] == [f"pool / oltp_read_write / {n} threads" for n in (256, 1024, 2048, 4096)]


def test_the_pool_keeps_exact_queue_statistics_and_a_dedicated_listener():
    pool = next(t for t in load_spec(SPEC).targets if t.name == "pool")
    assert pool.options["thread_pool_exact_stats"] is True and pool.options["thread_pool_dedicated_listener"] is True
    assert all(server_options.name_problem(k) is None for k in pool.options)
