"""One run from many load hosts, the pure parts: how a run is split, the barrier's arithmetic,
and the exact merge of the parts' results (spec ``load_hosts``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.worker.parts.barrier import Joined, best_sample, clock_sample, local_instant, silent
from services.common.errors import DecodeError
from services.common.results.histogram import Histogram
from services.common.messages.results import Latency, RunResult, Series, ServerReport, Totals
from services.common.messages.codec import decode
from services.collector.part_merge import PartsMismatch, complete, failed_run, merge_parts
from services.common.messages.parts import PartOf, PartReport, PartSignal
from services.worker.parts.share import part_seed, share_of, split_threads
from services.common.spec.loading import parse_spec
from services.scheduler.submit import split_run

from tests.unit.consumer_fixtures import runs

SPEC = ("name: split\ntargets: [{{name: A, user: bench, host: db1, database: a}}]\nworkloads: [oltp_point_select]\n"
        "threads: [{threads}]\nduration: 10s\nload_hosts: {n}\n")


# -- split ------------------------------------------------------------------------------------
def test_threads_are_split_as_evenly_as_possible_larger_shares_first():
    """10 connections over 3 hosts are 4 + 3 + 3; every connection is driven exactly once."""
    assert split_threads(10, 3) == [4, 3, 3]
    assert split_threads(8, 2) == [4, 4]
    assert split_threads(2, 2) == [1, 1]
    with pytest.raises(ValueError, match="load_hosts: 3 parts need at least 3 threads"):
        split_threads(2, 3)


def test_the_rate_follows_the_threads_and_the_seeds_are_distinct_and_reproducible():
    """An open-loop rate is split in proportion to each part's connections; part 0 keeps the
    run's seed, the others get distinct seeds that follow from it."""
    shares = [share_of(10, 1000.0, 303, PartOf(index=i, count=3)) for i in range(3)]
    assert [s.threads for s in shares] == [4, 3, 3]
    assert [s.rate for s in shares] == [400.0, 300.0, 300.0]
    assert sum(s.rate for s in shares) == 1000.0
    seeds = [s.seed for s in shares]
    assert seeds[0] == 303 and len(set(seeds)) == 3
    assert seeds == [share_of(10, 1000.0, 303, PartOf(index=i, count=3)).seed for i in range(3)]
    assert all(1 <= part_seed(2**31 - 1, i) <= 2**31 - 1 for i in range(16))
    assert share_of(10, None, 303, None).threads == 10
    assert share_of(10, None, 303, PartOf(index=1, count=2)).rate is None


def test_a_part_beyond_its_count_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="index: 2 is not a part of 2"):
        PartOf(index=2, count=2)


def test_a_split_run_is_published_as_its_parts_and_each_decodes_as_a_run_spec():
    """The scheduler publishes one run spec per part, side by side; the worker reads the part."""
    run = runs()[0]
    parts = split_run(run, 3)
    assert [p.part.index for p in parts] == [0, 1, 2] and {p.part.count for p in parts} == {3}
    back = decode(parts[2].encode())
    assert back.part == PartOf(index=2, count=3) and back.run_id == run.run_id
    assert split_run(run, 1) == [run]


@pytest.mark.parametrize("text, error", [
    (SPEC.format(threads=1, n=2), "load_hosts: 2 parts need at least 2 threads per run; threads has 1"),
    (SPEC.format(threads=8, n=17), "load_hosts"),
    (SPEC.format(threads=8, n=2) + "driver: sysbench\n", "load_hosts: 2 needs driver: native"),
    ("name: split\ntargets: [{name: m, kind: managed}]\nworkloads: [oltp_point_select]\nthreads: [8]\n"
     "duration: 10s\nload_hosts: 2\n", "load_hosts: 2 needs dsn targets"),
    (SPEC.format(threads=8, n=2).replace("[oltp_point_select]", "[insert]"),
     "load_hosts: 2 cannot split insert: its table is built afresh before every run"),
])
def test_validate_refuses_a_split_that_cannot_work(text, error):
    with pytest.raises(Exception, match=error):
        parse_spec(text)


