"""The sysbench driver's command line, built from a run's options (no sysbench needed)."""

from __future__ import annotations

import pytest

from services.common.spec.campaign import CampaignSpec
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.sysbench import driver as sd
from services.common.errors import LoadError
from services.worker.target.connect_params import ConnectParams

PARAMS = ConnectParams(host="db1", port=3307, user="bench", password="s3cret", database="sbtest_off")


def test_command_carries_every_run_option():
    """A run's tables, rows, engine, options, distribution, seed, threads and time reach sysbench by their sysbench names."""
    w = WorkloadSpec(name="oltp_read_only", options={"range_size": 50, "skip_trx": True, "rand_type": "uniform"})
    argv = sd.command(w, DataShape(tables=4, table_size=100_000, engine="MyISAM"), threads=16, seed=303,
                      duration=90, params=PARAMS)
    assert argv == [
        "sysbench", "oltp_read_only", "--mysql-host=db1", "--mysql-port=3307", "--mysql-user=bench",
        "--mysql-db=sbtest_off", "--mysql-ignore-errors=1020,1205,1213", "--tables=4", "--table_size=100000", "--mysql_storage_engine=MyISAM",
        "--range_size=50", "--skip_trx=on", "--rand-type=uniform", "--rand-seed=303", "--threads=16",
        "--time=90", "--report-interval=1", "--histogram=on", "--percentile=95", "run",
    ]


def test_password_never_on_the_command_line():
    """The password goes through a config file, so ps never shows it."""
    argv = sd.command(WorkloadSpec(name="oltp_point_select"), DataShape(), threads=1, seed=1, duration=10,
                      params=PARAMS, config_file="/tmp/x.cfg")
    assert "s3cret" not in " ".join(argv)
    assert argv[1] == "--config-file=/tmp/x.cfg"


def test_fixed_event_mode_and_socket_and_rate():
    """events without a duration runs exactly N events (--events=N --time=0); a socket replaces host and port."""
    argv = sd.command(WorkloadSpec(name="select_random_ranges", options={"delta": 7}), DataShape(), threads=2,
                      seed=0, events=500, rate=250, params=ConnectParams(unix_socket="/run/m.sock", user="u"))
    assert "--mysql-socket=/run/m.sock" in argv and not any(a.startswith("--mysql-host") for a in argv)
    assert "--events=500" in argv and "--time=0" in argv and "--rate=250" in argv and "--delta=7" in argv
    # seed 0: sysbench seeds from the clock, exactly what it does when not given a seed
    assert not any(a.startswith("--rand-seed") for a in argv)


def test_ignore_errors_reach_sysbench_as_mysql_ignore_errors():
    """The run's ignore list is sysbench's --mysql-ignore-errors: codes, "all", or "none" for an empty list."""
    def flag(policy) -> str:
        argv = sd.command(WorkloadSpec(name="oltp_point_select"), DataShape(), threads=1, seed=1, duration=1,
                          ignore_errors=policy)
        return next(a for a in argv if a.startswith("--mysql-ignore-errors="))

    assert flag((1020, 1062, 1205, 1213)) == "--mysql-ignore-errors=1020,1062,1205,1213"
    assert flag("all") == "--mysql-ignore-errors=all"
    assert flag(()) == "--mysql-ignore-errors=none"


def test_zipfian_is_refused_for_sysbench_1_0():
    """rand_type zipfian with driver sysbench is a spec error, since sysbench 1.0.20 lacks it."""
    with pytest.raises(ValueError, match="zipfian needs sysbench 1.1"):
        CampaignSpec(name="z", driver="sysbench", targets=[{"name": "a", "user": "bench"}], threads=[1], duration=1,
                     workloads=[{"name": "oltp_point_select", "options": {"rand_type": "zipfian"}}])
    with pytest.raises(LoadError, match="zipfian"):
        sd.command(WorkloadSpec(name="oltp_point_select", options={"rand_type": "zipfian"}), DataShape(),
                   threads=1, seed=1, duration=1)


def test_missing_binary_names_binary_and_package():
    """Without the binary the run fails with an error naming the binary and its Debian package."""
    with pytest.raises(LoadError) as e:
        sd.find_binary("sysbench-not-installed")
    assert "'sysbench-not-installed' binary" in str(e.value) and "Debian package 'sysbench'" in str(e.value)


