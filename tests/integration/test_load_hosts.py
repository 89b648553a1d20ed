"""One run driven from two load hosts (spec ``load_hosts: 2``), on separate hosts: network
namespaces set up as in test_several_hosts.py (a control host, two worker hosts installed by
deploy/host/install-worker, a target host). The target server sees connections from both worker
hosts during the run, and the results DB holds one merged result recording both parts."""

from __future__ import annotations

import json
import shutil
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.common.messages.results import RunResult
from services.common.messages.codec import decode
from tests.integration.hosts import HostMariadb, HostRabbit, Tls, Topology, wait_until
from tests.integration.test_several_hosts import (
    VENV,
    curl_json,
    four_hosts,
    install_control,
    install_worker,
    results_db,
    rows,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class ClientHosts:
    """Which hosts hold connections to the target's server, sampled every 0.2 s from the target
    host's sockets (``ss``: established TCP connections to port 3306, by peer address), with the
    most seen at once per host. (The server's processlist shows no host under
    --skip-grant-tables, which the target runs with.)"""

    def __init__(self, topo: Topology, role: str = "tgt"):
        self.topo, self.role = topo, role
        self.seen: set[str] = set()
        self.most: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            r = self.topo.exec(self.role, "ss", "-Htn", "state", "established", "( sport = :3306 )", check=False)
            now: dict[str, int] = {}
            for line in r.stdout.splitlines():
                cols = line.split()
                if len(cols) >= 4:
                    peer = cols[3].rsplit(":", 1)[0]
                    now[peer] = now.get(peer, 0) + 1
            self.seen |= set(now)
            for host, n in now.items():
                self.most[host] = max(self.most.get(host, 0), n)

    def __enter__(self) -> "ClientHosts":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclass(frozen=True)
class HostsFleet:
    """What the tests need of the fleet to submit and look."""

    topo: Topology
    db: HostMariadb
    ctl_etc: Path
    workers: dict[str, str]  # role -> the worker's name
    sched_env: dict[str, str]

    def listed(self) -> list[str]:
        """The workers the collector's service discovery lists."""
        return sorted(g["labels"]["worker"] for g in curl_json(self.topo, "ctl", "http://127.0.0.1:9465/sd/workers"))


@pytest.fixture(scope="module")
def hosts_fleet() -> Iterator[HostsFleet]:
    """One fleet for the module (building it is most of each test's time): its workers' parts
    wait 10 s (not 60) beyond the run's length for each other, two tries per part. The test
    that unplugs a host runs last."""
    with four_hosts() as topo:
        yield fleet(topo, "BENCHFLEET_PART_JOIN_S=10", "BENCHFLEET_RUN_ATTEMPTS=2")


def fleet(topo: Topology, *worker_env: str) -> HostsFleet:
    """The three-host fleet of test_several_hosts.py: control host with collector, two worker
    hosts from their units, a target host."""
    tls = Tls.make(topo.hosts["ctl"].workdir / "tls", topo.hosts["ctl"].addr)
    rabbit = HostRabbit(topo, "ctl", tls).start()
    db = HostMariadb(topo, "ctl", tls=tls).start()
    HostMariadb(topo, "tgt", grants=False).start()
    # Installed once: test_two_pools.py checks that installing again changes nothing.
    ctl_etc = install_control(topo, rabbit, db)
    topo.start_unit("ctl", topo.hosts["ctl"].workdir / "units" / "benchfleet-collector.service")
    for role, cpu in (("w1", "0"), ("w2", "1")):
        install_worker(topo, role, ctl_etc, cpu, tls, *worker_env)
        topo.start_unit(role, topo.hosts[role].workdir / "units/benchfleet-worker@.service", "1")
    workers = {role: f"{topo.hosts[role].name}-1" for role in ("w1", "w2")}
    listed = lambda: sorted(g["labels"]["worker"] for g in curl_json(  # noqa: E731
        topo, "ctl", "http://127.0.0.1:9465/sd/workers"))
    wait_until("both workers announced to the collector", lambda: listed() == sorted(workers.values()), 90)
    secrets_dir, ctl_addr, w2_dir = ctl_etc / "secrets", topo.hosts["ctl"].addr, topo.hosts["w2"].workdir
    for name in ("amqp_password_scheduler", "db_password"):
        shutil.copy(secrets_dir / name, w2_dir / name)
    sched_env = {"BENCHFLEET_AMQP_URL": f"amqps://benchfleet-scheduler@{ctl_addr}:5671/benchfleet",
                 "BENCHFLEET_AMQP_PASSWORD_FILE": str(w2_dir / "amqp_password_scheduler"),
                 "BENCHFLEET_AMQP_TLS_CA": str(tls.ca), "BENCHFLEET_DB_HOST": ctl_addr, "BENCHFLEET_DB_PORT": "3306",
                 "BENCHFLEET_DB_USER": "benchfleet", "BENCHFLEET_DB_PASSWORD_FILE": str(w2_dir / "db_password"),
                 "BENCHFLEET_DB_TLS_CA": str(tls.ca)}
    return HostsFleet(topo, db, ctl_etc, workers, sched_env)


def submit(topo: Topology, sched_env: dict[str, str], text: str) -> str:
    spec = topo.hosts["ctl"].workdir / "spec.yaml"
    spec.write_text(text)
    plan = topo.exec("w2", str(VENV / "bin/scheduler"), "plan", str(spec), env=sched_env)
    assert "load_hosts: 2" in plan.stdout, plan.stdout
    r = topo.exec("w2", str(VENV / "bin/scheduler"), "submit", str(spec), "--json", env=sched_env)
    return json.loads(r.stdout)["campaign_id"]


def stored(conn, campaign: str) -> list[RunResult]:
    return [decode(zlib.decompress(z)) for (z,) in rows(conn, "SELECT result_z FROM results WHERE campaign_id=%s",
                                                         campaign)]


def spec_text(topo: Topology, database: str, duration: str) -> str:
    return ("name: load-hosts\npool: default\ntargets:\n"
            f"  - {{name: tgt, host: {topo.hosts['tgt'].addr}, port: 3306, user: root, database: {database}}}\n"
            "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 1000}\n"
            f"threads: [4]\nduration: {duration}\nwarmup: 1s\nrepeat: 1\nload_hosts: 2\n")


def test_one_run_from_two_load_hosts(hosts_fleet: HostsFleet):
    """One run with load_hosts: 2 is driven from both worker hosts at once against the one
    target: the server sees both hosts' connections, and one merged result records both parts,
    its transactions the sum of theirs."""
    topo, db, ctl_etc, workers, sched_env = (hosts_fleet.topo, hosts_fleet.db, hosts_fleet.ctl_etc,
                                             hosts_fleet.workers, hosts_fleet.sched_env)
    campaign = submit(topo, sched_env, spec_text(topo, "bf_parts", "6s"))
    conn = results_db(ctl_etc, db)
    try:
        with ClientHosts(topo) as clients:
            wait_until("the campaign finished", lambda: rows(
                conn, "SELECT state FROM campaigns WHERE campaign_id=%s", campaign)[0][0].startswith("finished"), 240, 1)
        results = stored(conn, campaign)
        assert len(results) == 1, [r.run_id for r in results]
        [r] = results
        assert r.status == "ok", r.error
        w1, w2 = topo.hosts["w1"].addr, topo.hosts["w2"].addr
        assert {w1, w2} <= clients.seen, f"connections seen from {clients.seen}"
        # Two connections each (4 threads over 2 hosts), plus prepare's and quiesce's now and then.
        assert clients.most[w1] >= 2 and clients.most[w2] >= 2, clients.most
        assert r.parts is not None and len(r.parts) == 2
        assert sorted(p.worker for p in r.parts) == sorted(workers.values())
        assert [p.threads for p in r.parts] == [2, 2]
        assert r.totals.transactions > 0
        assert r.totals.transactions == sum(p.transactions or 0 for p in r.parts)
        # The parts' per-connection windows merged: the run's 4 connections, each completing some.
        assert r.window is not None and r.window.connections == 4, r.window
        assert r.window.completed_per_connection_min >= 1 and r.window.starved_connections == 0
        assert len({p.group for p in r.parts}) == 1
        # Part 1 measured its clock against part 0's over the bus (one machine: about 0 apart).
        assert r.parts[0].clock_offset_s == 0.0 and r.parts[1].rtt_s is not None
        assert abs(r.parts[1].clock_offset_s) < 0.5, r.parts[1]
        assert len(r.series.transactions) >= 5
        [(state, attempts)] = rows(conn, "SELECT state, attempts FROM runs WHERE campaign_id=%s", campaign)
        assert state == "done" and attempts == 1
        print(f"load_hosts: {r.totals.transactions} transactions = "
              f"{' + '.join(str(p.transactions) for p in r.parts)}; offsets "
              f"{[round(p.clock_offset_s, 6) for p in r.parts]} s, rtt {[p.rtt_s for p in r.parts]}; "
              f"hosts seen {sorted(clients.seen)} (most connections {clients.most})")
    finally:
        conn.close()


def test_a_part_lost_mid_run_is_never_stored_half(hosts_fleet: HostsFleet):
    """One worker host is unplugged while the two parts measure: the other part gives up, and
    the run ends failed whole (the one worker left cannot take both parts), never stored with
    half its load."""
    topo, db, ctl_etc, sched_env = hosts_fleet.topo, hosts_fleet.db, hosts_fleet.ctl_etc, hosts_fleet.sched_env
    conn = results_db(ctl_etc, db)
    try:
        # The shared fleet as a fresh one: both workers announced, no run in progress or queued,
        # and no connection to the target left over from an earlier test.
        assert hosts_fleet.listed() == sorted(hosts_fleet.workers.values())
        assert rows(conn, "SELECT COUNT(*) FROM runs WHERE state NOT IN ('done', 'failed', 'cancelled')") == [(0,)]
        assert rows(conn, "SELECT COUNT(*) FROM campaigns WHERE state NOT LIKE %s", "finished%") == [(0,)]
        with ClientHosts(topo) as idle:
            time.sleep(1)
        assert not idle.seen, f"connections to the target before the campaign: {idle.seen}"
        campaign = submit(topo, sched_env, spec_text(topo, "bf_parts_lost", "12s"))
        wait_until("both parts measuring", lambda: rows(
            conn, "SELECT 1 FROM runs WHERE campaign_id=%s AND state='running'", campaign), 180, 0.2)
        with ClientHosts(topo) as clients:
            wait_until("both hosts connected", lambda: {topo.hosts["w1"].addr, topo.hosts["w2"].addr} <= clients.seen,
                       60, 0.2)
        time.sleep(2)
        topo.cut("w1")
        wait_until("the campaign finished", lambda: rows(
            conn, "SELECT state FROM campaigns WHERE campaign_id=%s", campaign)[0][0].startswith("finished"), 600, 2)
        results = stored(conn, campaign)
        assert len(results) == 1
        [r] = results
        assert r.status == "failed" and "load_hosts" in (r.error or ""), r.error
        assert r.totals.transactions == 0 and r.series.transactions == [] and r.measured_s == 0
        print(f"lost part: stored {r.status}: {r.error}")
    finally:
        conn.close()
