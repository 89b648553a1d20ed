"""No secret leaks: during a campaign, the target's and the results DB's passwords appear in no
log line, bus message, report, /metrics page or process title; metrics listen on 127.0.0.1."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from services.common.bus.rabbitmq import RabbitBus

from tests.integration.fleet import wait_for

pytestmark = pytest.mark.integration


def root_sql(sql: str) -> None:
    subprocess.run(["mariadb", "--protocol=socket", "-uroot", "-e", sql], check=True, capture_output=True, timeout=30)


def test_passwords_never_leak(fleet, tmp_path):
    """A campaign against a target whose password only the workers hold: that password and the
    results DB's are absent from everything an operator or the broker can see."""
    user, password = f"bf_sec_{secrets.token_hex(3)}", "S3cret-" + secrets.token_hex(8)
    try:
        root_sql(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}';"
                 f" GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX ON bf_it_secret.* TO '{user}'@'127.0.0.1';")
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot create a MariaDB user as root over the socket: {e}")
    captured: list[bytes] = []
    try:
        fleet.extra_env["BF_TARGET_PW"] = password
        with RabbitBus(fleet.settings) as bus:
            bus.declare((fleet.pool,))
            bus.declare_control_log()
            n = bus.names
            # The run orders, the targets they name (sent once, on the control log) and the results.
            for q, ex, key in ((f"{n.namespace}.capture.runs", n.runs_exchange, fleet.pool),
                               (f"{n.namespace}.capture.targets", n.definitions, ""),
                               (f"{n.namespace}.capture.results", n.results_exchange, "")):
                bus.tap(q, ex, key)
        fleet.start_collector()
        worker = fleet.start_worker("w1")
        spec = tmp_path / "secret.yaml"
        spec.write_text(
            f"name: secret\npool: {fleet.pool}\n"
            f"targets:\n  - {{name: A, host: 127.0.0.1, port: {fleet.settings.db_port}, user: {user},"
            " password_env: BF_TARGET_PW, database: bf_it_secret}\n"
            "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 500}\n"
            "threads: [1]\nduration: 4s\nwarmup: 0\nrepeat: 1\nrate: 200\n")  # open loop: secrets, not speed
        waiter = subprocess.Popen([sys.executable, "-m", "services.scheduler.cli", "submit", str(spec), "--wait", "--poll", "0.5"],
                                  env=fleet.env(), cwd=Path(__file__).resolve().parents[2],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # While the run measures: /metrics and every fleet process title.
        log_file = next(fleet.workdir.glob("worker-*.log"))
        wait_for(lambda: "run_started" in log_file.read_text(), 60, "the run to start")
        meta = next(json.loads(l) for l in log_file.read_text().splitlines() if '"worker_metrics"' in l)
        assert meta["addr"] == "127.0.0.1"
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{meta['port']}/metrics", timeout=5).read().decode()
        titles = []
        for p in [worker.pid, waiter.pid, *[q.pid for q in fleet.procs]]:
            try:
                titles.append(Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
        for child in subprocess.run(["pgrep", "-g", str(worker.pid)], capture_output=True, text=True).stdout.split():
            try:
                titles.append(Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
        out, err = waiter.communicate(timeout=180)
        assert waiter.returncode == 0, err + fleet.logs()
        cid = re.search(r"campaign (\S+):", out).group(1)
        reports = [fleet.cli("collector", "report", cid, "--format", fmt).stdout for fmt in ("text", "markdown", "json")]
        for fmt in ("html", "ods"):
            assert fleet.cli("collector", "report", cid, "--format", fmt, "--out", str(tmp_path / fmt)).returncode == 0
            if fmt == "ods":  # a zip: its XML members, uncompressed
                with zipfile.ZipFile(tmp_path / fmt) as z:
                    reports.extend(z.read(n).decode(errors="replace") for n in z.namelist())
            else:
                reports.append((tmp_path / fmt).read_text())
        assert fleet.cli("collector", "export", cid, "--json", str(tmp_path / "export.json")).returncode == 0
        reports.append((tmp_path / "export.json").read_text())
        status = fleet.cli("scheduler", "status", cid, "--json").stdout
        with RabbitBus(fleet.settings) as bus:
            for q in (f"{bus.names.namespace}.capture.runs", f"{bus.names.namespace}.capture.targets",
                      f"{bus.names.namespace}.capture.results"):
                while (d := bus.get(q)) is not None:
                    captured.append(d.body)
                    bus.ack(d.delivery_tag)
                bus.delete_queue(q)
        logs = "\n".join(p.read_text(errors="replace") for p in fleet.workdir.glob("*.log"))
    finally:
        root_sql(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'; DROP DATABASE IF EXISTS bf_it_secret;")
    assert len(captured) >= 2 and b"password_env" in b"".join(captured)
    assert "oltp_point_select" in metrics and len(titles) >= 3
    haystacks = {"logs": logs + err, "messages": b"\n".join(captured).decode(errors="replace"), "reports": "\n".join(reports),
                 "status": status, "metrics": metrics, "process titles": "\n".join(titles), "scheduler output": out}
    # Reports and the export do not even say where the target's password is kept.
    assert "BF_TARGET_PW" not in haystacks["reports"] and "password_env" not in haystacks["reports"]
    for secret in filter(None, (password, fleet.settings.db_password)):
        for where, text in haystacks.items():
            assert secret not in text, f"a password leaked into {where}"
