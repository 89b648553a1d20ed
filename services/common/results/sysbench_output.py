"""Reading what sysbench 1.0.20 prints: per-second reports, the final report, FATAL lines. The
worker's sysbench driver reads its live output with it, and `collector import-sysbench` old runs.

Pure: text in, values out, so the parser is tested on literal sysbench output
(tests/unit/fixtures/sysbench). The formats are sysbench's report_intermediate /
report_cumulative (src/sysbench.c) and the histogram of sb_histogram.c:

  [ 1s ] thds: 2 tps: 653.79 qps: 13124.66 (r/w/o: 9194.94/2619.14/1310.57) lat (ms,99%): 7.43 err/s: 1.00 reconn/s: 0.00
  [ 1s ] queue length: 0, concurrency: 0            (only with --rate)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from services.common.errors import SysbenchOutputError
from services.common.results.histogram import Histogram, bucket_of
from services.common.messages.results import Latency, Series, Totals

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_INTERVAL = re.compile(
    rf"^\[ *{_NUM}s \] thds: (\d+) tps: {_NUM} qps: {_NUM} \(r/w/o: {_NUM}/{_NUM}/{_NUM}\) "
    rf"lat \(ms,(\d+)%\): {_NUM} err/s:? {_NUM} reconn/s: {_NUM}"
)
_QUEUE = re.compile(rf"^\[ *{_NUM}s \] queue length: (\d+), concurrency: (\d+)")
_HIST_ROW = re.compile(rf"^\s*{_NUM} \|\**\s+(\d+)\s*$")



@dataclass(frozen=True)
class Interval:
    """One per-second report line (rates per second over that interval)."""

    second: float
    threads: int
    tps: float
    qps: float
    reads: float
    writes: float
    other: float
    percentile: int
    latency_ms: float
    errors_per_s: float
    reconnects_per_s: float
    queue_length: int | None = None
    concurrency: int | None = None


@dataclass(frozen=True)
class FinalReport:
    """The cumulative report sysbench prints at the end of ``run``."""

    reads: int
    writes: int
    other: int
    transactions: int
    ignored_errors: int
    reconnects: int
    total_time_s: float
    events: int
    latency_min_ms: float
    latency_avg_ms: float
    latency_max_ms: float
    percentile: int | None
    latency_pct_ms: float | None
    #: (bucket value in ms, count) rows of --histogram, empty without it.
    histogram: tuple[tuple[float, int], ...] = field(default_factory=tuple)

    @property
    def queries(self) -> int:
        return self.reads + self.writes + self.other


def parse_interval(line: str) -> Interval | None:
    """The per-second report in ``line``, or None for any other line."""
    m = _INTERVAL.match(line.strip())
    if not m:
        return None
    g = m.groups()
    return Interval(second=float(g[0]), threads=int(g[1]), tps=float(g[2]), qps=float(g[3]),
                    reads=float(g[4]), writes=float(g[5]), other=float(g[6]), percentile=int(g[7]),
                    latency_ms=float(g[8]), errors_per_s=float(g[9]), reconnects_per_s=float(g[10]))


def parse_queue(line: str) -> tuple[float, int, int] | None:
    """(second, queue length, concurrency) of a --rate report line, or None."""
    m = _QUEUE.match(line.strip())
    return (float(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def intervals(text: str) -> list[Interval]:
    """Every per-second report, with the queue line of the same second folded in."""
    out: list[Interval] = []
    for line in text.splitlines():
        iv = parse_interval(line)
        if iv is not None:
            out.append(iv)
            continue
        q = parse_queue(line)
        if q is not None and out and out[-1].second == q[0]:
            last = out[-1]
            out[-1] = Interval(**{**last.__dict__, "queue_length": q[1], "concurrency": q[2]})
    return out


def fatal_lines(text: str) -> list[str]:
    """sysbench's FATAL messages, without the prefix, in order."""
    return [line.split("FATAL:", 1)[1].strip() for line in text.splitlines() if "FATAL:" in line]


def fatal_error_code(fatal: list[str]) -> int | None:
    """The MySQL error code named in FATAL lines ("error 2002:", "MySQL error: 1146"), if any."""
    for line in fatal:
        m = re.search(r"(?:MySQL error:|error) (\d{4})\b", line)
        if m:
            return int(m.group(1))
    return None


def fatal_error(fatal: list[str]) -> tuple[int, str] | None:
    """(MySQL error code, server message) of the statement that ended the run, as sysbench's
    check_error prints it: "mysql_stmt_execute() returned error 1062 (Duplicate entry ...) for
    query '...'"; None when no FATAL line names one."""
    for line in fatal:
        m = re.search(r"returned error (\d+) \((.*?)\)(?: for query '.*')?$", line)
        if m:
            return int(m.group(1)), m.group(2)
        m = re.search(r"(?:MySQL error:|error) (\d{4})[:]? (.+)$", line)
        if m:
            return int(m.group(1)), m.group(2).strip().strip('"')
    return None


def _field(text: str, label: str, pattern: str = r"(\d+)") -> str | None:
    m = re.search(rf"^\s*{re.escape(label)}:\s+{pattern}", text, re.M)
    return m.group(1) if m else None


