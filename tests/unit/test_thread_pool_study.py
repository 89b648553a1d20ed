"""The thread-pool study's spec: windows long enough for 10 transactions a connection at every
measured cell by the rates its pilots measured, and the pool's exact queue statistics."""

from __future__ import annotations

from pathlib import Path

from services.common.spec import server_options
from services.common.spec.loading import load_spec
from services.scheduler.windows import MeasuredCell, window_warnings

SPEC = Path(__file__).resolve().parents[2] / "examples" / "studies" / "thread-pool.yaml"
#: The slower target's transactions per second in the pilots of 2026-12-05 (one run a target and
#: cell, this spec's servers; the spec's comment says the same).
PILOT_TPS = {
    ("oltp_point_select", 1024): 28447, ("oltp_point_select", 2048): 34805, ("oltp_point_select", 4096): 33437,
    ("oltp_read_only", 1024): 1168, ("oltp_read_only", 2048): 1116, ("oltp_read_only", 4096): 1191,
    ("oltp_update_non_index", 1024): 4290, ("oltp_update_non_index", 2048): 2162,
    ("oltp_update_non_index", 4096): 1028,
    ("oltp_read_write", 256): 686, ("oltp_read_write", 1024): 513, ("oltp_read_write", 2048): 245.2,
    ("oltp_read_write", 4096): 103.3,
}


def measured(workloads: list[str] | None = None, threads: list[int] | None = None) -> list[MeasuredCell]:
    """Each piloted cell's mean response time (threads / tps, Little's law), for both targets."""
    return [MeasuredCell(t, w, n, "pilot", n / tps, 1) for (w, n), tps in PILOT_TPS.items()
            for t in ("per-connection", "pool")
            if (workloads is None or w in workloads) and (threads is None or n in threads)]


def test_the_plan_warns_of_no_short_window_at_the_rates_the_pilots_measured():
    assert window_warnings(load_spec(SPEC), measured()) == []


def test_the_first_campaign_s_three_second_windows_would_have_been_warned_of():
    """The rule does warn: the first campaign's 3 s at every thread count is short for oltp_read_write
    from 256 clients up."""
    spec = load_spec(SPEC).model_copy(update={"duration": 3.0, "duration_by_threads": {}})
    spec = spec.model_copy(update={"workloads": [w.model_copy(update={"duration_by_threads": None})
                                                 for w in spec.workloads]})
    warned = window_warnings(spec, measured(["oltp_read_write"]))
    assert sorted({w.split(":")[0].split(" / ", 1)[1] for w in warned}) == [
        f"oltp_read_write / {n} threads" for n in (1024, 2048, 256, 4096)]


def test_each_test_needs_its_own_windows():
    """Without its own windows, every test but oltp_point_select is short somewhere at the campaign's 10 s."""
    spec = load_spec(SPEC)
    shared = spec.model_copy(update={"workloads": [w.model_copy(update={"duration_by_threads": None})
                                                   for w in spec.workloads]})
    short = {(w.split(" / ")[1], int(w.split(" / ")[2].split()[0])) for w in window_warnings(shared, measured())}
    assert {w for w, _ in short} == {"oltp_read_only", "oltp_update_non_index", "oltp_read_write"}
    assert ("oltp_read_write", 4096) in short and ("oltp_update_non_index", 4096) in short


def test_the_pool_keeps_exact_queue_statistics_and_a_dedicated_listener():
    pool = next(t for t in load_spec(SPEC).targets if t.name == "pool")
    assert pool.options["thread_pool_exact_stats"] is True and pool.options["thread_pool_dedicated_listener"] is True
    assert all(server_options.name_problem(k) is None for k in pool.options)
