"""Managed targets with real mariadbd servers: the worker starts them with the spec's options,
records their effective values, fails a run whose server cannot start with its log tail, and
leaves no server behind when it is killed."""

from __future__ import annotations

import grp
import os
import pwd
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.store import Store

from tests.integration.fleet import ROOT, Fleet, wait_for
from tests.missing import missing

pytestmark = pytest.mark.integration

MARIADBD = "/usr/sbin/mariadbd"


def servers_under(path: Path) -> list[int]:
    """Pids of mariadbd processes whose command line names ``path``."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith((b"mariadbd", b"mysqld")) and str(path).encode() in b" ".join(cmd):
            pids.append(int(p.name))
    return pids


def spec_text(fleet: Fleet, targets: str, duration: str = "1s", workloads: str = "[oltp_point_select]") -> str:
    return (
        "name: managed-it\n"
        f"pool: {fleet.pool}\n"
        "targets:\n" + targets +
        f"workloads: {workloads}\n"
        "data: {tables: 1, table_size: 2000, engine: MyISAM}\n"
        "threads: [2]\n"
        f"duration: {duration}\n"
        "warmup: 0.5s\n"
        "repeat: 1\n"
    )


def campaign_id(out: str) -> str:
    m = re.search(r"campaign (\S+): \d+ runs published", out)
    assert m, out
    return m.group(1)


def test_two_targets_differing_in_one_option_and_a_server_that_cannot_start(fleet, managed_dir, tmp_path):
    """Effective values of the options each target set are stored with its result, with status
    deltas and CPU seconds; a server that fails to start fails its run with its error log tail."""
    fleet.start_collector()
    fleet.start_worker("w1", "--managed-dir", str(managed_dir))
    targets = (
        "  - {kind: managed, name: 'off', options: {key_buffer_size: 8M, key_cache_segments: 0}}\n"
        "  - {kind: managed, name: '8', options: {key_buffer_size: 8M, key_cache_segments: 8}}\n"
        "  - {kind: managed, name: broken, options: {character_set_server: no_such_charset}}\n"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(fleet, targets))
    done = fleet.cli("scheduler", "submit", str(spec), "--wait", "--poll", "0.5", timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr + fleet.logs()  # one run failed, on purpose
    cid = campaign_id(done.stdout)
    assert "8 / off" in done.stdout or re.search(r"^\s*8\b", done.stdout, re.M), done.stdout
    with Store(fleet.settings) as store:
        results = {r.cell.target: r for r in store.results.whole(cid)}
    off, eight, broken = results["off"], results["8"], results["broken"]
    assert off.status == "ok" and eight.status == "ok", (off.error, eight.error)
    assert off.server.variables == {"key_buffer_size": "8388608", "key_cache_segments": "0"}
    assert eight.server.variables == {"key_buffer_size": "8388608", "key_cache_segments": "8"}
    assert eight.server.version is not None and eight.server.version.startswith("10.")
    assert eight.server.status_deltas["Com_select"] > 0
    assert eight.server.status_deltas["Key_read_requests"] > 0
    assert eight.server.threads_running_peak is not None and eight.server.threads_running_peak >= 1
    assert eight.server.server_cpu_s and eight.server.server_cpu_s > 0
    assert eight.server.client_cpu_s and eight.server.client_cpu_s > 0
    assert eight.server.server_cpus != eight.server.client_cpus or len(os.sched_getaffinity(0)) == 1
    assert broken.status == "failed" and broken.error is not None
    assert "exited with code" in broken.error and "no_such_charset" in broken.error, broken.error


def test_bad_option_fails_validation_naming_it(tmp_path):
    """A typo in an option name fails `scheduler validate` with exit 2, the name and a suggestion."""
    if not Path(MARIADBD).exists():
        missing(f"{MARIADBD} is missing")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: typo\n"
        "targets:\n"
        "  - kind: managed\n"
        "    name: a\n"
        "    options:\n"
        "      key_buffer_size: 8M\n"
        "      key_cache_segmnts: 8\n"
        "workloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n"
    )
    p = subprocess.run([sys.executable, "-m", "services.scheduler.cli", "validate", str(spec)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{spec}:7: targets[0].options.key_cache_segmnts: not an option" in p.stderr, p.stderr
    assert "did you mean key_cache_segments?" in p.stderr


def test_killed_worker_leaves_no_server_behind(fleet, managed_dir, tmp_path):
    """SIGKILL to a worker in the middle of a run takes its mariadbd with it (parent-death signal)."""
    # The collector binds the results queue: without it the worker's announcement is unroutable
    # and the worker retries it instead of taking the run.
    fleet.start_collector()
    worker = fleet.start_worker("w-doomed", "--managed-dir", str(managed_dir))
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(fleet, "  - {kind: managed, name: doomed, options: {key_buffer_size: 8M}}\n",
                              duration="60s"))
    sub = fleet.cli("scheduler", "submit", str(spec))
    assert sub.returncode == 0, sub.stderr
    run_dir = managed_dir / "run" / str(worker.pid)
    wait_for(lambda: servers_under(run_dir), 120, "the worker to start its managed server")
    pids = servers_under(run_dir)
    if os.geteuid() == 0:
        # The server a real (root) worker starts runs as the dedicated user too.
        from services.worker.target.managed_template import SERVER_USER

        args = Path(f"/proc/{pids[0]}/cmdline").read_bytes().decode().split("\0")
        datadir = next(Path(a.split("=", 1)[1]) for a in args if a.startswith("--datadir="))
        assert_runs_as_the_server_user(pids[0], datadir, SERVER_USER)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(10)
    wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 15, "the managed server to die with its worker")
    # The next worker on this host sweeps the dead worker's datadirs away.
    from services.worker.target import managed

    m = managed.ServerManager(base_dir=managed_dir)
    m._sweep_dead_workers()
    m.close()
    assert not run_dir.exists()


SYSTEM_DATADIR = Path("/var/lib/mysql")


def assert_runs_as_the_server_user(pid: int, datadir: Path, user: str) -> None:
    """The server ``pid`` runs as ``user`` (real, effective, saved and filesystem uid), which is
    neither root nor mysql, owns ``datadir`` and cannot write the system server's datadir."""
    me = pwd.getpwnam(user)
    status = Path(f"/proc/{pid}/status").read_text()
    uids = [int(x) for x in re.search(r"^Uid:\s+(.*)$", status, re.M).group(1).split()]
    assert uids == [me.pw_uid] * 4, status
    assert me.pw_uid != 0 and user not in ("root", "mysql")
    try:
        assert me.pw_uid != pwd.getpwnam("mysql").pw_uid, "the server user shares mysql's uid"
    except KeyError:
        pass  # no mysql user on this host: nothing to share
    assert datadir.stat().st_uid == me.pw_uid
    if SYSTEM_DATADIR.exists():
        st = SYSTEM_DATADIR.stat()
        groups = {g.gr_gid for g in grp.getgrall() if user in g.gr_mem} | {me.pw_gid}
        writable = (st.st_uid == me.pw_uid and st.st_mode & stat.S_IWUSR) or \
            (st.st_gid in groups and st.st_mode & stat.S_IWGRP) or st.st_mode & stat.S_IWOTH
        assert not writable, f"{SYSTEM_DATADIR} is writable by {user}: {oct(st.st_mode)} uid {st.st_uid} gid {st.st_gid}"


