"""The CLIs against the real broker and results DB as a user runs them: `submit --wait` on an
80-column terminal with no worker (a notice, Ctrl-C exits 130 and the campaign goes on),
`--wait --json`, and `history` of a metric beyond the result columns."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from services.common.messages.results import Latency, RunResult
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.scheduler import plan

from tests.integration.fleet import ROOT, Fleet, target_yaml

pytestmark = pytest.mark.integration


def _spec(fleet: Fleet, name: str = "daily", threads: str = "[1]", repeat: int = 1) -> str:
    s = fleet.settings
    return (f"name: {name}\npool: {fleet.pool}\ntargets:\n" + target_yaml(s, "A", "bf_daily_a")
            + target_yaml(s, "B", "bf_daily_b") + "workloads: [oltp_point_select]\n"
            f"data: {{tables: 1, table_size: 1000}}\nthreads: {threads}\nduration: 1s\nwarmup: 0s\n"
            f"repeat: {repeat}\nseed: 3\n")


def _read_until(fd: int, pattern: str, timeout: float) -> str:
    out = b""
    deadline = time.time() + timeout
    while time.time() < deadline and pattern.encode() not in out:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        out += chunk
    return out.decode(errors="replace")


def _ctrl_c_as_at_a_terminal() -> None:
    """A shell runs a foreground command with Ctrl-C's default action; a suite started in the
    background (`make test &`) runs with SIGINT ignored, which Python and the command would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_wait_without_a_worker_says_so_and_ctrl_c_exits_130(fleet, tmp_path):
    """On an 80-column terminal with no worker on the pool: the progress line never wraps, a
    notice says no worker takes the runs, and Ctrl-C exits 130 leaving the campaign queued."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec(fleet))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in fleet.env().items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONFAULTHANDLER"] = "1"
    p = subprocess.Popen([sys.executable, "-m", "services.scheduler.cli", "submit", str(spec), "--wait",
                          "--poll", "0.2"], cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave,
                         start_new_session=True, preexec_fn=_ctrl_c_as_at_a_terminal)
    os.close(slave)
    try:
        seen = _read_until(master, "no worker on pool", 60)
        assert "no worker on pool itest for" in seen, seen
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Say where the process waits, its signal dispositions, and (faulthandler, on SIGABRT) its stack.
            where = Path(f"/proc/{p.pid}/wchan").read_text() if Path(f"/proc/{p.pid}/wchan").exists() else "?"
            sig = [l for l in Path(f"/proc/{p.pid}/status").read_text().splitlines() if l.startswith("Sig")]
            seen += _read_until(master, chr(0), 2)
            p.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            raise AssertionError(f"no exit 30 s after Ctrl-C (kernel wait: {where}; {sig}); it printed:\n"
                                 f"{seen[-3000:] + _read_until(master, chr(0), 3)}") from None
        seen += _read_until(master, "\x00", 2)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    assert rc == 130, seen
    assert "the campaign goes on" in seen and "Traceback" not in seen
    drawn = [frame.split("\x1b[K")[0] for frame in seen.split("\r") if "runs" in frame and "[" in frame]
    assert drawn and all(len(line) < 80 for line in drawn), drawn
    notice = next(line for line in seen.replace("\x1b[K", "").splitlines() if line.startswith("note: "))
    assert len(notice) < 80 and "worker --pool itest" in notice
    campaign_id = re.search(r"campaign (daily-\S+):", seen).group(1)  # type: ignore[union-attr]
    with Store(fleet.settings) as store:
        assert store.runs.counts(campaign_id)["pending"] == 2  # still queued: Ctrl-C stopped only the waiting


def test_wait_json_prints_one_json_document(fleet, tmp_path):
    """`scheduler submit X --wait --json` prints the campaign and its report as JSON on stdout."""
    fleet.start_collector()
    fleet.start_worker("w1")
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec(fleet, "daily-json"))
    r = fleet.cli("scheduler", "submit", str(spec), "--wait", "--json", "--poll", "0.5", timeout=400)
    assert r.returncode == 0, r.stderr + fleet.logs()
    doc = json.loads(r.stdout)
    assert doc["campaign_id"].startswith("daily-json-") and doc["done"] == 2 and doc["failed"] == 0
    assert doc["report"]["campaign"]["id"] == doc["campaign_id"] and len(doc["report"]["runs"]) == 2


def test_history_takes_p50_and_status_metrics(fleet):
    """`collector history --metric p50_ms` (and status:NAME) lists the cell's values per campaign."""
    spec = parse_spec(_spec(fleet, "daily-hist", repeat=2))
    for n, cid in enumerate(("c-hist-1", "c-hist-2")):
        runs = plan.run_specs(spec, cid)
        with Store(fleet.settings) as store:
            store.campaigns.record(cid, spec, runs, now=1000.0 + n)
            for r in runs:
                p50 = 2.0 + n + r.repetition / 10
                store.results.store(RunResult(
                    run_id=r.run_id, campaign_id=cid, cell=r.cell, repetition=r.repetition, status="ok", worker="w",
                    host="h", started_at=0, ended_at=1, measured_s=1, totals={"transactions": 10, "reads": 100},
                    latency=Latency(p50_ms=p50, p95_ms=9, p99_ms=9, max_ms=9),
                    server={"status_deltas": {"Key_reads": 20 * (n + 1)}}))
    r = fleet.cli("collector", "history", "--target", "A", "--workload", "oltp_point_select", "--threads", "1",
                  "--metric", "p50_ms", "--format", "json")
    assert r.returncode == 0, r.stderr
    points = json.loads(r.stdout)["points"]
    assert [(p["campaign"], p["n"], p["mean"]) for p in points] == [("c-hist-1", "2", "2.15"), ("c-hist-2", "2", "3.15")]
    r = fleet.cli("collector", "history", "--target", "A", "--workload", "oltp_point_select", "--threads", "1",
                  "--metric", "status:Key_reads", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [p["mean"] for p in json.loads(r.stdout)["points"]] == ["2.00", "4.00"]