def parse_final(text: str) -> FinalReport:
    """The cumulative report of a finished ``sysbench ... run``; SysbenchOutputError if absent."""
    if "SQL statistics:" not in text:
        fatal = fatal_lines(text)
        why = "; ".join(fatal) if fatal else "no 'SQL statistics' section in its output"
        raise SysbenchOutputError(f"sysbench did not finish the run: {why}", fatal)
    stats = text[text.index("SQL statistics:"):]

    def need(label: str, pattern: str = r"(\d+)") -> str:
        v = _field(stats, label, pattern)
        if v is None:
            raise SysbenchOutputError(f"sysbench's final report has no '{label}' line")
        return v

    pct = re.search(r"^\s*(\d+)(?:st|nd|rd|th) percentile:\s+" + _NUM, stats, re.M)
    hist_rows: list[tuple[float, int]] = []
    if "Latency histogram" in text:
        block = text[text.index("Latency histogram"):text.index("SQL statistics:")]
        for line in block.splitlines()[2:]:
            m = _HIST_ROW.match(line)
            if m:
                hist_rows.append((float(m.group(1)), int(m.group(2))))
    return FinalReport(
        reads=int(need("read")),
        writes=int(need("write")),
        other=int(need("other")),
        transactions=int(need("transactions")),
        ignored_errors=int(need("ignored errors")),
        reconnects=int(need("reconnects")),
        total_time_s=float(need("total time", _NUM + "s")),
        events=int(need("total number of events")),
        latency_min_ms=float(need("min", _NUM)),
        latency_avg_ms=float(need("avg", _NUM)),
        latency_max_ms=float(need("max", _NUM)),
        percentile=int(pct.group(1)) if pct else None,
        latency_pct_ms=float(pct.group(2)) if pct else None,
        histogram=tuple(hist_rows),
    )


def histogram(report: FinalReport) -> Histogram:
    """sysbench's histogram as ours: each sysbench bucket's count lands in the bucket of its
    value. sysbench's buckets are about 1.8% wide, so percentiles carry that resolution, not 0.5%."""
    counts: dict[int, int] = {}
    for value_ms, n in report.histogram:
        i = bucket_of(value_ms * 1000.0)
        counts[i] = counts.get(i, 0) + n
    return Histogram(counts, max_us=report.latency_max_ms * 1000.0)


def latency(report: FinalReport) -> Latency:
    """Transaction latency from the histogram when sysbench printed one, else from the one
    percentile it reported (the others None, as unknown); all None when no transaction completed."""
    if report.transactions == 0:
        return Latency()
    if report.histogram:
        h = histogram(report)
        return Latency(p50_ms=h.percentile(50) / 1000, p95_ms=h.percentile(95) / 1000,
                       p99_ms=h.percentile(99) / 1000, max_ms=report.latency_max_ms, histogram=h.to_wire())
    pct = {report.percentile: report.latency_pct_ms} if report.percentile else {}
    return Latency(p50_ms=pct.get(50), p95_ms=pct.get(95), p99_ms=pct.get(99), max_ms=report.latency_max_ms)


def totals(report: FinalReport) -> Totals:
    """sysbench's totals; errors is 0 because sysbench aborts on any error it does not ignore."""
    return Totals(transactions=report.transactions, reads=report.reads, writes=report.writes,
                  other=report.other, errors=0, ignored_errors=report.ignored_errors,
                  reconnects=report.reconnects)


def series(ivs: list[Interval], interval_s: float = 1.0) -> Series:
    """Per-second counts from the per-second rates (sysbench prints rates with two decimals,
    so each count is the rate times the interval, rounded)."""
    return Series(
        transactions=[round(iv.tps * interval_s) for iv in ivs],
        queries=[round(iv.qps * interval_s) for iv in ivs],
        errors=[0 for _ in ivs],
        queue=queue_lengths(ivs),
        # sysbench's err/s: it ends the run on any error it does not ignore, so all are ignored ones.
        ignored_errors=[round(iv.errors_per_s * interval_s) for iv in ivs],
        reconnects=[round(iv.reconnects_per_s * interval_s) for iv in ivs],
    )


def with_last_second(s: Series, totals: Totals, total_time_s: float) -> Series:
    """The series made to add up to the totals: sysbench prints no line for the time after its last
    report (the last second when the run ends on its boundary, the tail of an events run), and
    each line's rate is over its reporter's real interval, which a busy machine stretches."""
    reported = len(s.transactions)
    expected = math.ceil(total_time_s - 0.05)
    rest = {"transactions": totals.transactions - sum(s.transactions),
            "queries": totals.queries - sum(s.queries),
            "ignored_errors": totals.ignored_errors - sum(s.ignored_errors),
            "reconnects": totals.reconnects - sum(s.reconnects)}
    if reported + 1 == expected or (reported == 0 and any(rest.values())):
        # The unreported time is a second of its own, or the part of one an events run ended in
        # (however short: a run of 0.03 s printed no line at all).
        return Series(**{**s.model_dump(), **{name: getattr(s, name) + [max(0, n)] for name, n in rest.items()},
                         "errors": s.errors + [0], "queue": s.queue + s.queue[-1:]})
    if reported == 0 or reported != expected or not any(rest.values()):
        # Complete and adding up, or more than one line missing: which seconds they were cannot be told.
        return s
    # Less than 0.05 s after the last report, or a report's rate over a stretched interval: the
    # difference belongs to the last reported second.
    return Series(**{**s.model_dump(), **{name: getattr(s, name)[:-1] + [max(0, getattr(s, name)[-1] + n)]
                                          for name, n in rest.items() if getattr(s, name)}})


def queue_lengths(ivs: list[Interval]) -> list[int]:
    """The --rate queue length of each second (empty when the run was not rate-limited)."""
    return [iv.queue_length for iv in ivs if iv.queue_length is not None]
