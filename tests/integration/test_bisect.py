"""`scheduler bisect` over a series of real builds with a regression planted at a known position:
Debian's 10.11.18 and 10.11.19, then two builds of 10.11.19 made slower on purpose (a wrapper that
starts the same binary with every statement logged, the performance schema fully on, at nice 19). The bisect
names the first wrapped build. The walk-through of docs/bisect.md, on a fleet of the test's own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from services.common.store import Store

from tests.integration.fleet import ROOT, wait_for
from tests.missing import missing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VERSIONS = ("10.11.18", "10.11.19")
#: The series, good first; the regression starts at SERIES[SLOW_FROM].
SERIES = ("mariadb-10.11.18", "mariadb-10.11.19", "logged-a", "logged-b")
SLOW_FROM = 2

#: The spec and the wrapper of the walk-through in docs/bisect.md.
SPEC = ROOT / "examples" / "bisect.yaml"
LOGGED_BUILD = ROOT / "examples" / "bisect" / "logged-build"


def worker_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.worker.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def registry():
    """Debian's two builds, then the two wrapped ones, registered with `worker builds add`."""
    if shutil.which("apt-get") is None:
        missing("apt-get is missing: Debian builds cannot be registered here")
    d = Path(tempfile.mkdtemp(prefix="bfbi-", dir="/tmp"))
    d.chmod(0o755)
    try:
        for v in VERSIONS:
            p = worker_cli("builds", "add", f"mariadb-{v}", "--debian", v, "--builds-dir", str(d / "reg"))
            if p.returncode != 0 and "no version" in p.stderr:
                missing(f"Debian's index has no MariaDB {v} here: {p.stderr.strip()}")
            assert p.returncode == 0, p.stdout + p.stderr
        base = Path(json.loads(worker_cli("builds", "list", "--json", "--builds-dir", str(d / "reg")).stdout)[1]["basedir"])
        for name in SERIES[SLOW_FROM:]:
            subprocess.run([str(LOGGED_BUILD), str(base), str(d / name)], check=True)
            p = worker_cli("builds", "add", name, "--dir", str(d / name), "--builds-dir", str(d / "reg"))
            assert p.returncode == 0, p.stdout + p.stderr
        yield d / "reg"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def managed_dir():
    d = Path(tempfile.mkdtemp(prefix="bfm-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_bisect_finds_the_planted_regression_and_stores_each_step(fleet, registry, managed_dir):
    """Four builds, slower from the third on: the bisect takes two decided steps (10.11.19 not
    slower, logged-a slower), names logged-a, and each step is a campaign of the two builds named
    for the bisect; only the named cell runs."""
    fleet.start_collector()
    fleet.start_worker("w1", "--managed-dir", str(managed_dir), "--builds-dir", str(registry))

    def announced() -> bool:
        try:
            with Store(fleet.settings) as store:
                return any("logged-b" in a.names() for a in store.workers.pool_builds(fleet.pool))
        except Exception:
            return False

    wait_for(announced, 120, "the worker's build announcement to be stored")
    spec = str(SPEC)
    bad = fleet.cli("scheduler", "bisect", spec, "--pool", fleet.pool, "--good", SERIES[0], "--bad", "nope", "--builds",
                    ",".join((*SERIES[:-1], "nope")), "--effect", "10%")
    assert bad.returncode == 2 and "--builds[3]: build 'nope' is not announced" in bad.stderr, bad.stderr

    done = fleet.cli("scheduler", "bisect", spec, "--pool", fleet.pool, "--good", SERIES[0], "--bad", SERIES[-1],
                     "--builds", ",".join(SERIES), "--cell", "oltp_point_select:2", "--effect", "15%",
                     "--max-repeat", "20", "--format", "json", "--poll", "0.5", timeout=1200)
    print(done.stderr, done.stdout)  # the path, for a reader running with -s
    assert done.returncode == 0, done.stdout + done.stderr + fleet.logs()
    out = json.loads(done.stdout)
    assert out["state"] == "found" and out["first_slow"] == SERIES[SLOW_FROM], done.stderr
    assert out["last_good"] == SERIES[SLOW_FROM - 1]
    decided = [s for s in out["steps"] if s["decision"] != "undecided"]
    assert [(s["build"], s["decision"]) for s in decided] == [(SERIES[1], "not slower"), (SERIES[2], "slower")]
    # The path on stderr, step by step, with each step's interval.
    assert re.search(r"step \d+: logged-a \(build 3 of 4\) beside mariadb-10\.11\.18, repeat \d+, campaign \S+: "
                     r"slower\n  oltp_point_select t=2: 0\.\d+ \(-\d+\.\d% q/s, 95% interval", done.stderr), done.stderr

    with Store(fleet.settings) as store:
        for s in out["steps"]:
            c = store.campaigns.get(s["campaign_id"])
            assert c is not None
            assert re.fullmatch(rf"bisect-bisect-{out['bisect_id']}-s{s['step']}", c.spec.name), c.spec.name
            assert [(t.name, t.build) for t in c.spec.targets] == [(SERIES[0], SERIES[0]), (s["build"], s["build"])]
            cells = {(r.cell.target, r.cell.workload) for r in store.results.whole(c.campaign_id)}
            assert cells == {(SERIES[0], "oltp_point_select"), (s["build"], "oltp_point_select")}
            assert len(store.results.whole(c.campaign_id)) == 2 * s["repeat"]