def test_server_is_reused_for_the_same_target_and_stopped_for_another(managed_dir):
    """Consecutive runs of one target and shape share a server; another target stops it first,
    and the datadirs go at close unless kept."""
    from services.common.spec.targets import ManagedTarget
    from services.common.spec.workloads import DataShape
    from services.worker.target import managed, managed_template

    m = managed.ServerManager(base_dir=managed_dir)
    a = ManagedTarget(kind="managed", name="a", options={"key_buffer_size": "8M"})
    b = ManagedTarget(kind="managed", name="b", options={"key_buffer_size": "16M"})
    try:
        first = m.ensure(a, DataShape())
        pid = first.pid
        assert not first.reused and first.start_s < 30
        assert os.sched_getaffinity(pid) == set(first.server_cpus)
        if os.geteuid() == 0:
            assert_runs_as_the_server_user(pid, first.datadir, managed_template.SERVER_USER)
        again = m.ensure(a, DataShape())
        assert again.reused and again.pid == pid
        other = m.ensure(b, DataShape())
        assert other.pid != pid and not Path(f"/proc/{pid}").exists()
        other_pid = other.pid
        reshaped = m.ensure(b, DataShape(tables=2))
        assert not reshaped.reused and reshaped.pid != other_pid
    finally:
        m.close()
    assert not m.run_dir.exists() and not servers_under(m.run_dir)
