"""Was the machine quiet while a benchmark ran? Load averages at both ends, and the CPU that
processes other than the benchmark's own used meanwhile.

The load average after a run counts the benchmark's own threads (256 sysbench threads read as a
load of 256), so it cannot tell a busy machine from a busy benchmark. What other processes used
can: the machine's busy CPU time from /proc/stat, less the benchmark process's own and its reaped
children's (the scratch server and every load process are children, waited for before the end).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass

from services.worker.driver.native.contention import cpu_ticks

#: Other processes may use this share of the machine's CPU time before a figure is withheld:
#: the fleet's idle services (broker, system MariaDB) stay well below it.
FOREIGN_SHARE_LIMIT = 0.10


def loadavg() -> tuple[float, float, float]:
    with open("/proc/loadavg") as f:
        one, five, fifteen = f.read().split()[:3]
    return float(one), float(five), float(fifteen)


def _busy_and_total_s() -> tuple[float, float]:
    """The machine's busy and total CPU seconds since boot (all CPUs), from /proc/stat."""
    with open("/proc/stat") as f:
        busy, total = cpu_ticks(f.read(), tuple(range(os.cpu_count() or 1)))
    hz = os.sysconf("SC_CLK_TCK")
    return busy / hz, total / hz


def _own_cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass(frozen=True)
class Quietness:
    """What the machine did besides the benchmark, and whether its figures may be reported."""

    cpus: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    #: CPU seconds other processes used while the benchmark ran, and their share of the machine.
    foreign_cpu_s: float
    foreign_share: float

    @property
    def busy_reason(self) -> str | None:
        """Why the figures are not to be trusted, or None on a quiet machine."""
        if self.load_before[0] > self.cpus:
            return f"load average {self.load_before[0]:.2f} before the start, above the {self.cpus} CPUs"
        if self.foreign_share > FOREIGN_SHARE_LIMIT:
            return (f"other processes used {self.foreign_share:.0%} of the machine's CPU during the run "
                    f"({self.foreign_cpu_s:.1f} CPU-s; limit {FOREIGN_SHARE_LIMIT:.0%})")
        return None

    def describe(self) -> str:
        def la(v: tuple[float, float, float]) -> str:
            return " ".join(f"{x:.2f}" for x in v)
        return (f"load average before {la(self.load_before)}, after {la(self.load_after)} on {self.cpus} CPUs; "
                f"other processes: {self.foreign_cpu_s:.1f} CPU-s ({self.foreign_share:.1%} of the machine)")


class LoadWatch:
    """``with LoadWatch() as w: ...`` then ``w.result``; children must be waited for inside the block."""

    def __enter__(self) -> "LoadWatch":
        self.started = time.time()
        self._before = loadavg()
        self._busy0, self._total0 = _busy_and_total_s()
        self._own0 = _own_cpu_s()
        return self

    def record(self, argv: list[str]) -> dict[str, object]:
        """What a benchmark's JSON says of its run: the command (``--json`` left out), when it started,
        the machine's quietness and why its ratios are withheld (None: they are not)."""
        return {"command": " ".join(a for a in argv if a != "--json"),
                "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.started)),
                "quiet": asdict(self.result), "busy": self.result.busy_reason}

    def __exit__(self, *exc: object) -> None:
        busy1, total1 = _busy_and_total_s()
        foreign = max(0.0, (busy1 - self._busy0) - (_own_cpu_s() - self._own0))
        elapsed = max(total1 - self._total0, 1e-9)
        self.result = Quietness(os.cpu_count() or 1, self._before, loadavg(), foreign, foreign / elapsed)