def test_spec_accepts_the_sysbench_driver():
    """driver: sysbench is a valid spec value and reaches each run spec."""
    spec = CampaignSpec(name="x", driver="sysbench", targets=[{"name": "a", "user": "bench"}], threads=[1], duration=1,
                        workloads=["oltp_read_write"])
    assert spec.driver == "sysbench"


#: A stand-in for sysbench: CPU spent starting and connecting (a busy loop) before "Threads
#: started!" (printed or not), then a short measured part.
_FAKE = """#!{python}
import sys, time
t = time.process_time()
while time.process_time() - t < 0.6:
    pass
if sys.argv[1] == "marker":
    print("Threads started!", flush=True)
print("SQL statistics:", flush=True)
"""


def test_client_cpu_of_the_sysbench_driver_leaves_out_its_start(tmp_path):
    """Client CPU and context switches of a sysbench run count from "Threads started!" (all
    clients connected), like the native driver's measured interval, not sysbench's start."""
    import sys
    import time

    fake = tmp_path / "sysbench"
    fake.write_text(_FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    deadline = time.monotonic() + 60
    rc, out, cpu_with, switches = sd._run_once([str(fake), "marker"], cpus=None, deadline=deadline, stop=None)
    assert rc == 0 and out.startswith("Threads started!")
    rc, _, cpu_whole, _ = sd._run_once([str(fake), "none"], cpus=None, deadline=deadline, stop=None)
    assert rc == 0
    # Without the line all of the process counts (0.6 s busy start included); with it, not the start.
    assert cpu_whole >= 0.5 and cpu_with < 0.3 and switches >= 0


_DRIVER_OF = """
import sys, threading, time
from services.worker.driver.sysbench import driver as sd
sd._run_once(["sh", "-c", "echo $$; exec sleep 60"], cpus=None, deadline=time.monotonic() + 60,
             stop=threading.Event(), on_line=lambda line: print(line, end="", flush=True))
"""


def test_sysbench_dies_with_its_worker():
    """A worker killed mid-run leaves no sysbench loading the target: the run is measured again
    elsewhere, and an orphan's load would be counted by the server in that run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from pathlib import Path

    worker = subprocess.Popen([sys.executable, "-c", _DRIVER_OF], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        assert worker.stdout is not None
        client = int(worker.stdout.readline())
        os.kill(client, 0)  # running
        worker.kill()
        worker.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(client, 0)
            except ProcessLookupError:
                break
            # Reaped by init once killed; until then it may show as a zombie.
            try:
                with open(f"/proc/{client}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except FileNotFoundError:
                break
            time.sleep(0.05)
        else:
            os.kill(client, signal.SIGKILL)
            pytest.fail("the client process outlived its killed worker")
    finally:
        worker.kill()
        worker.wait()


_FAKE_RUN = """#!{python}
import sys
with open({log!r}, "a") as f:
    # The warm-up runs without per-second reports.
    f.write("measured\\n" if "--report-interval=1" in sys.argv else "warm-up\\n")
sys.stdout.write(open({output!r}).read())
"""


def test_the_server_is_read_between_the_warm_up_and_the_measured_process_and_after_it(tmp_path):
    """The server's window is sysbench's own: its counters are read once the warm-up's process has
    ended and before the measured one starts, and again after that one ended; the outcome keeps both
    instants. Without a reading before, none is taken after and the outcome has no such window."""
    import dataclasses
    import sys
    from pathlib import Path

    from services.worker.driver.contract import LoadRequest

    log = tmp_path / "log"
    fake = tmp_path / "sysbench"
    output = Path(__file__).parent / "fixtures" / "sysbench" / "oltp_point_select_histogram.txt"
    fake.write_text(_FAKE_RUN.format(python=sys.executable, log=str(log), output=str(output)))
    fake.chmod(0o755)
    instants = iter([100.0, 107.5])

    def read_server() -> float | None:
        with open(log, "a") as f:
            f.write("read\n")
        return next(instants)

    request = LoadRequest(PARAMS, WorkloadSpec(name="oltp_point_select"), DataShape(), 4, 1.0, 2.0, 3,
                          read_server=read_server)
    outcome = sd.run_sysbench(request, binary=str(fake))
    assert log.read_text().split() == ["warm-up", "read", "measured", "read"]
    assert outcome.server_window == (100.0, 107.5)
    log.write_text("")
    unread = sd.run_sysbench(dataclasses.replace(request, read_server=lambda: None), binary=str(fake))
    assert log.read_text().split() == ["warm-up", "measured"] and unread.server_window is None
