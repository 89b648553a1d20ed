"""A real Prometheus + Alertmanager for tests: free ports, 1 s scrapes and evaluations, the shipped
rules and configs (deploy/) with only timings, the collapse fraction and addresses changed."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.missing import missing

ROOT = Path(__file__).resolve().parents[2]


def need(binary: str) -> str:
    """The binary's path; skip locally, fail under CI=true, when it is not installed."""
    path = shutil.which(binary)
    if path is None:
        missing(f"{binary} not installed (run deploy/ensure-services prometheus alertmanager)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict | list:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def wait_for(what: str, check, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except OSError as e:  # not listening yet
            last = e
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})", pytrace=False)


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Recorder(http.server.BaseHTTPRequestHandler):
    """Stands in for the user's webhook: remembers every notification Alertmanager posts, in
    the list of the Monitoring that started it (``server.received``)."""

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):  # keep test output quiet
        pass


@dataclass
class Monitoring:
    prometheus: str
    alertmanager: str
    sd_dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    hook: http.server.ThreadingHTTPServer | None = None
    #: Notifications the webhook received, oldest first.
    received: list[dict] = field(default_factory=list)

    def query(self, expr: str) -> list:
        url = f"{self.prometheus}/api/v1/query?query={urllib.parse.quote(expr)}"
        return get_json(url)["data"]["result"]

    def alerts(self, name: str) -> list[dict]:
        return [a for a in get_json(f"{self.alertmanager}/api/v2/alerts") if a["labels"]["alertname"] == name]

    def close(self) -> None:
        for p in self.procs:
            stop(p)
        if self.hook is not None:
            self.hook.shutdown()


def start_monitoring(tmp: Path, fraction: float | None = None) -> Monitoring:
    """Start Alertmanager (webhook to a Recorder here) and Prometheus watching ``tmp/targets``."""
    prometheus, alertmanager = need("prometheus"), need("prometheus-alertmanager")
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    hook.received = received = []  # type: ignore[attr-defined]
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    am_port, prom_port = free_port(), free_port()
    am_conf = yaml.safe_load((ROOT / "deploy/alertmanager/alertmanager.yml").read_text())
    am_conf["receivers"][0]["webhook_configs"][0]["url"] = f"http://127.0.0.1:{hook.server_port}/hook"
    am_conf["route"]["group_wait"] = "1s"
    (tmp / "alertmanager.yml").write_text(yaml.safe_dump(am_conf))
    rules = yaml.safe_load((ROOT / "deploy/prometheus/rules.yml").read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if fraction is not None and rule.get("record") == "benchfleet:collapse_fraction":
                rule["expr"] = f"vector({fraction})"
    (tmp / "rules.yml").write_text(yaml.safe_dump(rules))
    conf = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    conf["global"].update(scrape_interval="1s", evaluation_interval="1s")
    conf["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{am_port}"]
    for job in conf["scrape_configs"]:
        job["file_sd_configs"][0]["refresh_interval"] = "1s"
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(conf))
    (tmp / "targets").mkdir(exist_ok=True)
    m = Monitoring(f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}", tmp / "targets", hook=hook,
                   received=received)
    m.procs = [
        start([alertmanager, f"--config.file={tmp / 'alertmanager.yml'}", f"--storage.path={tmp / 'am'}",
               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="], tmp / "alertmanager.log"),
        start([prometheus, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
               f"--web.listen-address=127.0.0.1:{prom_port}"], tmp / "prometheus.log"),
    ]
    return m
