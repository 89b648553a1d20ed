"""The collector's takeover questions run on a daemon thread: in order, one at a time, cancelled on
shutdown, and a question hanging on the broker does not hold the collector's exit."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from services.collector.daemon_asker import DaemonAsker

ROOT = Path(__file__).resolve().parents[2]


def test_questions_are_answered_in_order_and_errors_reach_the_future():
    asker = DaemonAsker("t")
    seen: list[int] = []
    futures = [asker.submit(seen.append, i) for i in range(5)]
    boom = asker.submit(lambda: 1 / 0)
    assert [f.result(5) for f in futures] == [None] * 5 and seen == [0, 1, 2, 3, 4]
    with pytest.raises(ZeroDivisionError):
        boom.result(5)
    asker.shutdown()


def test_shutdown_cancels_what_waits_and_refuses_more():
    asker = DaemonAsker("t")
    started, release = threading.Event(), threading.Event()
    running = asker.submit(lambda: started.set() or release.wait(5))
    assert started.wait(5)
    queued = asker.submit(lambda: "never")
    asker.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    with pytest.raises(RuntimeError):
        asker.submit(lambda: None)
    release.set()
    assert running.result(5) is True


def test_a_hanging_question_does_not_hold_the_process_exit():
    """A question stuck for 60 s (the broker's API hanging) and the collector stopping: the process
    ends at once; a ThreadPoolExecutor's thread would have been joined at exit, 60 s later."""
    code = ("import time\nfrom services.collector.daemon_asker import DaemonAsker\n"
            "a = DaemonAsker('takeover-check')\na.submit(time.sleep, 60)\ntime.sleep(0.2)\n"
            "a.shutdown(wait=False, cancel_futures=True)\n")
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=30)
    assert time.monotonic() - started < 10
