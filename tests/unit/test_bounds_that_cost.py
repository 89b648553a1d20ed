"""Bounds that count what costs: deliveries with load_hosts parts, rows prepared (again for each
change of table layout), a run's whole length against the broker's consumer_timeout, and the
open-loop backlog of a load process."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from services.common.config import Settings, settings_from
from services.common.spec import costs
from services.common.spec.loading import SpecError, load_spec_source, parse_spec
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.scheduler import preflight
from services.worker.driver.contract import LoadRequest
from services.worker.driver.native.arrivals import MAX_BACKLOG, Schedule, backlog_share
from services.worker.driver.native.parent import plan_jobs
from services.worker.target.connect_params import ConnectParams

BASE = """\
name: cost
targets:
  - {name: a, user: bench, database: sb_a}
workloads: %s
threads: %s
duration: 1s
"""


def refusal(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "spec.yaml")
    return str(info.value)


def test_runs_split_over_load_hosts_count_once_per_host():
    """60,000 runs fit the limit; split over two load hosts they are 120,000 deliveries and not."""
    threads = "[" + ", ".join(str(n) for n in range(2, 1002)) + "]"
    text = BASE % ("[oltp_point_select]", threads) + "repeat: 60\n"
    parse_spec(text, "spec.yaml")
    message = refusal(text + "load_hosts: 2\n")
    assert "spec.yaml:" in message and "repeat: 1 targets x 1 workloads x 1000 thread counts x 60 repetitions " \
                                       "x 2 load hosts = 120,000 runs; a campaign may have at most 100,000" in message


def test_rows_prepared_are_bounded_per_campaign():
    """1,024 tables of 2 million rows are more rows than a campaign may load."""
    message = refusal(BASE % ("[oltp_point_select]", "[1]") + "data: {tables: 1024, table_size: 2000000}\n")
    assert "data: 1 targets would load 2,048,000,000 rows in all" in message


def test_a_workloads_own_tables_count_against_the_bound_too():
    """A workload's own tables x table_size are what its prepare loads, whatever ``data`` says."""
    message = refusal(BASE % ("[{name: oltp_point_select, tables: 1024, table_size: 2000000}]", "[1]"))
    assert "data: 1 targets would load 2,048,000,000 rows in all" in message


def test_a_script_workload_is_costed_on_sysbench_10_tables():
    """A Lua script runs on the tables oltp_point_select runs on: no second prepare between them."""
    specs = [WorkloadSpec.model_validate(w) for w in ("oltp_point_select", {"script": "my_bench"})]
    assert costs.rows_prepared(specs, DataShape(tables=2, table_size=10), 3) == 20


def test_workloads_on_other_table_layouts_prepare_again_and_count_again():
    """One table of 200 million rows is fine; alternating two layouts over 10 repetitions loads it
    20 times (once per layout change), which is not."""
    parse_spec(BASE % ("[oltp_point_select]", "[1]") + "data: {table_size: 200000000}\nrepeat: 10\n", "spec.yaml")
    message = refusal(BASE % ("[oltp_point_select, oltp_simple]", "[1]")
                      + "data: {table_size: 200000000}\nrepeat: 10\n")
    assert "would load 4,000,000,000 rows in all" in message


def test_the_bytes_run_messages_carry_are_bounded():
    """Each target goes out once, and each run order carries its whole workload: targets x thread counts x
    repetitions x load hosts copies of the workloads count, and a campaign may not publish gigabytes of them."""
    assert costs.message_bytes([100, 200], [10], per_cell=3) == 300 + 3 * 10 * 2
    from tests.unit.hostile_specs import _many_options_runs, _many_windows_runs
    assert re.search(r"workloads: the campaign's messages would carry [\d,]+ MiB of targets and workloads .* at most "
                     r"128 MiB", refusal(_many_windows_runs()))
    # 10 targets of 63 server options each over 100,000 runs: sent once, they are a few kB.
    assert parse_spec(_many_options_runs(), "spec.yaml").run_count == 100_000


@pytest.mark.parametrize("workloads, repeat, prepares", [
    (["oltp_point_select", "oltp_read_only"], 5, 1),
    (["oltp_point_select", "oltp_simple"], 1, 2),
    (["oltp_point_select", "oltp_simple"], 3, 6),
    (["oltp_simple", "oltp_point_select", "oltp_simple"], 2, 5),
    (["insert"], 4, 0),
    ([{"name": "oltp_insert"}, {"name": "oltp_insert", "label": "noinc", "options": {"auto_inc": False}}], 2, 4),
])
def test_prepares_per_target_follow_the_plan_order(workloads, repeat, prepares):
    specs = [WorkloadSpec.model_validate(w) for w in workloads]
    assert costs.rows_prepared(specs, DataShape(tables=1, table_size=1), repeat) == prepares


