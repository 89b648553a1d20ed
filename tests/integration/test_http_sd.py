"""Discovery across hosts, on one host: workers announce their /metrics on the bus, the collector
lists them at /sd/workers, and a real Prometheus configured by deploy/prometheus/prometheus-fleet.yml
(only ports and intervals changed) scrapes them; the list survives a collector restart and a
worker stopped on purpose leaves it."""

from __future__ import annotations

import os
import random
import signal
import socket

import pytest
import yaml

from tests.integration.fleet import ROOT
from tests.integration.monitoring import free_port, get_json, need, start, stop, wait_for

pytestmark = pytest.mark.integration


def fixed_port() -> int:
    """A free port below the ephemeral range, as a deployment's fixed ports are (9464, 9465):
    a port from the ephemeral range may be taken, while its service restarts, by the outgoing
    connection of a scraper trying to reach it (a TCP self-connect)."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(100):
        port = random.randrange(20000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def start_prometheus(tmp, collector_port: int):
    prom_port = free_port()
    conf = yaml.safe_load((ROOT / "deploy/prometheus/prometheus-fleet.yml").read_text())
    conf["global"].update(scrape_interval="1s", evaluation_interval="1s")
    conf.pop("alerting")
    conf.pop("rule_files")
    for job in conf["scrape_configs"]:
        for sd in job.get("http_sd_configs", []):
            sd["url"] = sd["url"].replace(":9465", f":{collector_port}")
            sd["refresh_interval"] = "1s"
        for sc in job.get("static_configs", []):
            sc["targets"] = [t.replace(":9465", f":{collector_port}") for t in sc["targets"]]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(conf))
    proc = start([need("prometheus"), f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{prom_port}"], tmp / "prometheus.log")
    return proc, f"http://127.0.0.1:{prom_port}"


def worker_targets(prom: str) -> list[dict]:
    active = get_json(f"{prom}/api/v1/targets?state=active")["data"]["activeTargets"]  # type: ignore[index]
    return [t for t in active if t["labels"]["job"] == "benchfleet-worker"]


def test_prometheus_scrapes_workers_listed_by_the_collector(fleet, tmp_path):
    """Two workers with fixed ports are listed with their pool; Prometheus finds and scrapes both;
    a restarted collector lists them again from the results DB; a stopped worker leaves."""
    cport, ports = fixed_port(), (fixed_port(), fixed_port())
    fleet.extra_env.update(BENCHFLEET_METRICS_ADDR="127.0.0.1", BENCHFLEET_METRICS_PORT=str(cport))
    collector = fleet.start_collector()
    workers = []
    for i, port in enumerate(ports, 1):
        fleet.extra_env["BENCHFLEET_METRICS_PORT"] = str(port)
        workers.append(fleet.start_worker(f"sd-w{i}"))
    sd = f"http://127.0.0.1:{cport}/sd/workers"
    expected = [{"targets": [f"127.0.0.1:{p}"], "labels": {"worker": f"sd-w{i}", "pool": fleet.pool}}
                for i, p in enumerate(ports, 1)]
    wait_for("both workers listed", lambda: get_json(sd) == expected)
    prom_proc, prom = start_prometheus(tmp_path, cport)
    try:
        def both_up() -> bool:
            ts = worker_targets(prom)
            return sorted((t["labels"]["worker"], t["labels"]["pool"], t["health"]) for t in ts) == [
                ("sd-w1", fleet.pool, "up"), ("sd-w2", fleet.pool, "up")]
        wait_for("Prometheus scraping both workers", both_up)
        up = get_json(f"{prom}/api/v1/query?query=benchfleet_worker_up")["data"]["result"]  # type: ignore[index]
        assert sorted(r["metric"]["instance"] for r in up) == sorted(f"127.0.0.1:{p}" for p in ports)

        os.killpg(collector.pid, signal.SIGTERM)
        collector.wait(30)
        fleet.extra_env["BENCHFLEET_METRICS_PORT"] = str(cport)
        fleet.start_collector()
        wait_for("the restarted collector lists the fleet", lambda: get_json(sd) == expected)

        os.killpg(workers[1].pid, signal.SIGTERM)
        workers[1].wait(30)
        wait_for("the stopped worker withdrawn", lambda: get_json(sd) == expected[:1])
        wait_for("Prometheus dropping it", lambda: [t["labels"]["worker"] for t in worker_targets(prom)] == ["sd-w1"])
    finally:
        stop(prom_proc)


def test_announcements_not_refreshed_within_the_ttl_are_ignored(fleet, tmp_path):
    """A worker and a host that stopped announcing long ago (decommissioned, no clean stop) are
    left out: the collector does not list the ghost worker for Prometheus, and `scheduler
    validate` refuses a build only that host had, naming the host in a note; a running worker,
    which announces again every minute, stays listed."""
    import time

    from services.common.messages.builds import BuildInfo
    from services.common.messages.announcements import WorkerAnnouncement, WorkerBuilds
    from services.common.store import Store

    old = time.time() - 3600
    with Store(fleet.settings) as store:
        store.workers.record_announcement(WorkerAnnouncement(worker="ghost", pool=fleet.pool, state="up",
                                                     address="127.0.0.1:9", at=old))
        store.workers.record_builds(WorkerBuilds(
            worker="ghost", host="h-gone", pool=fleet.pool, at=old,
            builds=[BuildInfo(name="only-there", version="10.11.18-MariaDB", server_sha256="a" * 64, source="debian")]))
    cport, wport = fixed_port(), fixed_port()
    fleet.extra_env.update(BENCHFLEET_METRICS_ADDR="127.0.0.1", BENCHFLEET_METRICS_PORT=str(cport),
                           BENCHFLEET_ANNOUNCE_TTL_S="900")
    fleet.start_collector()
    fleet.extra_env["BENCHFLEET_METRICS_PORT"] = str(wport)
    fleet.start_worker("sd-live")
    sd = f"http://127.0.0.1:{cport}/sd/workers"
    wait_for("the live worker listed, the ghost not", lambda: get_json(sd) == [
        {"targets": [f"127.0.0.1:{wport}"], "labels": {"worker": "sd-live", "pool": fleet.pool}}])
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: ttl\npool: {fleet.pool}\ntargets:\n  - {{kind: managed, name: a, build: only-there}}\n"
                    "workloads: [oltp_point_select]\nthreads: [1]\nduration: 3s\n")
    r = fleet.cli("scheduler", "validate", str(spec))
    assert r.returncode == 2 and "targets[0].build: build 'only-there'" in r.stderr, r.stdout + r.stderr
    assert "builds of host h-gone ignored: last announced 60 min ago" in r.stderr
