"""The fleet across separate hosts (network namespaces on a private subnet, tests/integration/
hosts.py), each installed by deploy/host/install-control or install-worker and run from the
installed units: a campaign taken by both worker hosts, one of them unplugged mid-run (its run
is measured again by the other, nothing lost, nothing duplicated), and Prometheus on the control
host scraping both workers through the collector's HTTP service discovery."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mysql.connector
import pytest
import yaml

from tests.integration.hosts import HostMariadb, HostRabbit, Tls, Topology, wait_until
from tests.missing import missing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
RUNS = 6


def _need_root() -> None:
    problem = ""
    if os.geteuid() != 0:
        problem = "network namespaces need root"
    else:
        for tool in ("ip", "rabbitmq-server", "mariadbd", "prometheus", "curl", "openssl", "runuser"):
            if shutil.which(tool) is None:
                problem = f"{tool} not installed (deploy/ensure-services rabbitmq mariadb prometheus)"
    if problem:
        missing(problem)


@contextmanager
def four_hosts(roles: tuple[str, ...] = ("ctl", "w1", "w2", "tgt")) -> Iterator[Topology]:
    """A control host, two worker hosts and a target host (or ``roles``), destroyed on the way out."""
    _need_root()
    # Not pytest's tmp_path: its parents are closed to the rabbitmq and mysql users.
    workdir = Path(tempfile.mkdtemp(prefix="bf-hosts-"))
    os.chmod(workdir, 0o755)
    t = Topology(workdir)
    try:
        t.create(list(roles))
        yield t
    except BaseException:
        print(t.logs())
        raise
    finally:
        t.destroy()
        if os.environ.get("BF_KEEP_HOSTS") != "1":
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def topo() -> Iterator[Topology]:
    with four_hosts() as t:
        yield t


def host_paths(topo: Topology, role: str) -> dict[str, str]:
    """deploy/host/common.sh's paths redirected into the host's workdir; this checkout's venv."""
    d = topo.hosts[role].workdir
    return {"BENCHFLEET_PREFIX": str(d / "opt"), "BENCHFLEET_VENV": str(VENV), "BENCHFLEET_ETC": str(d / "etc"),
            "BENCHFLEET_UNIT_DIR": str(d / "units"), "BENCHFLEET_START": "no"}


def curl_json(topo: Topology, role: str, url: str):
    return json.loads(topo.exec(role, "curl", "-sf", "--max-time", "5", url).stdout)


def prom_query(topo: Topology, expr: str) -> list[dict]:
    r = topo.exec("ctl", "curl", "-sf", "--max-time", "5", "--get", "--data-urlencode", f"query={expr}",
                  "http://127.0.0.1:9090/api/v1/query")
    return json.loads(r.stdout)["data"]["result"]


def install_control(topo: Topology, rabbit: HostRabbit, db: HostMariadb, *, twice: bool = False,
                    pools: str = "default") -> Path:
    """Install the control host; ``twice``: and again, which must change nothing (test_two_pools.py
    checks it, in the parallel pass; the other modules building such a fleet skip it)."""
    ctl = topo.hosts["ctl"]
    env = {**host_paths(topo, "ctl"), **rabbit.env, "BENCHFLEET_MARIADB_SOCKET": db.socket,
           "BENCHFLEET_MARIADB_CONF_DIR": str(ctl.workdir / "mariadb.conf.d")}
    args = ["--worker-hosts", "w1,w2", "--client-hosts", topo.subnet_pattern, "--db-bind", "0.0.0.0", "--pools", pools]
    first = topo.exec("ctl", str(ROOT / "deploy/host/install-control"), *args, env=env)
    if twice:
        again = topo.exec("ctl", str(ROOT / "deploy/host/install-control"), *args, env=env)
        assert "wrote" not in again.stderr, f"install-control is not idempotent:\n{again.stderr}"
    assert "bind-address = 0.0.0.0" in (ctl.workdir / "mariadb.conf.d/60-benchfleet.cnf").read_text()
    assert "wrote" in first.stderr
    return ctl.workdir / "etc"


def install_worker(topo: Topology, role: str, ctl_etc: Path, cpu: str, tls: Tls, *env: str, pool: str = "default") -> None:
    host = topo.hosts[role]
    # Each worker host its own broker user (install-control --worker-hosts); the hosts share this
    # machine's host name, so each names itself.
    args = ["--broker", topo.hosts["ctl"].addr, "--worker-host", role, "--pool", pool,
            "--amqp-password-file", str(ctl_etc / f"secrets/amqp_password_worker-{role}"),
            "--tls-ca", str(tls.ca),
            "--metrics-addr", host.addr, "--metrics-port", "9464", "--client-cpus", cpu,
            # Seconds between AMQP heartbeats: the broker notices an unplugged host after two.
            "--env", "BENCHFLEET_HEARTBEAT=5",
            # The target host's throwaway server is reached as its root, which a worker refuses
            # unless its operator names it.
            "--env", "BENCHFLEET_TARGET_PRIVILEGED_USERS=root", *(a for e in env for a in ("--env", e))]
    topo.exec(role, str(ROOT / "deploy/host/install-worker"), *args, env=host_paths(topo, role))