def test_a_valid_split_is_accepted():
    assert parse_spec(SPEC.format(threads=8, n=2)).load_hosts == 2
    assert parse_spec(SPEC.format(threads=8, n=2).replace("load_hosts: 2\n", "")).load_hosts == 1


# -- barrier arithmetic -----------------------------------------------------------------------
def test_the_clock_offset_is_ntps_and_the_shortest_round_trip_wins():
    """The coordinator's clock 5 s ahead, 10 ms each way, 1 ms to answer: offset 5 s, round trip 20 ms."""
    s = clock_sample(100.0, 105.010, 105.011, 100.021)
    assert s.offset_s == pytest.approx(5.0) and s.rtt_s == pytest.approx(0.020)
    # An asymmetric, slow sample is off by up to half its round trip; the fast one is kept.
    slow = clock_sample(100.0, 105.200, 105.201, 100.221)
    assert best_sample([slow, s]) == s and best_sample([]) is None
    assert local_instant(1005.0, 5.0) == 1000.0


def test_the_group_forms_only_when_every_part_is_ready_and_fresh():
    j = Joined(count=2, fresh_s=3.0)
    j.ready(0, "a", now=10.0)
    assert j.group(10.0) is None and j.joined(10.0) == 1
    j.ready(1, "b", now=11.0)
    assert j.group(12.0) == {0: "a", 1: "b"}
    assert j.group(14.5) is None, "part 0's ready is older than 3 s: its worker may be gone"
    j.ready(1, "c", now=15.0)  # a new take of part 1 replaces the old one
    j.ready(0, "a", now=15.0)
    assert j.group(15.0) == {0: "a", 1: "c"}
    j.leave(1, "b")  # the old take leaving changes nothing
    assert j.group(15.0) == {0: "a", 1: "c"}
    j.leave(1, "c")
    assert j.group(15.0) is None


def test_a_member_not_heard_for_the_silence_limit_is_lost():
    assert silent({1: 100.0, 2: 105.0}, now=111.0, silence_s=10.0) == [1]
    assert silent({1: 100.0}, now=110.0, silence_s=10.0) == []


def test_signals_need_their_fields_and_decode_by_schema():
    with pytest.raises(ValidationError, match="start_at: a start signal needs it"):
        PartSignal(run_id="r", kind="start", index=0, count=2, token="t", at=1.0)
    ping = PartSignal(run_id="r", kind="ping", index=1, count=2, token="t", at=1.0, t0=1.0)
    assert decode(ping.encode(), expect=(PartSignal,)) == ping
    with pytest.raises(DecodeError):
        decode(ping.encode(), expect=(RunResult,))


# -- merge ------------------------------------------------------------------------------------
def hist(values_us: list[float]) -> Histogram:
    h = Histogram()
    for v in values_us:
        h.record(v)
    return h


