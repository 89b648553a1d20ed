"""Real builds: Debian's two MariaDB 10.11 packages registered on a worker, announced to the fleet,
checked by `scheduler validate`, and compared in a campaign of managed targets, with each
allocator preloaded into a server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import secrets
import tempfile
import time
from pathlib import Path

import pytest

from services.common.store import Store

from tests.integration.broker_admin import BrokerAdmin
from tests.integration.fleet import ROOT, wait_for
from tests.missing import missing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The two MariaDB builds Debian 12's package index holds (bookworm and bookworm-security).
VERSIONS = ("10.11.18", "10.11.19")


def worker_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.worker.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.fixture(scope="module")
def registry():
    """A build registry holding both Debian builds, registered with `worker builds add --debian`.
    Short paths: the managed servers' unix sockets live under the managed directory."""
    if shutil.which("apt-get") is None:
        missing("apt-get is missing: Debian builds cannot be registered here")
    d = Path(tempfile.mkdtemp(prefix="bfb-", dir="/tmp"))
    d.chmod(0o755)
    for v in VERSIONS:
        p = worker_cli("builds", "add", f"mariadb-{v}", "--debian", v, "--builds-dir", str(d))
        if p.returncode != 0 and "no version" in p.stderr:
            shutil.rmtree(d, ignore_errors=True)
            missing(f"Debian's index has no MariaDB {v} here: {p.stderr.strip()}")
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"registered build mariadb-{v}: {v}-MariaDB" in p.stdout, p.stdout
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_registry_lists_both_builds_with_their_versions_and_digests(registry):
    """`worker builds list --json` shows each build's exact version and its server's sha256; the
    two servers differ."""
    p = worker_cli("builds", "list", "--json", "--builds-dir", str(registry))
    assert p.returncode == 0, p.stderr
    records = {r["name"]: r for r in json.loads(p.stdout)}
    assert [records[f"mariadb-{v}"]["version"].split("-")[0] for v in VERSIONS] == list(VERSIONS)
    assert records["mariadb-10.11.18"]["server_sha256"] != records["mariadb-10.11.19"]["server_sha256"]
    assert all(r["source"] == "debian" and "mariadb-server-core=1:" in r["origin"] for r in records.values())
    again = worker_cli("builds", "add", "mariadb-10.11.18", "--debian", "10.11.18", "--builds-dir", str(registry))
    assert again.returncode == 2 and "already registered" in again.stderr, again.stderr


def spec_text(pool: str, targets: str) -> str:
    return (
        "name: builds-it\n"
        f"pool: {pool}\n"
        "targets:\n" + targets +
        "baseline: old\n"
        "workloads: [oltp_point_select]\n"
        "data: {tables: 1, table_size: 2000, engine: MyISAM}\n"
        "threads: [2]\n"
        "duration: 1s\n"
        "warmup: 0.5s\n"
        "repeat: 1\n"
    )


