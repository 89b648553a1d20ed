"""`collector history --target X --workload Y --threads N`: one cell across every campaign that
ran it, oldest first, each compared with the campaign before (did last night's build regress?)."""

from __future__ import annotations

import csv
import io
import json
import math
import time
from dataclasses import dataclass
from typing import Iterable

from services.common.results.rows import HistoryEntry
from services.common.results.stalls import MIN_COMPLETED_PER_CONNECTION
from services.reporting.metrics_catalog import row_value
from services.reporting.options import ReportOptions
from services.reporting.stats import CellStats, Comparison, compare_stats, describe
from services.reporting.tables import MARK_FASTER, MARK_SLOWER, MARK_STALL, MARK_UNTESTED, VERDICT_MARK


@dataclass(frozen=True)
class HistoryPoint:
    """One campaign's repetitions of the cell, summarised, and how they compare with the previous one."""

    campaign_id: str
    name: str
    created_at: float
    stats: CellStats | None
    failed: int
    vs_previous: Comparison | None
    #: Successful runs marked for a stall or an overrun (their numbers are in the mean).
    stalled: int = 0


def history_points(entries: Iterable[HistoryEntry], opts: ReportOptions = ReportOptions()) -> list[HistoryPoint]:
    """Group one cell's results by campaign, oldest first, each compared with the one before."""
    m = opts.table_metric
    groups: dict[str, tuple[str, float, list[float], int, int]] = {}
    for e in entries:
        r = e.row
        n, at, vals, failed, stalled = groups.get(r.campaign_id, (e.campaign_name, e.created_at, [], 0, 0))
        if r.status != "ok":
            failed += 1
        elif (v := row_value(m, r)) is not None:
            # A run that did not record the metric (no CPU figures, no such status) is left out.
            vals.append(v)
            stalled += bool(r.flags)
        groups[r.campaign_id] = (n, at, vals, failed, stalled)
    points: list[HistoryPoint] = []
    prev: CellStats | None = None
    for cid, (name, at, vals, failed, stalled) in sorted(groups.items(), key=lambda kv: kv[1][1]):
        stats = describe(vals) if vals else None
        comp = None
        if stats is not None and prev is not None:
            comp = compare_stats(stats, prev, alpha=opts.alpha, min_effect=opts.min_effect,
                                 higher_is_better=m.higher_is_better)
        points.append(HistoryPoint(cid, name, at, stats, failed, comp, stalled))
        if stats is not None:
            prev = stats
    return points


def _f(x: float | None, places: int) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.{places}f}"


def _row(p: HistoryPoint, places: int) -> list[str]:
    s, c = p.stats, p.vs_previous
    change = ""
    if c is not None:
        mark = VERDICT_MARK.get(c.verdict, "")
        change = f"{(c.ratio - 1) * 100:+.2f}%{mark}"
    return [p.campaign_id, time.strftime("%Y-%m-%d %H:%M", time.gmtime(p.created_at)),
            str(s.n if s else 0), _f(s.mean if s else None, places), _f(s.stdev if s else None, places),
            _f(s.cv * 100 if s else None, 1), (f"{_f(s.ci_low, places)}..{_f(s.ci_high, places)}"
                                               if s and not math.isnan(s.ci_low) else ""),
            str(p.failed), f"{p.stalled}{MARK_STALL}" if p.stalled else "0", change]


COLUMNS = ["campaign", "created (UTC)", "n", "mean", "stdev", "cv %", "95% CI", "failed", "stalled", "vs previous"]


@dataclass(frozen=True)
class History:
    """One cell's history, ready for any renderer: its points, which cell, and the options that made them."""

    cell: str
    points: tuple[HistoryPoint, ...]
    opts: ReportOptions = ReportOptions()

    def rows(self) -> list[list[str]]:
        """One row of ``COLUMNS`` per campaign, numbers to the metric's places."""
        places = 0 if self.opts.table_metric.key in ("qps", "tps") else 2
        return [_row(p, places) for p in self.points]


def render_history_json(h: History) -> str:
    """The history as one JSON document: the cell, the metric, one object per campaign."""
    return json.dumps({"cell": h.cell, "metric": h.opts.table_metric.key,
                       "points": [dict(zip(COLUMNS, r)) for r in h.rows()]}, indent=1) + "\n"


def render_history_csv(h: History) -> str:
    """The history as CSV: a header, then one line per campaign."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(h.rows())
    return out.getvalue()


def render_history_text(h: History) -> str:
    """The history as an aligned table with a legend."""
    m, alpha, min_effect = h.opts.table_metric, h.opts.alpha, h.opts.min_effect
    rows = h.rows()
    if not rows:
        return f"No stored result for {h.cell}.\n"
    widths = [max(len(x) for x in col) for col in zip(COLUMNS, *rows)]
    right = {2, 3, 4, 5, 7, 8, 9}
    fmt_row = lambda r: "  ".join(x.rjust(w) if i in right else x.ljust(w)  # noqa: E731
                                  for i, (x, w) in enumerate(zip(r, widths))).rstrip()
    lines = [f"History of {h.cell} ({m.unit})", "", fmt_row(COLUMNS)] + [fmt_row(r) for r in rows]
    lines += ["", f" vs previous: change of the mean against the campaign before; {MARK_FASTER} / {MARK_SLOWER} "
              f"significantly better / worse (Welch t test, p < {alpha:g}, at least "
              f"{min_effect * 100:g}%), {MARK_UNTESTED} too few repetitions to test",
              f" stalled: runs with seconds without a completed transaction, an overrun, or a window of fewer "
              f"than {MIN_COMPLETED_PER_CONNECTION:g} transactions per connection ({MARK_STALL}; `collector report` "
              "lists them)"]
    return "\n".join(lines) + "\n"
