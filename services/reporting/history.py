"""`collector history --target X --workload Y --threads N`: one cell across every campaign that
ran it, oldest first, each compared with the campaign before (did last night's build regress?).

The comparisons are judged as a report's cells are (``verdicts.judge``): unpaired log ratios,
since two campaigns share no block, and one false-discovery family of every comparison the page
shows, with the interval adjusted to agree with the mark.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from dataclasses import dataclass
from typing import Any, Iterable

from services.common.results.rows import HistoryEntry
from services.common.results.stalls import MIN_COMPLETED_PER_CONNECTION
from services.reporting.metrics_catalog import row_value
from services.reporting.options import ReportOptions
from services.reporting.page_verdicts import direction
from services.reporting.stats import CellStats, describe
from services.reporting.tables import DECISION_MARK, MARK_STALL, MARK_UNTESTED
from services.reporting.verdicts import CellFigures, Verdict, judge


@dataclass(frozen=True)
class HistoryPoint:
    """One campaign's repetitions of the cell, summarised, and the verdict against the campaign before."""

    campaign_id: str
    name: str
    created_at: float
    #: The runs the test used (None: the campaign has no figure for the metric).
    stats: CellStats | None
    failed: int
    #: Against the last earlier campaign with figures, judged in the page's family (None: first).
    vs_previous: Verdict | None
    #: Successful runs marked for a stall, an overrun or a short window: left out of the test.
    stalled: int = 0
    #: The figures the test used, by repetition.
    figures: tuple[tuple[int, float], ...] = ()


@dataclass
class _Campaign:
    """One campaign's runs of the cell while they are grouped (private: never leaves this module)."""

    name: str
    created_at: float
    figures: dict[int, float]
    failed: int = 0
    stalled: int = 0


def _group(entries: Iterable[HistoryEntry], opts: ReportOptions) -> dict[str, _Campaign]:
    m = opts.table_metric
    groups: dict[str, _Campaign] = {}
    for e in entries:
        r = e.row
        g = groups.setdefault(r.campaign_id, _Campaign(e.campaign_name, e.created_at, {}))
        if r.status != "ok":
            g.failed += 1
        elif r.flags:
            # A stalled, overrun or short run measured something else than its cell: counted, not tested.
            g.stalled += 1
        elif (v := row_value(m, r)) is not None and not math.isnan(v):
            # A run that did not record the metric (an empty histogram, no CPU figures) is missing, not 0.
            g.figures[r.repetition] = v
    return groups


def history_points(entries: Iterable[HistoryEntry], opts: ReportOptions = ReportOptions()) -> list[HistoryPoint]:
    """Group one cell's results by campaign, oldest first; judge each campaign with figures against
    the last earlier one with at least two, all those comparisons as one family."""
    ordered = sorted(_group(entries, opts).items(), key=lambda kv: kv[1].created_at)
    pairs: list[CellFigures] = []
    prev: dict[int, float] | None = None
    for cid, g in ordered:
        if g.figures:
            if prev is not None:
                pairs.append(CellFigures(cid, dict(g.figures), prev))
            # A campaign with one figure has no spread to test against: it is judged, never the reference.
            if len(g.figures) >= 2:
                prev = dict(g.figures)
    page = judge(pairs, family="history", higher_is_better=direction(opts.table_metric), alpha=opts.alpha,
                 min_effect=opts.min_effect, shared_blocks=False)
    verdicts = {v.key: v for v in page.verdicts}
    return [HistoryPoint(cid, g.name, g.created_at, describe(list(g.figures.values())) if g.figures else None,
                         g.failed, verdicts.get(cid), g.stalled, tuple(sorted(g.figures.items())))
            for cid, g in ordered]


@dataclass(frozen=True)
class Family:
    """The comparisons a history page judged together: how many, how many marked, the interval level."""

    size: int
    discoveries: int
    level: float

    @classmethod
    def of(cls, points: Iterable[HistoryPoint]) -> "Family":
        judged = [p.vs_previous for p in points if p.vs_previous is not None]
        tested = [v for v in judged if not math.isnan(v.estimate.p)]
        level = judged[0].level if judged else math.nan
        return cls(len(tested), sum(v.selected for v in tested), level)


def _f(x: float | None, places: int) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.{places}f}"


def _pct(x: float) -> str:
    return "inf" if math.isinf(x) else f"{(x - 1) * 100:+.1f}%"


def _change(v: Verdict | None) -> tuple[str, str, str]:
    """The change column (ratio and mark), the adjusted interval and the q-value of a verdict."""
    if v is None:
        return "", "", ""
    mark = DECISION_MARK[v.decision]
    if v.decision == "missing":
        return MARK_UNTESTED, "", ""
    interval = "" if math.isnan(v.low) else f"{_pct(v.low)}..{_pct(v.high)}"
    return f"{(v.ratio - 1) * 100:+.2f}%{mark}", interval, "" if math.isnan(v.q) else f"{v.q:.3g}"


