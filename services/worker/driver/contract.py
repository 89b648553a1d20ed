"""What every load driver gives the runner, whichever drives the load (benchfleet's own load
processes or the sysbench binary): a LoadOutcome, or a LoadError."""

from __future__ import annotations

from dataclasses import dataclass

from services.common.errors import LoadError
from services.common.messages import Latency, Series, Totals

__all__ = ["LoadError", "LoadOutcome"]


@dataclass(frozen=True)
class LoadOutcome:
    """What one run measured, over the measured interval only."""

    totals: Totals
    series: Series
    latency: Latency
    errors_by_code: dict[str, int]
    warmup_s: float
    measured_s: float
    started_at: float
    ended_at: float
    #: CPU seconds the load processes used during the measured interval (user + system).
    client_cpu_s: float = 0.0

    @property
    def client_cpu_us_per_query(self) -> float:
        return 1e6 * self.client_cpu_s / self.totals.queries if self.totals.queries else 0.0