def start_prometheus(topo: Topology) -> None:
    d = topo.hosts["ctl"].workdir / "prometheus"
    d.mkdir()
    conf = yaml.safe_load((ROOT / "deploy/prometheus/prometheus-fleet.yml").read_text())
    conf["global"].update(scrape_interval="1s", evaluation_interval="1s")
    conf.pop("alerting")  # no Alertmanager in this test
    for job in conf["scrape_configs"]:
        for sd in job.get("http_sd_configs", []):
            sd["refresh_interval"] = "1s"
    (d / "prometheus.yml").write_text(yaml.safe_dump(conf))
    shutil.copy(ROOT / "deploy/prometheus/rules.yml", d)
    topo.start("ctl", "prometheus", "prometheus", f"--config.file={d / 'prometheus.yml'}",
               f"--storage.tsdb.path={d / 'tsdb'}", "--web.listen-address=127.0.0.1:9090")


def results_db(ctl_etc: Path, db: HostMariadb) -> mysql.connector.MySQLConnection:
    """The control host's results DB, over its unix socket, as the scheduler's user."""
    password = (ctl_etc / "secrets/db_password").read_text().strip()
    return mysql.connector.connect(unix_socket=db.socket, user="benchfleet", password=password, database="benchfleet",
                                   autocommit=True)


def scheduler_env(topo: Topology, ctl_etc: Path, tls: Tls, role: str) -> dict[str, str]:
    """The scheduler's settings on ``role``: over TLS to the control host's broker and results DB,
    with copies of the scheduler's two password files in that host's workdir."""
    ctl_addr, here = topo.hosts["ctl"].addr, topo.hosts[role].workdir
    for name in ("amqp_password_scheduler", "db_password"):
        shutil.copy(ctl_etc / "secrets" / name, here / name)
    return {"BENCHFLEET_AMQP_URL": f"amqps://benchfleet-scheduler@{ctl_addr}:5671/benchfleet",
            "BENCHFLEET_AMQP_PASSWORD_FILE": str(here / "amqp_password_scheduler"),
            "BENCHFLEET_AMQP_TLS_CA": str(tls.ca), "BENCHFLEET_DB_HOST": ctl_addr, "BENCHFLEET_DB_PORT": "3306",
            "BENCHFLEET_DB_USER": "benchfleet", "BENCHFLEET_DB_PASSWORD_FILE": str(here / "db_password"),
            "BENCHFLEET_DB_TLS_CA": str(tls.ca)}


def rows(conn, sql: str, *params) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, params)
    return list(cur.fetchall())


