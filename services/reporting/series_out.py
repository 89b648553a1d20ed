"""Every run's per-second figures as CSV or JSON (`collector series`): one line per measured
second of each run, with the run's cell and repetition, read from its stored ``Series``. Pure.

Per-second latency is not stored (a run keeps one histogram over its measured window), so the
JSON gives each run's percentiles from that histogram beside its seconds."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from typing import Sequence

from services.common.messages.results import RunResult
from services.reporting.percentiles import histogram_of, label, values_ms

#: The CSV's columns, in order; ``None`` fields (not recorded) are written empty.
COLUMNS = ("run_id", "target", "workload", "threads", "repetition", "status", "second", "transactions",
           "queries", "errors", "ignored_errors", "reconnects", "queue")
#: Layout of the JSON document; raise when a field changes meaning.
JSON_VERSION = 1


@dataclass(frozen=True)
class SecondRow:
    """One measured second of one run (second 0 is the first after the warm-up)."""

    run_id: str
    target: str
    workload: str
    threads: int
    repetition: int
    status: str
    second: int
    transactions: int
    queries: int
    errors: int
    #: Errors of the ignore list and reconnects: None in results stored before they were recorded.
    ignored_errors: int | None
    reconnects: int | None
    #: Open-loop runs only: transactions due but not started at the second's end.
    queue: int | None


def _at(values: Sequence[int], i: int, missing: int | None) -> int | None:
    return values[i] if i < len(values) else missing


def second_rows(result: RunResult) -> list[SecondRow]:
    """The per-second rows of one run (none for a run that stored no series)."""
    s, c = result.series, result.cell
    n = max(len(s.queries), len(s.transactions))
    return [SecondRow(result.run_id, c.target, c.workload, c.threads, result.repetition, result.status, i,
                      _at(s.transactions, i, 0) or 0, _at(s.queries, i, 0) or 0, _at(s.errors, i, 0) or 0,
                      _at(s.ignored_errors, i, None), _at(s.reconnects, i, None), _at(s.queue, i, None))
            for i in range(n)]


def ordered(results: Sequence[RunResult], targets: Sequence[str] = ()) -> list[RunResult]:
    """The runs by workload, threads, target (in ``targets`` order, then by name) and repetition."""
    rank = {t: i for i, t in enumerate(targets)}
    return sorted(results, key=lambda r: (r.cell.workload, r.cell.threads, rank.get(r.cell.target, len(rank)),
                                          r.cell.target, r.repetition))


def render_csv(results: Sequence[RunResult]) -> str:
    """One CSV line per measured second of every run, under a header of ``COLUMNS``."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in results:
        for row in second_rows(r):
            w.writerow(["" if v is None else v for v in (getattr(row, c) for c in COLUMNS)])
    return out.getvalue()


def render_json(campaign_id: str, results: Sequence[RunResult], percentiles: Sequence[float]) -> str:
    """One JSON document: per run its cell, totals, the ``percentiles`` of its histogram in ms
    (null: no transaction completed) and its seconds."""
    runs = []
    for r in results:
        pct = values_ms(histogram_of(r), percentiles)
        runs.append({
            "run_id": r.run_id, "target": r.cell.target, "workload": r.cell.workload, "threads": r.cell.threads,
            "repetition": r.repetition, "status": r.status, "measured_s": r.measured_s,
            "latency_ms": {label(p): v for p, v in zip(percentiles, pct)},
            "seconds": [{k: v for k, v in asdict(row).items() if k in COLUMNS[6:]} for row in second_rows(r)],
        })
    doc = {"format_version": JSON_VERSION, "campaign_id": campaign_id, "runs": runs}
    return json.dumps(doc, indent=1) + "\n"
