"""The three CLIs as a user meets them: --version, --help that lists only what a command uses and
says what every option does, one-line errors, exit codes, and `| head` without a traceback."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.collector import cli as collector_cli
from services.common.cli import EXIT_BROKEN_PIPE, EXIT_USAGE
from services.scheduler import cli as scheduler_cli
from services.worker import cli as worker_cli

ROOT = Path(__file__).resolve().parents[2]
CLIS = {"scheduler": scheduler_cli, "worker": worker_cli, "collector": collector_cli}
EXIT_CODES = ("0", "1", "2", "3", "4", "5", "130", "141")


def _run(service: str, *args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", f"services.{service}.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, **kw)


def _help(service: str, *args: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        CLIS[service].main([*args, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found = [("scheduler", scheduler_cli._parser()), ("collector", collector_cli._parser()),
             ("worker", worker_cli._parser()), ("worker prepare", worker_cli._data_parser("prepare")),
             ("worker builds", worker_cli._builds_parser())]
    out = []
    while found:
        name, p = found.pop()
        out.append((name, p))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                found += [(f"{name} {sub}", sp) for sub, sp in a.choices.items()]
    return out


@pytest.mark.parametrize("service", sorted(CLIS))
def test_version_on_every_cli(service):
    """`scheduler --version`, `worker --version` and `collector --version` print the version, exit 0."""
    r = _run(service, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{service} (benchfleet) ") and r.stdout.strip().split()[-1][0].isdigit()


def test_plan_into_head_ends_quietly():
    """`scheduler plan spec | head -2` ends without a BrokenPipeError traceback (exit 141, as shell tools)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "services.scheduler.cli", "plan", "examples/quickstart.yaml",
                          "--repeat", "1000"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    first = [p.stdout.readline(), p.stdout.readline()]
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert first[0].startswith(b"campaign quickstart")
    assert "Traceback" not in err and "BrokenPipe" not in err and err == ""


def test_worker_help_lists_no_results_db_flags(capsys):
    """The worker never reads the results DB, so its --help offers no --db-* flag; its usage names prepare and cleanup."""
    text = _help("worker", capsys=capsys)
    assert "--db-" not in text
    assert "--amqp-url" in text and "--metrics-port" in text and "--run-attempts" in text
    usage = text.split("\n\n")[0]
    assert "worker prepare SPEC" in usage and "worker cleanup SPEC" in usage


def test_validate_help_lists_only_what_validate_reads(capsys):
    """`scheduler validate --help` offers no broker, metrics or retry flags."""
    text = _help("scheduler", "validate", capsys=capsys)
    for flag in ("--metrics-port", "--sd-dir", "--run-attempts", "--amqp-url", "--heartbeat", "--db-host"):
        assert flag not in text
    assert "--max-run-s" in text and "--db-name" in text


def test_report_help_lists_no_broker_flags(capsys):
    """Reports read the results DB only."""
    text = _help("collector", "report", capsys=capsys)
    assert "--db-host" in text
    assert "--amqp-url" not in text and "--metrics-port" not in text and "--run-attempts" not in text


def test_every_option_has_help_text():
    """Every option and argument of every command says what it does in --help."""
    missing = [f"{name}: {a.option_strings or a.dest}" for name, p in _parsers() for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and not a.help]
    assert missing == []


@pytest.mark.parametrize("service", sorted(CLIS))
def test_help_lists_exit_codes(service, capsys):
    """Every CLI's --help ends with the exit codes and what each means."""
    text = _help(service, capsys=capsys)
    codes = text.split("exit codes:")[1].split("\n\n")[0].split()
    assert all(code in codes for code in EXIT_CODES)


def test_operations_page_lists_exit_codes():
    """docs/operations.md says what each exit code means."""
    page = (ROOT / "docs/operations.md").read_text()
    section = page.split("\n## Exit codes")[1].split("\n## ")[0]
    for code in EXIT_CODES:
        assert f"| {code} |" in section


