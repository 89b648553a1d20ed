"""The systemd units and the host install scripts (deploy/host): units installed the way a user
installs them pass `systemd-analyze verify` without a warning, and installing twice changes
nothing. Paths are redirected into a temp dir; no unit is started."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from services.worker.fdlimit import files_needed

from tests.missing import missing

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "deploy" / "host"


def _need_root_and_systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    problem = ("systemd-analyze not installed" if path is None
               else "the install scripts need root" if os.geteuid() != 0 else "")
    if problem:
        missing(problem)
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
    # This host's own broker user by default, named for its short host name.
    short = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    assert f"BENCHFLEET_AMQP_URL=amqp://benchfleet-worker-{short}@10.99.0.1:5672/benchfleet" in env
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


def test_a_host_installed_with_the_shared_broker_user_keeps_it_with_a_warning(tmp_path):
    """Upgrading: a host whose worker.env names the broker user all hosts shared keeps it (the
    control host still has it), and every install warns; --worker-host gives it its own."""
    _need_root_and_systemd_analyze()
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "worker.env").write_text("BENCHFLEET_AMQP_URL=amqp://benchfleet-worker@10.99.0.1:5672/benchfleet\n")
    kept = install_worker(tmp_path, "--broker", "10.99.0.1", "--amqp-password-file", str(pw))
    assert kept.returncode == 0, kept.stderr
    assert "BENCHFLEET_AMQP_URL=amqp://benchfleet-worker@10.99.0.1:5672/benchfleet" in (etc / "worker.env").read_text()
    assert "warning: shared broker user benchfleet-worker" in kept.stderr
    own = install_worker(tmp_path, "--broker", "10.99.0.1", "--worker-host", "lh11")
    assert own.returncode == 0, own.stderr
    assert "BENCHFLEET_AMQP_URL=amqp://benchfleet-worker-lh11@10.99.0.1:5672/benchfleet" in (etc / "worker.env").read_text()
    assert "shared broker user" not in own.stderr


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


def test_install_worker_on_a_control_host_keeps_the_hosts_settings_file(tmp_path):
    """ensure-services, called again by install-worker, writes the settings file from the host's
    own local.env/fleet.env (in BENCHFLEET_ETC), never from the checkout's var/."""
    _need_root_and_systemd_analyze()
    etc = tmp_path / "etc"
    etc.mkdir()
    # What install-control leaves on a control host.
    (etc / "local.env").write_text("BENCHFLEET_DB_HOST=10.99.0.7\nBENCHFLEET_DB_USER=benchfleet\n")
    (etc / "fleet.env").write_text("BENCHFLEET_AMQP_URL=amqp://benchfleet-scheduler@10.99.0.7:5672/benchfleet\n")
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    # As on a real host: no BENCHFLEET_CONFIG (the suite's conftest sets it empty), so
    # ensure-services writes a settings file, and it must be the host's.
    env = host_env(tmp_path)
    del env["BENCHFLEET_CONFIG"]
    r = subprocess.run([str(HOST / "install-worker"), "--broker", "10.99.0.7", "--amqp-password-file", str(pw)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "/etc/benchfleet/settings.env" not in r.stderr
    settings = (etc / "settings.env").read_text()
    assert "BENCHFLEET_DB_HOST=10.99.0.7" in settings
    assert "amqp://benchfleet-scheduler@10.99.0.7:5672/benchfleet" in settings
    assert str(ROOT / "var") not in settings


def fake_systemctl(tmp: Path) -> tuple[dict[str, str], Path]:
    """An environment whose `systemctl` only logs its arguments (one line per call), and the log."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    log = tmp / "systemctl.log"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bin_dir / "systemctl").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "BENCHFLEET_START": "yes"}, log


def test_reinstall_after_the_checkout_changed_upgrades_the_code_and_restarts(tmp_path):
    """A re-run of install-worker from an updated checkout installs the new code into the host's
    venv and restarts the unit; a re-run with no change reinstalls nothing and only starts it."""
    _need_root_and_systemd_analyze()
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for f in ("pyproject.toml", "setup.py"):
        shutil.copy(ROOT / f, checkout)
    for d in ("services", "deploy"):
        shutil.copytree(ROOT / d, checkout / d, ignore=shutil.ignore_patterns("__pycache__"))
    extra, log = fake_systemctl(tmp_path)
    env = {**host_env(tmp_path), **extra, "BENCHFLEET_VENV": str(tmp_path / "venv")}
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")

    def install() -> subprocess.CompletedProcess:
        log.write_text("")
        r = subprocess.run([str(checkout / "deploy/host/install-worker"), "--broker", "10.99.0.1",
                            "--amqp-password-file", str(pw)], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return r

    def installed_cli() -> str:
        found = list((tmp_path / "venv").glob("lib/python3*/site-packages/services/worker/cli.py"))
        assert len(found) == 1, found
        return found[0].read_text()

    install()
    assert "# changed by the update" not in installed_cli()
    with open(checkout / "services/worker/cli.py", "a") as f:
        f.write("# changed by the update\n")
    upgraded = install()
    assert "upgrading benchfleet" in upgraded.stderr
    assert installed_cli().endswith("# changed by the update\n")
    assert "restart benchfleet-worker@1.service" in log.read_text()
    again = install()
    assert "upgrading" not in again.stderr and "wrote" not in again.stderr
    assert "restart" not in log.read_text() and "start benchfleet-worker@1.service" in log.read_text()


def bind_conf(tmp: Path, address: str) -> subprocess.CompletedProcess:
    env = {**host_env(tmp), "BENCHFLEET_DB_BIND_ADDRESS": address, "BENCHFLEET_MARIADB_CONF_DIR": str(tmp / "conf"),
           "BENCHFLEET_VAR": str(tmp / "var"), "BENCHFLEET_CONFIG": ""}
    return subprocess.run([str(ROOT / "deploy" / "ensure-services"), "mariadb-conf"], env=env, capture_output=True,
                          text=True, timeout=60)


def test_db_bind_to_one_address_keeps_the_results_db_on_loopback(tmp_path):
    """--db-bind ADDR (BENCHFLEET_DB_BIND_ADDRESS) gives the results DB ADDR and 127.0.0.1, where
    this host's collector and ensure-services reach it; a server started with that list listens on
    both. A wildcard is left alone (127.0.0.1 next to it could not be bound)."""
    _need_root_and_systemd_analyze()
    from tests.integration.faults import ThrowawayMariadb

    r = bind_conf(tmp_path, "127.0.0.2")
    assert r.returncode == 0, r.stderr
    conf = (tmp_path / "conf" / "60-benchfleet.cnf").read_text()
    line = next(x for x in conf.splitlines() if x.startswith("bind-address"))
    assert line == "bind-address = 127.0.0.2,127.0.0.1"
    again = bind_conf(tmp_path, "127.0.0.2")
    assert "unchanged bind-address" in again.stderr and "wrote" not in again.stderr
    # The shared results DB is never restarted: a throwaway server takes the generated list.
    server = ThrowawayMariadb(f"--bind-address={line.split('= ')[1]}")
    try:
        server.start()
        for addr in ("127.0.0.1", "127.0.0.2"):
            with socket.create_connection((addr, server.port), timeout=10):
                pass
    finally:
        server.cleanup()
    assert bind_conf(tmp_path, "0.0.0.0").returncode == 0
    assert "bind-address = 0.0.0.0\n" in (tmp_path / "conf" / "60-benchfleet.cnf").read_text()


def test_each_target_server_gets_a_password_directory_bound_to_it_alone(tmp_path):
    """--target-server twice: two directories, each bound to its server only, so a password put there
    for one server cannot be sent to the other (one shared directory let any go to any)."""
    _need_root_and_systemd_analyze()
    from services.common.errors import TargetError
    from services.worker.target.destinations import Where
    from services.worker.target.secret_policy import SecretPolicy, resolve_password

    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    r = install_worker(tmp_path, "--broker", "10.99.0.1", "--amqp-password-file", str(pw),
                       "--target-server", "10.0.0.20:3307", "--target-server", "db2.example",
                       "--target-server", "[2001:db8::5]")
    assert r.returncode == 0, r.stderr
    tp = tmp_path / "etc" / "target-passwords"
    dirs = {"10.0.0.20_3307": Where("10.0.0.20", 3307), "db2.example_3306": Where("db2.example", 3306),
            "2001-db8--5_3306": Where("2001:db8::5", 3306)}
    assert sorted(p.name for p in tp.iterdir()) == sorted(dirs)
    assert all((tp / d).stat().st_mode & 0o777 == 0o700 for d in dirs)
    env = dict(line.split("=", 1) for line in (tmp_path / "etc" / "worker.env").read_text().splitlines()
               if line and not line.startswith("#"))
    policy = SecretPolicy.from_environ({**env, "BENCHFLEET_SECRETS": str(tmp_path / "secrets"),
                                        "BENCHFLEET_MANAGED_DIR": str(tmp_path / "managed")})
    for d in dirs:
        (tp / d / "pw").write_text(f"pw-{d}\n")
    for d, where in dirs.items():
        assert resolve_password("targets.a", None, str(tp / d / "pw"), {}, policy, where) == f"pw-{d}"
        for other in (o for o in dirs.values() if o != where):
            with pytest.raises(TargetError, match="is not where"):
                resolve_password("targets.a", None, str(tp / d / "pw"), {}, policy, other)


def test_installed_nightly_units_verify_and_gate_the_spec_they_submit(tmp_path):
    """The nightly service and timer, installed as the collector's unit is, verify cleanly; the service
    submits NAME's spec and then gates NAME's history, the timer fires every night; the cron line runs
    the same two commands."""
    sa = _need_root_and_systemd_analyze()
    for unit in ("benchfleet-nightly@.service", "benchfleet-nightly@.timer"):
        r = subprocess.run(["bash", "-c", f". {HOST / 'common.sh'}; install_unit {unit} x"],
                           env=host_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    units = tmp_path / "units"
    # An instance's file is what systemd-analyze verifies (a template alone has no %i).
    for unit in ("benchfleet-nightly@.service", "benchfleet-nightly@.timer"):
        shutil.copy(units / unit, units / unit.replace("@", "@nightly"))
    for unit in ("benchfleet-nightly@nightly.service", "benchfleet-nightly@nightly.timer"):
        r = verify(sa, units / unit)
        assert (r.returncode, r.stdout + r.stderr) == (0, ""), unit
    service = (units / "benchfleet-nightly@.service").read_text()
    venv = ROOT / ".venv"
    assert f"ExecStart={venv}/bin/scheduler submit {tmp_path / 'etc'}/nightly/%i.yaml --wait" in service
    assert (f"ExecStart={venv}/bin/collector history %i --changes --fail-on-slower "
            "${BENCHFLEET_NIGHTLY_FAIL_PCT}") in service
    assert "OnCalendar=*-*-* 02:00:00" in (units / "benchfleet-nightly@.timer").read_text()
    cron = [line for line in (HOST / "benchfleet-nightly.cron").read_text().splitlines()
            if line and not line.startswith("#")]
    assert len(cron) == 1 and cron[0].startswith("0 2 * * * root ")
    assert "scheduler submit /etc/benchfleet/nightly/NAME.yaml --wait && " in cron[0]
    assert cron[0].endswith("collector history NAME --changes --fail-on-slower 5")
