"""The open-files limit a run needs: computed, raised up to the hard limit, refused above it."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap

import pytest

from services.common.messages.runs import Cell, RunSpec
from services.common.spec.targets import DsnTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import fdlimit, runner
from services.worker.target import lifecycle as server_run


def test_4096_threads_need_more_than_4200_files():
    """The thread-pool study's 4096 clients need the connections plus the process's own files."""
    assert fdlimit.files_needed(4096) == 4096 + fdlimit.SPARE > 4200
    assert fdlimit.files_needed(1) == 1 + fdlimit.SPARE


def test_soft_limit_is_raised_only_when_short_and_never_past_the_hard_limit():
    need = fdlimit.files_needed(4096)
    assert fdlimit.new_soft_limit(need, soft=1024, hard=1_048_576) == need
    assert fdlimit.new_soft_limit(need, soft=1024, hard=need) == need
    assert fdlimit.new_soft_limit(need, soft=1024, hard=resource.RLIM_INFINITY) == need
    assert fdlimit.new_soft_limit(need, soft=need, hard=need) is None
    assert fdlimit.new_soft_limit(need, soft=resource.RLIM_INFINITY, hard=resource.RLIM_INFINITY) is None
    with pytest.raises(fdlimit.FdLimitError):
        fdlimit.new_soft_limit(need, soft=1024, hard=need - 1)


def test_message_names_the_limit_the_need_and_the_hard_limit():
    with pytest.raises(fdlimit.FdLimitError) as e:
        fdlimit.new_soft_limit(fdlimit.files_needed(4096), soft=1024, hard=4096)
    msg = str(e.value)
    assert "RLIMIT_NOFILE" in msg and "4096 threads" in msg and f">= {4096 + fdlimit.SPARE}" in msg
    assert "hard limit is 4096" in msg and "ulimit -Hn" in msg


def test_ensure_sets_the_soft_limit_and_keeps_the_hard_one():
    calls = []
    got = fdlimit.ensure(2048, getrlimit=lambda _: (1024, 65536), setrlimit=lambda r, v: calls.append((r, v)))
    assert got == 2048 + fdlimit.SPARE
    assert calls == [(resource.RLIMIT_NOFILE, (2048 + fdlimit.SPARE, 65536))]
    calls.clear()
    assert fdlimit.ensure(16, getrlimit=lambda _: (1024, 65536), setrlimit=lambda r, v: calls.append(v)) == 1024
    assert calls == []


def test_processes_started_after_ensure_inherit_the_raised_limit():
    """Load processes are spawned after the raise, so they hold the run's connections too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < fdlimit.files_needed(600):
        pytest.skip(f"hard RLIMIT_NOFILE {hard} is too low for this test")
    code = textwrap.dedent("""
        import multiprocessing, resource
        from services.worker import fdlimit
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        fdlimit.ensure(600)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            print(pool.apply_async(resource.getrlimit, (resource.RLIMIT_NOFILE,)).get(timeout=30)[0])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=str(runner.__file__).rsplit("/services/", 1)[0])
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == fdlimit.files_needed(600)


def test_a_run_above_the_hard_limit_fails_before_touching_the_target(monkeypatch):
    """The run fails with the message, and no server is reached, when the hard limit is too low."""
    monkeypatch.setattr(fdlimit, "_getrlimit", lambda _: (1024, 4096))
    monkeypatch.setattr(fdlimit, "_setrlimit", lambda *_: pytest.fail("setrlimit called"))
    monkeypatch.setattr(server_run, "open_target", lambda *_: pytest.fail("target opened"))
    run = RunSpec(run_id="c1.a.oltp_point_select.t4096.r1", campaign_id="c1", campaign_name="tp", seq=1, total_runs=1,
                  cell=Cell(target="a", workload="oltp_point_select", threads=4096), repetition=1,
                  target=DsnTarget(name="a", user="bench"), workload=WorkloadSpec(name="oltp_point_select"),
                  data=DataShape(), duration=1.0, warmup=0.0, seed=1, published_at=0.0)
    result = runner.execute(run, runner.WorkerIdentity("w1"))
    assert result.status == "failed" and "RLIMIT_NOFILE" in result.error and "hard limit is 4096" in result.error
