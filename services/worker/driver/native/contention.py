"""How busy other processes keep the client CPUs just before a run, read from /proc/stat.

A CPU shared with a busy process gives each runnable thread one share of its time, so the
native driver's few event loops lose to it where sysbench's one thread per connection does not;
the parent reads this share to decide how many loops a run needs. The target's own server on
this host is not another process: what it does on those CPUs (the work a run before this one
left it) is taken out of the share."""

from __future__ import annotations

import time

from services.worker.target.local_server import LocalServer

#: How long the client CPUs are watched before a run: at the kernel's 100 ticks a second, 20
#: ticks a CPU tell a CPU kept busy from an idle one.
SAMPLE_S = 0.2


def cpu_ticks(stat: str, cpus: tuple[int, ...]) -> tuple[int, int]:
    """Busy and total ticks of ``cpus`` since boot, summed, from the text of /proc/stat."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = total = 0
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if name not in wanted:
            continue
        # user nice system idle iowait irq softirq steal (guest time is already in user)
        fields = [int(x) for x in rest.split()[:8]]
        total += sum(fields)
        busy += sum(fields) - fields[3] - fields[4]
    return busy, total


def process_ticks(stat: str) -> int:
    """User and system ticks of a process, all its threads, from the text of /proc/PID/stat."""
    # The command name, in parentheses, may hold spaces and parentheses: count after the last.
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def _server_ticks(server: LocalServer | None) -> int:
    if server is None:
        return 0
    try:
        with open(f"/proc/{server.pid}/stat") as f:
            return process_ticks(f.read())
    except (OSError, ValueError, IndexError):
        return 0  # gone: then nothing of the share is its


def busy_share(before: tuple[int, int], after: tuple[int, int], own_ticks: float = 0.0) -> float:
    """The share of the CPUs' time spent busy between two readings, ``own_ticks`` of it not
    counted (0 when no tick passed)."""
    ticks = after[1] - before[1]
    if ticks <= 0:
        return 0.0
    return max(0.0, min(1.0, (after[0] - before[0] - max(0.0, own_ticks)) / ticks))


def sample_busy_share(cpus: tuple[int, ...], seconds: float = SAMPLE_S, server: LocalServer | None = None) -> float:
    """The share of ``cpus``' time other processes used over the next ``seconds`` (the caller
    runs nothing on them meanwhile); the target's own ``server`` is not one of them."""
    def read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            return cpu_ticks(f.read(), cpus)

    before, server_before = read(), _server_ticks(server)
    time.sleep(seconds)
    after, server_after = read(), _server_ticks(server)
    own = (server_after - server_before) * server.share_on(cpus) if server is not None else 0.0
    return busy_share(before, after, own)
