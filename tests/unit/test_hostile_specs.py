"""Hostile specs (tests/unit/hostile_specs.py): `scheduler validate` refuses every one with exit 2,
one short `error: FILE:LINE: FIELD: message` line per problem naming the field, no traceback,
and nothing connected; each within 2 s and 500 MB. The time and memory bounds catch hangs and
blow-ups (an alias bomb, a 2-million-run matrix), not speed: a case takes milliseconds."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from services.scheduler import cli
from tests.unit.hostile_specs import CASES, Case

ROOT = Path(__file__).resolve().parents[2]
MAX_SECONDS = 2.0
MAX_BYTES = 500 * 2**20


class Refuse:
    """Stands in for Store and Bus: a refused spec must never get as far as connecting."""

    def __init__(self, *a, **k):
        raise AssertionError("a hostile spec reached the results DB or the broker")


def _fields(err: str, path: Path) -> list[tuple[int | None, str]]:
    out = []
    for line in err.splitlines():
        m = re.match(rf"^error: {re.escape(str(path))}(?::(\d+))?: (.*?): \S", line)
        assert m, f"not an `error: FILE[:LINE]: FIELD: message` line: {line[:300]!r}"
        out.append((int(m.group(1)) if m.group(1) else None, m.group(2)))
    return out


def test_the_corpus_is_large_and_varied():
    """At least 80 cases, named distinctly, covering every kind the issue lists."""
    assert len(CASES) >= 80
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("command", ["validate"])
def test_hostile_spec_is_refused_naming_the_field(case: Case, command, tmp_path, capsys, monkeypatch):
    """Exit 2, the expected field among the errors, short single lines, no traceback, no I/O."""
    monkeypatch.setattr(cli, "Store", Refuse)
    monkeypatch.setattr(cli, "RabbitBus", Refuse)
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(case.content)
    code = cli.main([command, str(spec)])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err[:2000])
    assert "Traceback" not in err and not out
    fields = _fields(err, spec)
    assert case.field in [f for _, f in fields], err[:2000]
    assert all(len(line) < 600 for line in err.splitlines()), "an error line echoes the hostile input"


def test_plan_and_submit_refuse_what_validate_refuses(tmp_path, capsys, monkeypatch):
    """One validation everywhere: plan and submit refuse a 3-hour run and the results DB too."""
    monkeypatch.setattr(cli, "Store", Refuse)
    monkeypatch.setattr(cli, "RabbitBus", Refuse)
    for name in ("3 h run", "the results DB", "infinite duration", "two million runs"):
        case = next(c for c in CASES if c.name == name)
        spec = tmp_path / "spec.yaml"
        spec.write_bytes(case.content)
        for command in ("validate", "plan", "submit"):
            assert cli.main([command, str(spec)]) == 2, (name, command)
            assert case.field in [f for _, f in _fields(capsys.readouterr().err, spec)], (name, command)


_MEASURE = textwrap.dedent("""
    import contextlib, io, json, resource, sys, time, tracemalloc
    from services.scheduler import cli
    out = []
    for path in sys.argv[1:]:
        # CPU time, not wall time: a hang or blow-up burns CPU, while a busy machine's wait for
        # the CPU is no fault of the case (wall time failed this test at load average 10).
        t0 = time.process_time()
        with contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(["validate", path])
        seconds = time.process_time() - t0
        # Again with allocations traced (which slows them), for the memory peak.
        tracemalloc.start()
        with contextlib.redirect_stderr(io.StringIO()):
            cli.main(["validate", path])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out.append({"path": path, "code": code, "seconds": seconds, "peak": peak})
    print(json.dumps({"cases": out, "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
""")


def test_every_case_is_refused_within_2_s_and_500_mb(tmp_path):
    """The whole corpus in one process: each case's time and traced memory peak, and the
    process's peak RSS, stay within the bounds."""
    paths = []
    for i, case in enumerate(CASES):
        p = tmp_path / f"case{i}.yaml"
        p.write_bytes(case.content)
        paths.append(str(p))
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *paths], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    names = {str(tmp_path / f"case{i}.yaml"): c.name for i, c in enumerate(CASES)}
    for r in report["cases"]:
        assert r["code"] == 2, names[r["path"]]
        assert r["seconds"] < MAX_SECONDS, (names[r["path"]], r["seconds"])
        assert r["peak"] < MAX_BYTES, (names[r["path"]], r["peak"])
    assert report["maxrss"] < MAX_BYTES


def _run_alone(argv: list[str], timeout: float = 60) -> tuple[subprocess.CompletedProcess, resource.struct_rusage]:
    """Run ``argv`` and return its outcome with the rusage of that one process: RUSAGE_CHILDREN
    would hold the largest child the whole test session ever reaped (a server of an integration
    test), not this one's."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (subprocess.CompletedProcess(argv, proc.returncode, out.read().decode(), err.read().decode()),
                usage)


@pytest.mark.parametrize("name", ["billion laughs", "20,000-deep list", "byte 0xff", "two million runs", "2 MB file"])
def test_the_real_command_refuses_the_worst_cases(name, tmp_path):
    """Through the installed entry point in a process of its own: exit 2, an `error:` line, no
    traceback, within the time bound, and a peak RSS within the memory bound."""
    case = next(c for c in CASES if c.name == name)
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(case.content)
    p, usage = _run_alone([sys.executable, "-m", "services.scheduler.cli", "validate", str(spec)])
    # The child's CPU time (see _MEASURE); the timeout bounds the wall time of a hang that sleeps.
    seconds = usage.ru_utime + usage.ru_stime
    assert p.returncode == 2 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert case.field in [f for _, f in _fields(p.stderr, spec)]
    # Interpreter start-up and imports included: still well within the bound.
    assert seconds < MAX_SECONDS + 3, seconds
    assert usage.ru_maxrss * 1024 < MAX_BYTES
