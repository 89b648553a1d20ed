"""Windows a hung server cut short, in results stored before the native driver measured them to
their end.

Earlier workers ended a run's measured interval at its last completion when its transactions were
still stuck when the driver gave up on them: a server that stopped answering two seconds before
the end of a 10 s window read as 8 s at the rate it had before the hang, faster than it ran, with
no stall. Such a stored row shows itself: a closed loop, transactions in flight at the end, and
measured seconds at least one whole second short of the planned window. Read, it is measured
over its planned window as the worker now measures it (the same completions, the silent seconds
marked as a stall). Pure: rows and the campaign's spec in, rows out.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Mapping

from services.common.results.rows import HistoryEntry, ResultRow
from services.common.results.stalls import full_seconds
from services.common.spec.campaign import CampaignSpec


def silent_seconds(measured_s: float, planned_s: float) -> int:
    """The whole seconds of a ``planned_s`` window after the second holding the last completion."""
    return max(0, full_seconds(planned_s) - math.ceil(measured_s))


def rejudged(row: ResultRow, planned_s: float) -> ResultRow:
    """``row`` measured over its planned window when a hang cut it short (else ``row`` itself);
    the caller has checked the run was a closed loop without an events budget."""
    silent = silent_seconds(row.measured_s, planned_s)
    if row.status != "ok" or not row.in_flight_at_end or row.measured_s <= 0 or silent < 1 or "behind" in row.flags:
        return row
    share = row.measured_s / planned_s
    flags = row.flags if "stall" in row.flags else ("stall", *row.flags)
    return dataclasses.replace(
        row, measured_s=planned_s, qps=row.qps * share, tps=row.tps * share,
        stalled_s=(row.stalled_s or 0) + silent, longest_stall_s=max(row.longest_stall_s or 0, silent),
        quality_flags=",".join(flags))


def rejudge_rows(rows: Iterable[ResultRow], spec: CampaignSpec) -> list[ResultRow]:
    """The campaign's rows with every window a hang cut short measured to its planned end; an
    open loop's (``rate``) or an events budget's early end is its own and left alone."""
    if spec.rate or spec.events:
        return list(rows)
    keys = {w.key for w in spec.workloads}
    return [rejudged(r, spec.duration_for(r.threads, r.workload)) if r.workload in keys else r for r in rows]


def rejudge_entries(entries: Iterable[HistoryEntry], specs: Mapping[str, CampaignSpec]) -> list[HistoryEntry]:
    """A cell's history (or a spec's nights) with each row read as its campaign's report reads it;
    a row whose campaign has no spec in ``specs`` is left as stored."""
    out = []
    for e in entries:
        spec = specs.get(e.row.campaign_id)
        out.append(dataclasses.replace(e, row=rejudge_rows([e.row], spec)[0]) if spec is not None else e)
    return out
