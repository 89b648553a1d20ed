"""`scheduler bisect` over a series of real builds with a regression planted at a known position: the
host's system MariaDB, the same server registered again from /usr, then two builds of it whose server
runs in a cgroup limited to 5% of one CPU (examples/bisect/throttled-build). The worker runs in a cgroup
of its own with a larger CPU weight than a lone process, so the other work on a busy machine moves its
runs less than the planted limit does. The bisect names the first throttled build."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from services.common.spec import server_binary
from services.common.store import Store

from tests.integration.fleet import ROOT, wait_for
from tests.missing import missing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The series, good first; the regression starts at SERIES[SLOW_FROM].
SERIES = ("system", "system-usr", "throttled-a", "throttled-b")
SLOW_FROM = 2
#: The spec and the wrapper of the walk-through in docs/bisect.md.
SPEC = ROOT / "examples" / "bisect.yaml"
THROTTLED_BUILD = ROOT / "examples" / "bisect" / "throttled-build"
V2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
CGROUP_ROOT = Path("/sys/fs/cgroup") if V2 else Path("/sys/fs/cgroup/cpu")
#: The worker's cgroup weight: four busy processes' worth (v1 cpu.shares 1024 and v2 cpu.weight 100 are one).
WORKER_WEIGHT = ("cpu.weight", "400") if V2 else ("cpu.shares", "4096")


def worker_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.worker.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


def remove_cgroup(cg: Path) -> None:
    """Remove ``cg`` and the cgroups under it, killing what still runs in them (a server its worker
    left behind) so nothing of the test outlives it."""
    if not cg.is_dir():
        return
    for child in sorted((p for p in cg.iterdir() if p.is_dir()), reverse=True):
        remove_cgroup(child)
    deadline = time.monotonic() + 30
    while True:
        for pid in (cg / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            cg.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def cgroup():
    """A cgroup of the test's own (the throttled builds' cgroups and the worker's go under it),
    removed afterwards with anything left in it."""
    if os.geteuid() != 0:
        missing("the planted regression needs root to make CPU cgroups")
    if not V2 and not (CGROUP_ROOT / "cpu.cfs_quota_us").exists():
        missing(f"no cgroup v2 and no cgroup v1 cpu hierarchy at {CGROUP_ROOT}")
    name = f"benchfleet-bisect-{secrets.token_hex(3)}"
    try:
        yield name
    finally:
        remove_cgroup(CGROUP_ROOT / name)


@pytest.fixture(scope="module")
def registry(cgroup):
    """The system server registered again from /usr, then the two throttled builds made from it."""
    try:
        system = server_binary.system_binary()
    except Exception as e:
        missing(f"no system server to bisect from: {e}")
    base = system.parent.parent
    d = Path(tempfile.mkdtemp(prefix="bfbi-", dir="/tmp"))
    d.chmod(0o755)
    try:
        p = worker_cli("builds", "add", SERIES[1], "--dir", str(base), "--builds-dir", str(d / "reg"))
        assert p.returncode == 0, p.stdout + p.stderr
        for name in SERIES[SLOW_FROM:]:
            made = subprocess.run([str(THROTTLED_BUILD), str(base), str(d / name), "5", cgroup],
                                  capture_output=True, text=True)
            assert made.returncode == 0, made.stderr
            assert made.stdout.strip() == str(CGROUP_ROOT / cgroup / f"throttled-{name}")
            p = worker_cli("builds", "add", name, "--dir", str(d / name), "--builds-dir", str(d / "reg"))
            assert p.returncode == 0, p.stdout + p.stderr
        yield d / "reg"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def worker_share(cgroup: str, pid: int) -> Path:
    """Move the worker (and so the servers it starts) into ``cgroup``/worker, its weight raised."""
    parent = CGROUP_ROOT / cgroup
    if V2:
        (parent / "cgroup.subtree_control").write_text("+cpu")
    cg = parent / "worker"
    cg.mkdir(exist_ok=True)
    (cg / WORKER_WEIGHT[0]).write_text(WORKER_WEIGHT[1])
    (cg / "cgroup.procs").write_text(str(pid))
    return cg


def test_bisect_finds_the_planted_regression_and_stores_each_step(fleet, cgroup, registry, managed_dir):
    """Four builds, slower from the third on: the bisect takes two decided steps (system-usr not
    slower, throttled-a slower), names throttled-a, prints the path, and each step is a campaign of
    the two builds named for the bisect; only the named cell runs."""
    fleet.start_collector()
    worker = fleet.start_worker("w1", "--managed-dir", str(managed_dir), "--builds-dir", str(registry))
    worker_share(cgroup, worker.pid)

    def announced() -> bool:
        try:
            with Store(fleet.settings) as store:
                return any(SERIES[-1] in a.names() for a in store.workers.pool_builds(fleet.pool))
        except Exception:
            return False

    wait_for(announced, 120, "the worker's build announcement to be stored")
    spec = str(SPEC)
    bad = fleet.cli("scheduler", "bisect", spec, "--pool", fleet.pool, "--good", SERIES[0], "--bad", "nope", "--builds",
                    ",".join((*SERIES[:-1], "nope")), "--effect", "50%")
    assert bad.returncode == 2 and "--builds[3]: build 'nope' is not announced" in bad.stderr, bad.stderr

    t0 = time.monotonic()
    done = fleet.cli("scheduler", "bisect", spec, "--pool", fleet.pool, "--good", SERIES[0], "--bad", SERIES[-1],
                     "--builds", ",".join(SERIES), "--cell", "oltp_point_select:2", "--effect", "50%",
                     "--repeat", "4", "--max-repeat", "8", "--format", "json", "--poll", "0.5", timeout=1200)
    print(f"bisect took {time.monotonic() - t0:.1f} s", done.stderr, done.stdout)  # the path, for -s
    assert done.returncode == 0, done.stdout + done.stderr + fleet.logs()
    out = json.loads(done.stdout)
    assert out["state"] == "found" and out["first_slow"] == SERIES[SLOW_FROM], done.stderr
    assert out["last_good"] == SERIES[SLOW_FROM - 1]
    decided = [s for s in out["steps"] if s["decision"] != "undecided"]
    assert [(s["build"], s["decision"]) for s in decided] == [(SERIES[1], "not slower"), (SERIES[2], "slower")]
    # The path on stderr, step by step, with each step's interval, and the verdict as its last line.
    assert re.search(r"step \d+: throttled-a \(build 3 of 4\) beside system, repeat \d+, campaign \S+: "
                     r"slower\n  oltp_point_select t=2: 0\.\d+ \(-\d+\.\d% q/s, 95% interval", done.stderr), done.stderr
    assert out["verdict"].startswith("first slow build: throttled-a (build 3 of 4); last good: system-usr")

    with Store(fleet.settings) as store:
        for s in out["steps"]:
            c = store.campaigns.get(s["campaign_id"])
            assert c is not None
            assert re.fullmatch(rf"bisect-bisect-{out['bisect_id']}-s{s['step']}", c.spec.name), c.spec.name
            assert [(t.name, t.build) for t in c.spec.targets] == [(SERIES[0], SERIES[0]), (s["build"], s["build"])]
            cells = {(r.cell.target, r.cell.workload) for r in store.results.whole(c.campaign_id)}
            assert cells == {(SERIES[0], "oltp_point_select"), (s["build"], "oltp_point_select")}
            assert len(store.results.whole(c.campaign_id)) == 2 * s["repeat"]
