"""A benchmark withholds its ratios when the machine was busy: before the start, or while it ran."""

import subprocess
import sys
import time

from bench.machine_load import FOREIGN_SHARE_LIMIT, LoadWatch, Quietness, _own_cpu_s


def quiet(load_before: float = 0.3, share: float = 0.01, cpus: int = 2) -> Quietness:
    return Quietness(cpus, (load_before, 0.2, 0.1), (5.0, 2.0, 1.0), share * 10, share)


def test_a_quiet_machine_reports_even_when_the_benchmark_itself_raised_the_load():
    assert quiet().busy_reason is None


def test_a_load_above_the_cpu_count_before_the_start_withholds_the_ratios():
    reason = quiet(load_before=2.5).busy_reason
    assert reason is not None and "2.50 before the start" in reason and "2 CPUs" in reason


def test_other_processes_using_the_cpu_meanwhile_withhold_the_ratios():
    reason = quiet(share=FOREIGN_SHARE_LIMIT + 0.05).busy_reason
    assert reason is not None and "other processes used 15%" in reason


def test_the_watch_counts_its_own_children_as_its_own_and_a_stranger_as_foreign():
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    before = _own_cpu_s()
    subprocess.run([sys.executable, "-c", spin], check=True)
    assert _own_cpu_s() - before >= 0.5
    stranger = subprocess.Popen([sys.executable, "-c", spin])
    try:
        with LoadWatch() as other:
            # The stranger is not reaped inside the block: its CPU is someone else's.
            time.sleep(1.0)
    finally:
        stranger.wait()
    assert other.result.foreign_cpu_s >= 0.3