def part_result(index: int, count: int, samples: list[float], *, group: str = "g1", tx: int = 100,
                series: list[int] | None = None, status: str = "ok", worker: str | None = None,
                status_deltas: dict[str, int] | None = None, cpu: float = 1.0) -> RunResult:
    run = runs()[0]
    h = hist(samples)
    worker = worker or f"w{index}"
    report = PartReport(index=index, count=count, group=group, worker=worker, host=f"h{index}", threads=2,
                        seed=part_seed(run.seed, index), warmup=0.0, duration=10.0, start_at=1000.0,
                        clock_offset_s=0.001 * index, rtt_s=0.002, transactions=tx, queries=12 * tx)
    return RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                     status=status, error=None if status == "ok" else "MySQL error 2013: Lost connection",
                     worker=worker, host=f"h{index}", started_at=1000.0 + index * 0.001,
                     ended_at=1010.0 + index * 0.01, measured_s=10.0 + index * 0.01,
                     totals=Totals(transactions=tx, reads=10 * tx, other=2 * tx),
                     errors_by_code={"1213": index + 1},
                     series=Series(transactions=series if series is not None else [tx // 10] * 10),
                     latency=Latency(p50_ms=h.percentile(50) / 1000, p95_ms=h.percentile(95) / 1000,
                                     p99_ms=h.percentile(99) / 1000, max_ms=h.max_us / 1000, histogram=h.to_wire()),
                     server=ServerReport(kind="dsn", status_deltas=status_deltas or {"Questions": 9999},
                                         client_cpu_s=cpu),
                     part=report)


def test_parts_merge_into_one_result_exactly():
    """Totals and error codes summed; series summed second by second (a shorter one counts 0 at
    its end); percentiles from the merged histogram; the server's figures taken once; both
    workers and their offsets recorded."""
    a = part_result(0, 2, [1000.0] * 90 + [50_000.0] * 10, tx=100, series=[10] * 10,
                    status_deltas={"Questions": 2400})
    b = part_result(1, 2, [2000.0] * 100, tx=60, series=[6] * 9, status_deltas={"Questions": 777})
    m = merge_parts([b, a])
    assert m.totals.transactions == 160 and m.totals.reads == 1600 and m.totals.queries == 1920
    assert m.errors_by_code == {"1213": 3}
    assert m.series.transactions == [16] * 9 + [10]
    merged = hist([1000.0] * 90 + [50_000.0] * 10 + [2000.0] * 100)
    assert m.latency.histogram == merged.to_wire()
    assert m.latency.p95_ms == merged.percentile(95) / 1000 and m.latency.max_ms == 50.0
    assert m.server.status_deltas == {"Questions": 2400}, "the one server's deltas, taken once (part 0's)"
    assert m.server.client_cpu_s == 2.0
    assert [(p.index, p.worker, p.clock_offset_s) for p in m.parts] == [(0, "w0", 0.0), (1, "w1", 0.001)]
    assert m.worker == "w0+w1" and m.part is None
    assert sum(p.transactions for p in m.parts) == m.totals.transactions
    # On part 0's clock: part 1 ended at 1010.01 on its own, 1 ms behind part 0's.
    assert m.measured_s == 10.01 and m.started_at == 1000.0 and m.ended_at == pytest.approx(1010.011)
    assert m.quality is not None and m.quality.flags == []
    assert decode(m.encode()) == m


def test_parts_of_different_groups_or_a_missing_part_are_never_merged():
    a, b = part_result(0, 2, [1000.0]), part_result(1, 2, [1000.0], group="g2")
    assert not complete([a, b]) and not complete([a]) and complete([a, part_result(1, 2, [1.0])])
    with pytest.raises(PartsMismatch):
        merge_parts([a, b])
    with pytest.raises(PartsMismatch):
        merge_parts([a, part_result(1, 2, [1000.0], status="failed")])


def test_a_failed_part_fails_the_run_without_any_measurement():
    """Half a run is never stored: the failed part's error, no totals, no series, no latency."""
    bad = part_result(1, 2, [1000.0], status="failed")
    r = failed_run(bad)
    assert r.status == "failed" and r.error == "load_hosts part 1 (w1): MySQL error 2013: Lost connection"
    assert r.totals == Totals() and r.series == Series() and r.latency == Latency() and r.measured_s == 0
    assert [p.index for p in r.parts] == [1]


latencies = st.lists(st.floats(min_value=0.1, max_value=5e7, allow_nan=False), min_size=0, max_size=200)


@settings(max_examples=60, deadline=None)
@given(st.lists(latencies, min_size=2, max_size=6), st.integers(0, 2**31))
def test_the_merged_histogram_is_the_histogram_of_every_sample(parts_samples, seed):
    """Whatever the parts recorded, the merge equals recording every sample in one histogram:
    the same buckets, count, max and percentiles (never averaged)."""
    random.Random(seed).shuffle(parts_samples)
    n = len(parts_samples)
    parts = [part_result(i, n, s, tx=len(s), series=[len(s)]) for i, s in enumerate(parts_samples)]
    m = merge_parts(parts)
    every = hist([v for s in parts_samples for v in s])
    assert Histogram.from_wire(m.latency.histogram).counts == every.counts
    assert m.latency.histogram["max_us"] == every.max_us
    for p, field in ((50, "p50_ms"), (95, "p95_ms"), (99, "p99_ms")):
        # No sample at all: no percentile (None, reports print n/a), never 0.
        assert getattr(m.latency, field) == (every.percentile(p) / 1000 if every.total else None)
    assert m.totals.transactions == sum(len(s) for s in parts_samples)
    assert m.series.transactions == [sum(len(s) for s in parts_samples)]


def test_the_report_header_says_a_campaign_ran_from_several_load_hosts():
    from services.reporting.render.formats import render_settings

    spec = parse_spec(SPEC.format(threads=8, n=2))
    lines = render_settings(spec.model_dump(mode="json"))
    assert ("Each run was driven from 2 load hosts at once (load_hosts: 2), its parts started at one agreed "
            "instant and merged into one result.") in lines
    one = parse_spec(SPEC.format(threads=8, n=1))
    assert not any("load hosts" in line for line in render_settings(one.model_dump(mode="json")))


def test_waiting_says_when_the_pool_has_fewer_workers_than_a_run_needs():
    """--wait's notice: one worker connected is as good as none for load_hosts: 2."""
    from services.scheduler.progress import ConsumerWatch

    w = ConsumerWatch("rack1", needed=2)
    assert w.update(1, 0.0) is None
    assert w.update(1, 6.0) == ("note: only 1 worker(s) on pool rack1 for 6s, and each run needs 2 at once "
                                "(load_hosts: 2); start more: worker --pool rack1")
    assert w.update(2, 7.0) == "note: 2 workers of pool rack1 are connected, enough for load_hosts: 2"
    assert ConsumerWatch("p").update(1, 100.0) is None


def test_clock_skew_between_load_hosts_is_no_overrun():
    """Part 1's clock is 8 s behind part 0's (offset +8 s, measured): both measured the same 10 s,
    so the merged wall time is 10 s, on the coordinator's clock, and nothing is flagged."""
    a = part_result(0, 2, [1000.0])
    b = part_result(1, 2, [1000.0])
    b = b.model_copy(update={"started_at": 992.0, "ended_at": 1002.0,
                             "part": b.part.model_copy(update={"clock_offset_s": 8.0})})
    a = a.model_copy(update={"started_at": 1000.0, "ended_at": 1010.0})
    m = merge_parts([a, b])
    assert (m.started_at, m.ended_at) == (1000.0, 1010.0)
    assert m.quality is not None and m.quality.wall_s == 10.0 and m.quality.overrun_s == 0.0
    assert m.quality.flags == []


def test_server_host_figures_come_from_whichever_part_ran_on_the_servers_host():
    """The DSN server shares a host with part 1's worker: only part 1 saw its CPU, context
    switches and disk; the merged result keeps them (part 0's status deltas stay the server's)."""
    a = part_result(0, 2, [1000.0], status_deltas={"Questions": 2400})
    b = part_result(1, 2, [1000.0], status_deltas={"Questions": 777})
    b = b.model_copy(update={"server": b.server.model_copy(update={
        "server_cpu_s": 3.5, "server_ctxt_switches": 1200, "disk_read_bytes": 4096, "disk_write_bytes": 8192})})
    m = merge_parts([a, b])
    assert (m.server.server_cpu_s, m.server.server_ctxt_switches) == (3.5, 1200)
    assert (m.server.disk_read_bytes, m.server.disk_write_bytes) == (4096, 8192)
    assert m.server.status_deltas == {"Questions": 2400}
    assert m.server.server_cpu_us_per_query is not None


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 300), st.integers(2, 16), st.integers(1, 8))
def test_the_parts_drive_exactly_the_runs_thread_ids_each_sliced_as_in_the_unsplit_run(threads, count, processes):
    """The union of the parts' thread ids is exactly range(threads), each once, and every load
    process's job carries the run's thread ids and thread count, so its table slices (the
    random_points/random_ranges per-thread ranges) are those of the unsplit run."""
    from services.worker.driver.native.parent import _plan, part_ids

    count = min(count, threads)
    shares = [share_of(threads, None, 7, PartOf(index=i, count=count)) for i in range(count)]
    ids = [t for s in shares for t in s.thread_ids]
    assert sorted(ids) == list(range(threads)) and {s.run_threads for s in shares} == {threads}
    jobs = [part_ids(tids, s.threads, s.first_thread, s.run_threads)
            for s in shares for tids, _ in _plan(s.threads, [0, 1], processes)]
    assert sorted(t for ids, _ in jobs for t in ids) == list(range(threads))
    assert {of_run for _, of_run in jobs} == {threads}
