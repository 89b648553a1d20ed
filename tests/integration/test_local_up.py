"""deploy/local/up says which process it started and which one died at start."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def test_up_reports_a_process_that_died_at_start(tmp_path):
    """A worker that exits 3 at once and a collector binary that does not exist are reported as failed
    (exit status and the end of the log), never as started, and up exits 1; a live process is started."""
    var, bin_ = tmp_path / "var", tmp_path / "bin"
    var.mkdir()
    bin_.mkdir()
    (var / "local.env").write_text("BENCHFLEET_DB_HOST=127.0.0.1\n")
    _script(bin_ / "worker", 'echo "worker: error: cannot reach the broker" >&2; exit 3')
    env = dict(os.environ, BENCHFLEET_VAR=str(var), BENCHFLEET_BIN=str(bin_), BENCHFLEET_ENSURE_SERVICES="no")
    r = subprocess.run([str(ROOT / "deploy" / "local" / "up"), "collector", "worker"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "up: collector FAILED: exited with status 127" in r.stderr
    assert "up: worker FAILED: exited with status 3" in r.stderr and "cannot reach the broker" in r.stderr
    assert "started" not in r.stdout and "failed to start: collector worker" in r.stderr
    assert not (var / "run" / "worker.pid").exists()

    _script(bin_ / "collector", "exec sleep 60")
    r = subprocess.run([str(ROOT / "deploy" / "local" / "up"), "collector"], env=env, capture_output=True, text=True,
                       timeout=60)
    pid = int((var / "run" / "collector.pid").read_text())
    try:
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"up: collector started (pid {pid}")
    finally:
        os.killpg(pid, signal.SIGKILL)
