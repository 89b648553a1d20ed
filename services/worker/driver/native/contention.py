"""How busy other processes keep the client CPUs just before a run, read from /proc/stat.

A CPU shared with a busy process gives each runnable thread one share of its time, so the
native driver's few event loops lose to it where sysbench's one thread per connection does not;
the parent reads this share to decide how many loops a run needs."""

from __future__ import annotations

import time

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


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the CPUs' time spent busy between two readings (0 when no tick passed)."""
    ticks = after[1] - before[1]
    return max(0.0, min(1.0, (after[0] - before[0]) / ticks)) if ticks > 0 else 0.0


def sample_busy_share(cpus: tuple[int, ...], seconds: float = SAMPLE_S) -> float:
    """The share of ``cpus``' time other processes used over the next ``seconds`` (the caller
    runs nothing on them meanwhile)."""
    def read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            return cpu_ticks(f.read(), cpus)

    before = read()
    time.sleep(seconds)
    return busy_share(before, read())
