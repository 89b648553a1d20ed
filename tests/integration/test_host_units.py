"""The systemd units and the host install scripts (deploy/host): units installed the way a user
installs them pass `systemd-analyze verify` without a warning, and installing twice changes
nothing. Paths are redirected into a temp dir; no unit is started."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from services.worker.fdlimit import files_needed

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "deploy" / "host"


def _need_root_and_systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    problem = ("systemd-analyze not installed" if path is None
               else "the install scripts need root" if os.geteuid() != 0 else "")
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    return path  # type: ignore[return-value]


def host_env(tmp: Path) -> dict[str, str]:
    """The install scripts' paths redirected into ``tmp``; the venv is this checkout's."""
    env = dict(os.environ)
    env.update(BENCHFLEET_PREFIX=str(tmp / "opt"), BENCHFLEET_VENV=str(ROOT / ".venv"),
               BENCHFLEET_ETC=str(tmp / "etc"), BENCHFLEET_UNIT_DIR=str(tmp / "units"), BENCHFLEET_START="no")
    return env


def verify(systemd_analyze: str, unit: Path) -> subprocess.CompletedProcess:
    return subprocess.run([systemd_analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)


def install_worker(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(HOST / "install-worker"), *args], env=host_env(tmp), capture_output=True, text=True,
                          timeout=300)


def test_verify_reports_a_broken_unit(tmp_path):
    """The check below can fail: systemd-analyze names a bad setting (it still exits 0)."""
    sa = _need_root_and_systemd_analyze()
    bad = tmp_path / "bad.service"
    bad.write_text("[Service]\nExecStart=/bin/true\nRestart=sometimes\n")
    r = verify(sa, bad)
    assert "restart specifier" in r.stderr


def test_installed_worker_unit_verifies_and_reinstall_changes_nothing(tmp_path):
    """install-worker lays out settings, the broker password (mode 600) and a unit that
    verifies cleanly; a second run reports every file unchanged."""
    sa = _need_root_and_systemd_analyze()
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    args = ("--broker", "10.99.0.1", "--amqp-password-file", str(pw), "--pool", "rack1", "--instance", "2",
            "--client-cpus", "1", "--metrics-addr", "10.99.0.2", "--metrics-port", "9470")
    first = install_worker(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    etc = tmp_path / "etc"
    unit = tmp_path / "units" / "benchfleet-worker@.service"
    r = verify(sa, unit)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")
    text = unit.read_text()
    assert f"EnvironmentFile={etc}/worker.env" in text and f"EnvironmentFile=-{etc}/worker-%i.env" in text
    assert f"ExecStart={ROOT / '.venv'}/bin/worker" in text
    nofile = int(next(line.split("=")[1] for line in text.splitlines() if line.startswith("LimitNOFILE=")))
    assert nofile >= files_needed(4096)
    assert "Restart=on-failure" in text
    env = (etc / "worker.env").read_text()
    assert "BENCHFLEET_AMQP_URL=amqp://benchfleet-worker@10.99.0.1:5672/benchfleet" in env
    assert "BENCHFLEET_POOL=rack1" in env and "s3cret" not in env
    inst = (etc / "worker-2.env").read_text()
    assert "BENCHFLEET_CLIENT_CPUS=1" in inst and "BENCHFLEET_METRICS_PORT=9470" in inst
    secret = etc / "secrets" / "amqp_password_worker"
    assert secret.read_text() == "s3cret\n" and (secret.stat().st_mode & 0o777) == 0o600
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    second = install_worker(tmp_path, *args)
    assert second.returncode == 0, second.stderr
    assert "wrote" not in second.stderr and second.stderr.count("unchanged") == 4
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_install_worker_refuses_bad_input_and_writes_nothing(tmp_path):
    """A bad pool name is refused with exit 2 and the field named, before anything is written."""
    _need_root_and_systemd_analyze()
    pw = tmp_path / "pw"
    pw.write_text("x\n")
    r = install_worker(tmp_path, "--broker", "b", "--amqp-password-file", str(pw), "--pool", "a b")
    assert r.returncode == 2 and "--pool" in r.stderr
    assert not (tmp_path / "etc").exists()


def test_installed_collector_unit_verifies(tmp_path):
    """The collector unit, with paths rewritten as install-control writes them, verifies cleanly."""
    sa = _need_root_and_systemd_analyze()
    r = subprocess.run(["bash", "-c", f". {HOST / 'common.sh'}; install_unit benchfleet-collector.service x"],
                       env=host_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    unit = tmp_path / "units" / "benchfleet-collector.service"
    r = verify(sa, unit)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")
    assert f"EnvironmentFile={tmp_path / 'etc'}/collector.env" in unit.read_text()


def test_ensure_services_refuses_a_client_host_that_is_not_a_host_pattern(tmp_path):
    """A BENCHFLEET_DB_CLIENT_HOSTS entry that could break out of the SQL is refused (exit 1,
    the entry named) before any service is touched."""
    _need_root_and_systemd_analyze()
    env = {**host_env(tmp_path), "BENCHFLEET_DB_CLIENT_HOSTS": "10.0.0.%,x'@'%", "BENCHFLEET_VAR": str(tmp_path / "var")}
    r = subprocess.run([str(ROOT / "deploy" / "ensure-services"), "python"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "x'@'%" in r.stderr and "not a host pattern" in r.stderr
    assert "ok:" not in r.stderr and not (tmp_path / "var").exists()