def test_campaign_across_two_worker_hosts_survives_unplugging_one(topo):
    """Both worker hosts take runs of one campaign; the host unplugged mid-run loses its run to
    the other host, and the campaign ends with exactly one stored result per run; Prometheus on
    the control host scrapes both workers it found through the collector."""
    tls = Tls.make(topo.hosts["ctl"].workdir / "tls", topo.hosts["ctl"].addr)
    rabbit = HostRabbit(topo, "ctl", tls).start()
    db = HostMariadb(topo, "ctl", tls=tls).start()
    HostMariadb(topo, "tgt", grants=False).start()  # the load target the spec names by address
    ctl_etc = install_control(topo, rabbit, db, twice=False)
    ctl_units = topo.hosts["ctl"].workdir / "units"
    # No fleet user of the results DB holds SUPER or PROCESS, nor anything on every database.
    grants = db.root_sql("; ".join(f"SHOW GRANTS FOR '{u}'@'localhost'" for u in
                                   ("benchfleet", "benchfleet_collector", "benchfleet_grafana")))
    assert "benchfleet_grafana" in grants and "ALL PRIVILEGES ON *.*" not in grants, grants
    assert "SUPER" not in grants and "PROCESS" not in grants, grants
    # The collector reads its own two secrets as the unix user benchfleet, and nothing else there.
    # (It runs as root below: this checkout's Python lives under /root, closed to other users.)
    secrets_dir = ctl_etc / "secrets"
    assert topo.exec("ctl", "runuser", "-u", "benchfleet", "--", "cat", str(secrets_dir / "db_collector_password"),
                     check=False).returncode == 0
    assert topo.exec("ctl", "runuser", "-u", "benchfleet", "--", "cat", str(secrets_dir / "db_password"),
                     check=False).returncode != 0
    topo.start_unit("ctl", ctl_units / "benchfleet-collector.service")
    start_prometheus(topo)

    for role, cpu in (("w1", "0"), ("w2", "1")):
        install_worker(topo, role, ctl_etc, cpu, tls)
        topo.start_unit(role, topo.hosts[role].workdir / "units/benchfleet-worker@.service", "1")
    workers = {role: f"{topo.hosts[role].name}-1" for role in ("w1", "w2")}  # Environment=%H-%i

    # The results DB answers the fleet's users from another host of the subnet, not only locally.
    who = topo.exec("w1", "mariadb", "-h", topo.hosts["ctl"].addr, "-ubenchfleet",
                    f"-p{(secrets_dir / 'db_password').read_text().strip()}", "-N", "-e", "SELECT CURRENT_USER()")
    assert who.stdout.strip() == f"benchfleet@{topo.subnet_pattern}"
    # From here on the results DB takes the scheduler's user from other hosts over TLS only.
    db.root_sql(f"ALTER USER 'benchfleet'@'{topo.subnet_pattern}' REQUIRE SSL")
    plain = topo.exec("w2", "mariadb", "--skip-ssl", "-h", topo.hosts["ctl"].addr, "-ubenchfleet",
                      f"-p{(secrets_dir / 'db_password').read_text().strip()}", "-e", "SELECT 1", check=False)
    assert plain.returncode != 0 and "Access denied" in plain.stderr

    listed = lambda: sorted(g["labels"]["worker"] for g in curl_json(  # noqa: E731
        topo, "ctl", "http://127.0.0.1:9465/sd/workers"))
    wait_until("both workers announced to the collector", lambda: listed() == sorted(workers.values()), 180)
    up = lambda: {r["metric"]["worker"]: r["value"][1] for r in prom_query(  # noqa: E731
        topo, 'up{job="benchfleet-worker"}')}
    wait_until("Prometheus scraping both workers", lambda: up() == {w: "1" for w in workers.values()}, 120)
    instances = {r["metric"]["instance"] for r in prom_query(topo, "benchfleet_worker_up")}
    assert instances == {f"{topo.hosts[r].addr}:9464" for r in workers}

    spec = topo.hosts["ctl"].workdir / "spec.yaml"
    spec.write_text(
        "name: several-hosts\npool: default\ntargets:\n"
        f"  - {{name: tgt, host: {topo.hosts['tgt'].addr}, port: 3306, user: root, database: bf_hosts}}\n"
        "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 1000}\n"
        "threads: [1, 2]\nduration: 5s\nwarmup: 0\nrepeat: 3\n")
    # Submitted from another host of the subnet (w2's), over TLS to the broker and the results DB.
    sched_env = scheduler_env(topo, ctl_etc, tls, "w2")
    r = topo.exec("w2", str(VENV / "bin/scheduler"), "submit", str(spec), "--json", env=sched_env)
    campaign = json.loads(r.stdout)["campaign_id"]

    conn = results_db(ctl_etc, db)
    try:
        def second_run_on_w1() -> str | None:
            """A run measuring on w1 after w1 stored one: the host is unplugged in its second run."""
            if not rows(conn, "SELECT 1 FROM results WHERE campaign_id=%s AND worker=%s", campaign, workers["w1"]):
                return None
            # Measuring: its worker's "measuring" event (no warm-up: its window began) moved updated_at
            # past started_at. Not one whose result is stored already (a result and its run's state are
            # one transaction now; when they were not, a run read in between still read running, and
            # the host was once cut after the run it took for its second had ended).
            found = rows(conn, "SELECT run_id FROM runs r WHERE campaign_id=%s AND state='running' AND worker=%s"
                               " AND updated_at > started_at"
                               " AND NOT EXISTS (SELECT 1 FROM results s WHERE s.run_id=r.run_id) ORDER BY seq",
                         campaign, workers["w1"])
            return found[0][0] if found else None
        cut_run = wait_until("w1 measuring its second run", second_run_on_w1, 300, 0.1)
        topo.cut("w1")

        wait_until("the campaign finished", lambda: rows(
            conn, "SELECT state FROM campaigns WHERE campaign_id=%s", campaign)[0][0].startswith("finished"), 360, 1)
        states = rows(conn, "SELECT state, COUNT(*) FROM runs WHERE campaign_id=%s GROUP BY state", campaign)
        assert states == [("done", RUNS)]
        stored = rows(conn, "SELECT run_id, status, worker FROM results WHERE campaign_id=%s", campaign)
        assert len(stored) == len({run_id for run_id, _, _ in stored}) == RUNS, stored
        assert all(status == "ok" for _, status, _ in stored), stored
        by_run = {run_id: worker for run_id, _, worker in stored}
        assert by_run[cut_run] == workers["w2"], "the unplugged host's run was measured again on the other host"
        assert set(by_run.values()) == set(workers.values()), "both hosts stored results"
        [(attempts,)] = rows(conn, "SELECT attempts FROM runs WHERE run_id=%s", cut_run)
        assert attempts >= 2
    finally:
        conn.close()
    # Prometheus sees the unplugged worker down (BenchfleetWorkerDown's expression), the other up.
    wait_until("Prometheus seeing w1 down", lambda: up() == {workers["w1"]: "0", workers["w2"]: "1"}, 120)