def test_a_run_counts_server_stop_start_prepare_and_quiesce_against_the_consumer_timeout(tmp_path):
    """A managed target's 60 s start and stop and 300 s quiesce count with warm-up and duration;
    a broker timeout below the total refuses the spec naming BENCHFLEET_CONSUMER_TIMEOUT_MS."""
    path = tmp_path / "spec.yaml"
    path.write_text("name: long\ntargets: [{kind: managed, name: m}]\nworkloads: [oltp_point_select]\n"
                    "threads: [1]\nduration: 10m\nwarmup: 1m\ndata: {table_size: 5000000}\n")
    spec, source = load_spec_source(str(path))
    parts = dict(preflight.run_parts(spec))
    assert parts == {"stop": 60.0, "start": 60.0, "prepare": 100.0, "quiesce": 300.0, "warmup": 60.0,
                     "duration": 600.0, "overhead": 2.0}
    assert preflight.run_length_errors(spec, Settings(), source) == []
    errors = preflight.run_length_errors(spec, replace(Settings(), consumer_timeout_ms=1_200_000), source)
    assert len(errors) == 1 and "duration" in str(errors[0]) and "BENCHFLEET_CONSUMER_TIMEOUT_MS" in str(errors[0])
    assert "a run may take 19m42s (stop 1m + start 1m + prepare 1m40s + quiesce 5m" in str(errors[0])
    errors = preflight.run_length_errors(spec, replace(Settings(), max_run_s=900), source)
    assert "BENCHFLEET_MAX_RUN_S" in str(errors[0])


def test_the_consumer_timeout_is_read_from_the_variable_deploy_sets():
    assert settings_from(None, {"BENCHFLEET_CONSUMER_TIMEOUT_MS": "600000"}).consumer_timeout_ms == 600_000


def test_an_open_loop_backlog_stops_growing_at_its_bound():
    """A server that answers nothing while arrivals come at 1,000,000/s: the queue stops at the
    bound and says so, instead of holding every arrival of the stall."""
    schedule = Schedule(1_000_000.0, 0.0, random.Random(1), limit=1_000)
    assert schedule.queue(0.0005) < 1_000 and schedule.exceeded is None
    assert schedule.queue(5.0) <= 1_001 and schedule.exceeded == 1_001
    assert schedule.take(10.0) is not None  # what was drawn is still served


def _open_loop(threads: int, **split) -> LoadRequest:
    return LoadRequest(ConnectParams(), WorkloadSpec(name="oltp_point_select"), DataShape(), threads, 0.0, 5.0, 1,
                       rate=10_000.0, **split)


@pytest.mark.parametrize("threads, processes", [(1, 1), (8, 4), (64, 1), (7, 3), (1000, 7)])
def test_a_runs_load_processes_share_one_backlog_bound(threads, processes):
    """However many load processes a run has, the arrivals they may hold due add up to the run's
    bound (rounded up by at most one a process), each in proportion to its connections, as its rate is."""
    jobs = plan_jobs(_open_loop(threads), [0, 1], processes)
    assert len(jobs) == processes
    assert MAX_BACKLOG <= sum(j.backlog_limit for j in jobs) <= MAX_BACKLOG + processes
    for j in jobs:
        assert j.backlog_limit == pytest.approx(MAX_BACKLOG * len(j.thread_ids) / threads, abs=1)
        assert j.rate == pytest.approx(10_000.0 * len(j.thread_ids) / threads)


def test_a_load_hosts_part_of_a_split_run_holds_its_share_of_the_runs_bound():
    """A run of 400 connections split over four load hosts: each host's 100 hold a quarter of the bound."""
    part = replace(_open_loop(100), first_thread=200, run_threads=400)
    jobs = plan_jobs(part, [0, 1], 2)
    assert sum(j.backlog_limit for j in jobs) == MAX_BACKLOG // 4
    assert [j.thread_ids[0] for j in jobs] == [200, 201]


def test_a_backlog_share_is_refused_for_more_connections_than_the_run_has():
    with pytest.raises(ValueError, match="connections must be 1..4"):
        backlog_share(5, 4)