def test_bad_flag_value_is_one_line_without_usage():
    """`collector report foo --metric bogus` prints one `error:` line naming the flag, no usage, exit 2."""
    r = _run("collector", "report", "foo", "--metric", "bogus")
    assert r.returncode == EXIT_USAGE
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: collector report: argument --metric: unknown metric 'bogus'")
    assert "usage:" not in r.stderr and r.stdout == ""


def test_plan_refuses_zero_workers():
    """`scheduler plan --workers 0` is bad input, not a plan."""
    r = _run("scheduler", "plan", "examples/quickstart.yaml", "--workers", "0")
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert r.stderr.startswith("error: scheduler plan: argument --workers: must be at least 1")


def test_history_takes_every_metric_report_takes():
    """`collector history --metric` accepts p50_ms, max_ms, CPU and status:NAME, as `report` does."""
    p = collector_cli._parser()
    base = ["history", "--target", "a", "--workload", "oltp_point_select", "--threads", "4", "--metric"]
    for metric in ("p50_ms", "max_ms", "cpu_us_per_query", "client_cpu_us_per_query", "status:Key_reads"):
        assert p.parse_args(base + [metric]).metric == metric
        assert p.parse_args(["report", "c", "--metric", metric]).metric == metric


def test_readme_demo_time_and_validate_line_are_what_the_cli_prints(tmp_path):
    """The README's demo duration is `scheduler plan`'s estimate, and the validate example of the README
    and of docs/specs.md is the line validate really prints (`error: file:line: field: why`)."""
    r = _run("scheduler", "plan", "examples/quickstart.yaml")
    estimate = r.stdout.splitlines()[1].rsplit(": ", 1)[1]
    readme = (ROOT / "README.md").read_text()
    assert f"estimates {estimate}" in readme and f"estimates {estimate}" in (ROOT / "examples/quickstart.yaml").read_text()
    bad = tmp_path / "spec.yaml"
    bad.write_text((ROOT / "examples/quickstart.yaml").read_text().replace("threads: [1, 8]", "threads: [0]"))
    r = _run("scheduler", "validate", str(bad))
    line = r.stderr.strip().replace(str(bad), "spec.yaml")
    assert r.returncode == EXIT_USAGE
    for page in (readme, (ROOT / "docs/specs.md").read_text()):
        shown = page.split("# exit 2, one line per wrong field: ")[1].split("\n")[0]
        assert line.split(":", 2)[0] == shown.split(":", 2)[0] == "error" and line.split(":")[3:] == shown.split(":")[3:]


def test_license_file_is_mit():
    """The repository says under which license it may be used."""
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "benchfleet developers" in text


_LOST_BROKER = """
import socket, struct, sys, threading
from services.common import logs
from services.common.bus.rabbitmq import RabbitBus
from services.common.config import Settings
from services.common.errors import BusError

srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(5)

def reset_every_connection():
    while True:
        c, _ = srv.accept()
        c.recv(8)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()  # a reset, as a broker going down mid-connection gives

threading.Thread(target=reset_every_connection, daemon=True).start()
logs.configure("scheduler", sys.argv[1])
try:
    RabbitBus(Settings(amqp_url=f"amqp://guest:guest@127.0.0.1:{srv.getsockname()[1]}/%2F")).connect(attempts=2)
except BusError as e:
    print(f"error: {e}", file=sys.stderr)
"""


@pytest.mark.parametrize("level", ["warning", "info"])
def test_a_lost_broker_connection_is_told_in_our_lines_without_pikas_traceback(level):
    """pika logs a reset connection (a broker restart) as ERROR lines with its own traceback; the
    CLIs show only the bus's retry line and the one-line error."""
    r = subprocess.run([sys.executable, "-c", _LOST_BROKER, level], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr and "ConnectionResetError: [Errno" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert any('"event": "bus_connect_retry"' in line for line in lines), r.stderr
    assert lines[-1].startswith("error: cannot connect to RabbitMQ") and "ConnectionResetError" in lines[-1], r.stderr
    assert all(line.startswith(("{", "error: ")) for line in lines), r.stderr