def _row(p: HistoryPoint, places: int) -> list[str]:
    s = p.stats
    ci = f"{_f(s.ci_low, places)}..{_f(s.ci_high, places)}" if s and not math.isnan(s.ci_low) else ""
    return [p.campaign_id, time.strftime("%Y-%m-%d %H:%M", time.gmtime(p.created_at)),
            str(s.n if s else 0), _f(s.mean if s else None, places), _f(s.stdev if s else None, places) if s else "",
            _f(s.cv * 100, 1) if s else "", ci, str(p.failed), f"{p.stalled}{MARK_STALL}" if p.stalled else "0",
            *_change(p.vs_previous)]


COLUMNS = ["campaign", "created (UTC)", "n", "mean", "stdev", "cv %", "95% CI", "failed", "stalled", "vs previous",
           "adjusted interval", "q"]


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

    @property
    def family(self) -> Family:
        return Family.of(self.points)

    def family_line(self) -> str:
        """What the page says of its family: the comparisons judged together and the level of their intervals."""
        f, alpha = self.family, self.opts.alpha
        level = "" if math.isnan(f.level) else f"; intervals at {f.level * 100:.3g}% (Benjamini-Yekutieli)"
        return (f"{f.size} comparisons on this page (each campaign against the one before, unpaired log ratios), "
                f"Benjamini-Hochberg at a {alpha * 100:g}% false-discovery rate: {f.discoveries} marked, of which "
                f"about {alpha * f.discoveries:.2g} expected by chance{level}")


def _num(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else x


def _point_data(p: HistoryPoint, row: list[str]) -> dict[str, Any]:
    d: dict[str, Any] = dict(zip(COLUMNS, row))
    v = p.vs_previous
    if v is not None:
        d["verdict"] = {"decision": v.decision, "reason": v.reason, "method": v.estimate.method,
                        "ratio": _num(v.ratio), "p": _num(v.estimate.p), "q": _num(v.q), "selected": v.selected,
                        "interval_level": _num(v.level), "adjusted_low": _num(v.low), "adjusted_high": _num(v.high)}
    return d


def render_history_json(h: History) -> str:
    """The history as one JSON document: the cell, the metric, its family, one object per campaign."""
    f = h.family
    return json.dumps({"cell": h.cell, "metric": h.opts.table_metric.key,
                       "family": {"size": f.size, "discoveries": f.discoveries, "alpha": h.opts.alpha,
                                  "level": _num(f.level), "min_effect": h.opts.min_effect},
                       "points": [_point_data(p, r) for p, r in zip(h.points, h.rows())]}, indent=1) + "\n"


def render_history_csv(h: History) -> str:
    """The history as CSV: a header, then one line per campaign."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(h.rows())
    return out.getvalue()


def render_history_text(h: History) -> str:
    """The history as an aligned table with a legend and its family."""
    m, min_effect = h.opts.table_metric, h.opts.min_effect
    rows = h.rows()
    if not rows:
        return f"No stored result for {h.cell}.\n"
    widths = [max(len(x) for x in col) for col in zip(COLUMNS, *rows)]
    right = {2, 3, 4, 5, 7, 8, 9, 10, 11}
    fmt_row = lambda r: "  ".join(x.rjust(w) if i in right else x.ljust(w)  # noqa: E731
                                  for i, (x, w) in enumerate(zip(r, widths))).rstrip()
    lines = [f"History of {h.cell} ({m.unit})", "", fmt_row(COLUMNS)] + [fmt_row(r) for r in rows]
    lines += ["", f" vs previous: change against the last earlier campaign with figures (geometric means); "
              f"{DECISION_MARK['faster']} / {DECISION_MARK['slower']} better / worse over the whole adjusted "
              f"interval, {DECISION_MARK['equivalent']} equivalent (interval within +-{min_effect * 100:g}%), "
              f"{DECISION_MARK['undecided']} undecided, {DECISION_MARK['differs']} differs (a counter with no "
              f"better direction), {MARK_UNTESTED} too few repetitions to test",
              f" {h.family_line()}",
              f" stalled: runs with seconds without a completed transaction, an overrun, or a window of fewer "
              f"than {MIN_COMPLETED_PER_CONNECTION:g} transactions per connection ({MARK_STALL}; left out of n, "
              "mean and the test; `collector report` lists them)",
              " n/a: no run of the campaign recorded the metric (missing, not zero)"]
    return "\n".join(lines) + "\n"
