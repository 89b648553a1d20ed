"""Whether a spec's windows are long enough for the response times its cells had before.

A window measures a closed loop only when each connection completes many transactions in it:
by Little's law the mean response time is connections / throughput, and a window shorter than
``MIN_COMPLETED_PER_CONNECTION`` of them is marked "short" once run (services/common/results/
stalls.py). ``scheduler plan`` warns before that, from the last campaign that ran each cell.
Pure: stored result rows in, warnings out.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

from services.common.results.rows import HistoryEntry
from services.common.results.stalls import MIN_COMPLETED_PER_CONNECTION
from services.common.spec.campaign import CampaignSpec
from services.common.spec.durations import format_duration


@dataclass(frozen=True)
class MeasuredCell:
    """The mean response time the latest campaign that ran a cell measured there."""

    target: str
    workload: str
    threads: int
    campaign: str
    #: Little's law over its successful runs: threads / mean transactions per second.
    mean_response_s: float
    runs: int


def previous_measurement(entries: Sequence[HistoryEntry]) -> MeasuredCell | None:
    """The cell's mean response time in the latest campaign with a successful run of it that
    completed transactions; None when no campaign has one."""
    ok = [e for e in entries if e.row.status == "ok" and e.row.tps > 0]
    if not ok:
        return None
    latest = max(ok, key=lambda e: e.created_at).row.campaign_id
    rows = [e.row for e in ok if e.row.campaign_id == latest]
    first = rows[0]
    return MeasuredCell(first.target, first.workload, first.threads, latest,
                        first.threads / statistics.fmean(r.tps for r in rows), len(rows))


def window_warnings(spec: CampaignSpec, measured: Iterable[MeasuredCell]) -> list[str]:
    """One warning per cell whose planned window is shorter than ``MIN_COMPLETED_PER_CONNECTION``
    mean response times of its previous measurement. An open loop (``rate``) is not checked:
    its connections wait between arrivals, so threads / throughput is not its response time."""
    if spec.rate:
        return []
    out = []
    for m in sorted(measured, key=lambda m: (m.workload, m.threads, m.target)):
        window = spec.duration_for(m.threads, m.workload)
        need = MIN_COMPLETED_PER_CONNECTION * m.mean_response_s
        if window < need:
            out.append(f"{m.target} / {m.workload} / {m.threads} threads: a {format_duration(window)} window is "
                       f"shorter than {MIN_COMPLETED_PER_CONNECTION:g} x the mean response time campaign "
                       f"{m.campaign} measured there ({m.mean_response_s:.3g} s = threads / mean tps of its "
                       f"{m.runs} run(s), Little's law): its runs would be marked short; measure at least "
                       f"{format_duration(_round_up(need))} (duration_by_threads)")
    return out


def _round_up(seconds: float) -> float:
    """Whole seconds, up: a duration a user can type."""
    return float(-(-seconds // 1))