def test_a_campaign_compares_the_two_builds_and_each_allocator(fleet, registry, managed_dir, tmp_path):
    """Workers announce their builds; validate refuses a build no worker has (exit 2, naming the
    field); a campaign runs 10.11.18 against 10.11.19 (and 10.11.19 with jemalloc and tcmalloc),
    and every result records the version, the binary's digest and the allocator loaded."""
    fleet.start_collector()
    fleet.start_worker("w1", "--managed-dir", str(managed_dir), "--builds-dir", str(registry))

    def announced() -> bool:
        try:
            with Store(fleet.settings) as store:
                return any("mariadb-10.11.19" in a.names() for a in store.workers.pool_builds(fleet.pool))
        except Exception:
            return False

    wait_for(announced, 120, "the worker's build announcement to be stored")

    bad = tmp_path / "bad.yaml"
    bad.write_text(spec_text(fleet.pool, "  - {kind: managed, name: old, build: mariadb-9.9.9}\n"))
    v = fleet.cli("scheduler", "validate", str(bad))
    assert v.returncode == 2, v.stdout + v.stderr
    assert f"{bad}:4: targets[0].build: build 'mariadb-9.9.9' is not registered on any worker of pool" in v.stderr
    assert "mariadb-10.11.18" in v.stderr  # the error lists what the pool has

    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(fleet.pool, (
        "  - {kind: managed, name: old, build: mariadb-10.11.18, options: {key_buffer_size: 8M}}\n"
        "  - {kind: managed, name: new, build: mariadb-10.11.19, options: {key_buffer_size: 8M}}\n"
        "  - {kind: managed, name: new-je, build: mariadb-10.11.19, malloc: jemalloc, options: {key_buffer_size: 8M}}\n"
        "  - {kind: managed, name: new-tc, build: mariadb-10.11.19, malloc: tcmalloc, options: {key_buffer_size: 8M}}\n"
    )))
    assert fleet.cli("scheduler", "validate", str(spec)).returncode == 0
    done = fleet.cli("scheduler", "submit", str(spec), "--wait", "--poll", "0.5", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr + fleet.logs()
    cid = re.search(r"campaign (\S+): \d+ runs published", done.stdout).group(1)
    with Store(fleet.settings) as store:
        results = {r.cell.target: r for r in store.results.whole(cid)}
    records = {r["name"]: r for r in json.loads(worker_cli("builds", "list", "--json", "--builds-dir",
                                                           str(registry)).stdout)}
    for target, build, malloc in (("old", "mariadb-10.11.18", "glibc"), ("new", "mariadb-10.11.19", "glibc"),
                                  ("new-je", "mariadb-10.11.19", "jemalloc"),
                                  ("new-tc", "mariadb-10.11.19", "tcmalloc")):
        s = results[target].server
        assert results[target].status == "ok", results[target].error
        assert s.build == build and s.build_version == records[build]["version"], s
        assert s.server_sha256 == records[build]["server_sha256"]
        assert s.version is not None and s.version.startswith(build.split("-")[1]), s.version  # what answered
        assert s.malloc == malloc, (target, s.malloc)
        assert s.binary == records[build]["binary"]
    # The report's settings say what each target ran.
    rep = fleet.cli("collector", "report", cid)
    assert rep.returncode == 0, rep.stderr
    assert re.search(r"^\s+old\s.*build=mariadb-10\.11\.18.*version=10\.11\.18-MariaDB\S* sha256="
                     + records["mariadb-10.11.18"]["server_sha256"][:12], rep.stdout, re.M), rep.stdout
    assert re.search(r"^\s+new-tc\s.*malloc=tcmalloc.*malloc_loaded=tcmalloc", rep.stdout, re.M), rep.stdout


def test_a_fresh_fleets_first_campaign_may_name_a_build(registry, managed_dir, tmp_path, rabbitmq):
    """`make study`'s path on a machine that never ran a campaign: deploy/local/up with a broker user
    per role and nothing declared yet. The scheduler declares the pool's queues at the first submit,
    whose build check needs the worker's builds: the worker announces them while it waits, so
    validate accepts the spec within seconds and the campaign runs."""
    tag = f"benchfleet-t{secrets.token_hex(3)}"
    var = tmp_path / "var"
    env = dict(os.environ, BENCHFLEET_VAR=str(var), BENCHFLEET_CONFIG="", BENCHFLEET_NAMESPACE=tag,
               BENCHFLEET_AMQP_VHOST=tag, BENCHFLEET_AMQP_USER_PREFIX=tag, BENCHFLEET_DB_NAME=tag.replace("-", "_"),
               BENCHFLEET_SD_DIR=str(var / "targets"), BENCHFLEET_LOCAL_MONITORING="0",
               BENCHFLEET_BUILDS_DIR=str(registry), BENCHFLEET_MANAGED_DIR=str(managed_dir),
               BENCHFLEET_BIN=str(Path(sys.executable).parent))
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text("default", "  - {kind: managed, name: old, build: mariadb-10.11.19,"
                                         " options: {key_buffer_size: 8M}}\n"))

    def scheduler(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        # As a user's shell after `make study`: the fleet's env files, the scheduler's broker user.
        return subprocess.run(["sh", "-c", 'set -a; . "$BENCHFLEET_VAR/local.env"; . "$BENCHFLEET_VAR/fleet.env"; '
                               'set +a; exec "$0" "$@"', str(Path(sys.executable).parent / "scheduler"), *args],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    try:
        up = subprocess.run([str(ROOT / "deploy" / "local" / "up"), "collector", "worker"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
        assert up.returncode == 0, up.stdout + up.stderr
        deadline = time.monotonic() + 90
        while (v := scheduler("validate", str(spec))).returncode != 0:
            assert time.monotonic() < deadline, ("the worker never announced its builds before the first submit:\n"
                                                 + v.stderr + (var / "log" / "worker.log").read_text()[-3000:])
            time.sleep(2)
        done = scheduler("submit", str(spec), "--wait", "--poll", "0.5", timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr + (var / "log" / "worker.log").read_text()[-3000:]
        assert re.search(r"^\s+old\s+\d+\s*$", done.stdout, re.M), done.stdout  # its one q/s cell
    finally:
        subprocess.run([str(ROOT / "deploy" / "local" / "down")], env=env, cwd=ROOT, capture_output=True, timeout=120)
        admin = BrokerAdmin(rabbitmq)
        admin.delete_vhost(tag)
        # deploy/local/up's one worker connects as a broker user of its own, worker-local-1.
        for role in ("scheduler", "worker", "collector", "worker-local-1"):
            admin.delete_user(f"{tag}-{role}")
        subprocess.run(["mariadb", "-uroot", "-h127.0.0.1", "-e", f"DROP DATABASE IF EXISTS `{tag.replace('-', '_')}`"],
                       capture_output=True, timeout=60)
