"""The thread-pool study's spec: windows long enough for 10 transactions a connection at every
thread count by the response times the issue measured, and the pool's exact queue statistics."""

from __future__ import annotations

from pathlib import Path

from services.common.spec import server_options
from services.common.spec.loading import load_spec
from services.scheduler.windows import MeasuredCell, window_warnings

SPEC = Path(__file__).resolve().parents[2] / "examples" / "studies" / "thread-pool.yaml"
#: The campaign of 2026-12-01 put a transaction at 4096 clients at about 7 s, the median latency
#: doubling with the client count; the shorter tests held that in the campaign of 2026-12-05.
SECONDS_AT_4096 = 7.0
#: oltp_read_write's slowest mean response times in the campaign of 2026-12-05: 2.4 transactions
#: per connection in 80 s at 4096 clients, 5.6 in 40 s at 2048.
READ_WRITE_SECONDS = {2048: 40 / 5.6, 4096: 80 / 2.4}


def response_s(workload: str, threads: int) -> float:
    if workload == "oltp_read_write" and threads in READ_WRITE_SECONDS:
        return READ_WRITE_SECONDS[threads]
    return SECONDS_AT_4096 * threads / 4096


def measured(threads: list[int], targets: list[str], workloads: list[str]) -> list[MeasuredCell]:
    return [MeasuredCell(t, w, n, "previous", response_s(w, n), 3)
            for t in targets for w in workloads for n in threads]


def test_the_plan_warns_of_no_short_window_at_the_response_times_measured_before():
    spec = load_spec(SPEC)
    cells = measured(list(spec.threads), [t.name for t in spec.targets], [w.key for w in spec.workloads])
    assert window_warnings(spec, cells) == []


def test_the_old_three_second_windows_would_have_been_warned_of():
    """The rule does warn: the first campaign's 3 s at every thread count is short from 4096 down to 256."""
    spec = load_spec(SPEC).model_copy(update={"duration": 3.0, "duration_by_threads": {}})
    spec = spec.model_copy(update={"workloads": [w.model_copy(update={"duration_by_threads": None})
                                                 for w in spec.workloads]})
    warned = window_warnings(spec, measured([256, 1024, 2048, 4096], ["pool"], ["oltp_read_only"]))
    assert [w.split(":")[0] for w in warned] == [f"pool / oltp_read_only / {n} threads" for n in (256, 1024, 2048, 4096)]


def test_read_write_without_its_own_windows_is_warned_of_where_its_runs_were_short():
    """The windows every test shares were short for oltp_read_write at 2048 and 4096 clients (the
    campaign of 2026-12-05): without its own windows the plan says so, with them it does not."""
    spec = load_spec(SPEC)
    shared = spec.model_copy(update={"workloads": [w.model_copy(update={"duration_by_threads": None})
                                                   for w in spec.workloads]})
    cells = measured(list(spec.threads), ["pool"], ["oltp_read_write"])
    assert [w.split(":")[0] for w in window_warnings(shared, cells)] == [
        f"pool / oltp_read_write / {n} threads" for n in (2048, 4096)]
    assert window_warnings(spec, cells) == []


def test_the_pool_keeps_exact_queue_statistics_and_a_dedicated_listener():
    pool = next(t for t in load_spec(SPEC).targets if t.name == "pool")
    assert pool.options["thread_pool_exact_stats"] is True and pool.options["thread_pool_dedicated_listener"] is True
    assert all(server_options.name_problem(k) is None for k in pool.options)
