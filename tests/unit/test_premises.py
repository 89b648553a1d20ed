"""Premise checks of the seed studies, on literal results and on the study specs themselves: a
study that cannot test what its seed tested is refused (before it runs) or flagged (after)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

from services.common.messages.runs import Cell
from services.common.messages.results import RunResult, ServerReport, Totals
from services.common.results.rows import ResultRow
from services.common.spec.loading import load_spec_source
from services.reporting import premises as p
from services.reporting.analysis import CampaignData

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "examples" / "studies"


def row(target, workload, threads, rep, *, tx=1000, deltas=None, end=None, sha=None, version=None, malloc=None,
        variables=None):
    server = ServerReport(kind="managed", status_deltas=deltas or {}, status_end=end or {}, server_sha256=sha,
                          build_version=version, malloc=malloc, variables=variables or {})
    result = RunResult(run_id=f"c.{target}.{workload}.t{threads}.r{rep}", campaign_id="c",
                       cell=Cell(target=target, workload=workload, threads=threads), repetition=rep, status="ok",
                       worker="w", host="h", started_at=0.0, ended_at=3.0, measured_s=3.0,
                       totals=Totals(transactions=tx, reads=tx), server=server)
    return ResultRow.of(result)


def campaign(rows, targets=("off", "32")):
    return CampaignData("c", "c", "finished", tuple(targets), targets[0], ("select",), (1, 8), {}, tuple(rows))


def test_a_key_cache_that_never_missed_fails_the_premise():
    """Key_reads of 0 per transaction in every cell (the study as it ran before) is flagged, with
    the numbers; misses in every cell pass, with the hit ratio."""
    never = campaign([row(t, "select", n, 1, deltas={"Key_reads": 0, "Key_read_requests": 3000})
                      for t in ("off", "32") for n in (1, 8)])
    got = p.key_cache_misses(never)
    assert not got.ok
    assert got.detail.startswith("Key_reads per transaction from 0.00 (32 select t=1) to 0.00 (off select t=8) over "
                                 "4 cells; key cache hit ratio 1.0000; 4 of 4 cells below 0.01")
    assert "NOT MET" in got.line()
    misses = campaign([row(t, "select", n, 1, deltas={"Key_reads": 100 * n, "Key_read_requests": 3000})
                       for t in ("off", "32") for n in (1, 8)])
    got = p.key_cache_misses(misses)
    assert got.ok and "from 0.10 (32 select t=1) to 0.80 (off select t=8)" in got.detail


def test_one_cell_without_misses_is_enough_to_fail():
    rows = [row("off", "select", 1, 1, deltas={"Key_reads": 500}), row("off", "select", 8, 1, deltas={"Key_reads": 3})]
    assert not p.key_cache_misses(campaign(rows, ("off",))).ok


def test_the_large_buffer_premise_needs_unused_blocks_at_the_end_of_every_run():
    fits = campaign([row("off", "select", 1, 1, end={"Key_blocks_unused": 40000}),
                     row("off", "select", 8, 1, end={"Key_blocks_unused": 39000})], ("off",))
    assert p.key_cache_fits(fits).ok
    full = campaign([row("off", "select", 1, 1, end={"Key_blocks_unused": 0})], ("off",))
    got = p.key_cache_fits(full)
    assert not got.ok and "1 runs ended with a full key cache" in got.detail


def test_the_small_buffer_premise_needs_a_full_cache_at_the_end_of_every_run():
    """Misses of a cache that never filled are a started server's first reads (the large buffer has
    them too): the runs that ended with free blocks are named, with their thread counts."""
    full = campaign([row("off", "select", n, 1, end={"Key_blocks_unused": 0}) for n in (1, 8)], ("off",))
    assert p.key_cache_full(full).ok
    cold = campaign([row("off", "select", 1, 1, end={"Key_blocks_unused": 790}),
                     row("off", "select", 8, 1, end={"Key_blocks_unused": 0})], ("off",))
    got = p.key_cache_full(cold)
    assert not got.ok
    assert got.detail.startswith("1 of 2 runs ended with Key_blocks_unused 0; 1 ended with free blocks (at most 790), "
                                 "all at 1 thread(s): off select t=1")


def test_two_builds_must_have_run():
    """Two targets with one binary (the old regression study) fail; two digests pass."""
    one = campaign([row(t, "select", 1, 1, sha="a" * 64, version="10.11.19-MariaDB") for t in ("a", "b")], ("a", "b"))
    assert not p.ran_distinct_builds(one).ok
    two = campaign([row("a", "select", 1, 1, sha="a" * 64, version="10.11.18-MariaDB"),
                    row("b", "select", 1, 1, sha="b" * 64, version="10.11.19-MariaDB")], ("a", "b"))
    got = p.ran_distinct_builds(two)
    assert got.ok and got.detail == ("a: 10.11.18-MariaDB sha256:aaaaaaaaaaaa; b: 10.11.19-MariaDB "
                                     "sha256:bbbbbbbbbbbb.")


def test_allocators_and_thread_handling_are_checked_against_what_ran():
    rows = [row("glibc", "update_index", 4, 1, malloc="glibc"), row("tc", "update_index", 4, 1, malloc="glibc")]
    got = p.ran_allocators(campaign(rows, ("glibc", "tc")), {"glibc": "glibc", "tc": "tcmalloc"})
    assert not got.ok and got.detail == "glibc: glibc; tc: glibc."
    rows = [row("tpc", "select", 16, 1, variables={"thread_handling": "one-thread-per-connection"}),
            row("pool", "select", 16, 1, variables={"thread_handling": "pool-of-threads"})]
    assert p.ran_thread_handling(campaign(rows, ("tpc", "pool")),
                                 {"tpc": "one-thread-per-connection", "pool": "pool-of-threads"}).ok


def spec(tmp_path, text):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    return load_spec_source(str(f))[0]


def test_a_range_delta_as_wide_as_the_table_is_refused(tmp_path):
    """The seed's delta of 1,000,000 kept on 100,000 rows makes every range run to the table's end."""
    s = spec(tmp_path, "name: r\ntargets: [{name: a, user: bench}]\nthreads: [1]\nduration: 1s\n"
                       "data: {tables: 1, table_size: 100000, engine: MyISAM}\n"
                       "workloads: [{name: select_random_ranges, label: d, options: {delta: 1000000}}]\n")
    got = p.ranges_inside_table(s)
    assert not got.ok and got.detail.startswith("d: delta 1,000,000 is more than 10% of 100,000 rows")


def runner_module():
    loader = importlib.machinery.SourceFileLoader("study_runner", str(STUDIES / "run"))
    spec_ = importlib.util.spec_from_loader("study_runner", loader)
    module = importlib.util.module_from_spec(spec_)
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("spec_file", sorted(f.name for f in STUDIES.glob("*.yaml")))
def test_every_study_spec_meets_the_premises_checked_before_it_runs(spec_file):
    """The study specs as committed: right shape, engine, ranges and builds for their seeds."""
    run = runner_module()
    assert any(spec_file == f for _, _, specs, _ in run.STUDIES.values() for f, _ in specs), "not in any study"
    checks = run.spec_premises(spec_file, run.load_spec(STUDIES / spec_file))
    assert all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
