"""The client's and the server's counts of every run's window, side by side: a run whose counts
disagree by more than max(2 %, in-flight / count) is flagged ``#``, and a run without the server's
count says why, never 0. The rule is ``services.common.results.agreement``'s, read from the result
columns (schema 21), so a report needs no whole result for it. Pure: result rows in, rows and
lines out (the renderers lay them out).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal, Sequence

from services.common.results import agreement
from services.common.results.rows import ResultRow

#: The mark of a run whose client and server counts disagree beyond the tolerance.
MARK_COUNTS = "#"
#: Why a run has no server count when its result does not say (stored before it was recorded, imported).
NOT_RECORDED = "not recorded: a result stored before runs read the server's count, or imported from sysbench output"
TOLERANCE_RULE = f"max({agreement.TOLERANCE * 100:g}%, in-flight / count)"

CountState = Literal["agree", "disagree", "n/a"]


@dataclass(frozen=True)
class RunCounts:
    """One successful run's client and server counts of its window, and whether they agree."""

    run_id: str
    target: str
    workload: str
    threads: int
    repetition: int
    client: int | None
    #: None where n/a (``reason`` says why).
    server: int | None
    #: Transactions in flight at the window's end (0 where the driver reports none: sysbench).
    in_flight: int
    #: |client - server| / server, and the share allowed; None where n/a.
    off: float | None
    tolerance: float | None
    state: CountState
    reason: str = ""

    @property
    def mark(self) -> str:
        return MARK_COUNTS if self.state == "disagree" else ""

    def as_data(self) -> dict[str, Any]:
        return asdict(self)


def run_counts(rows: Iterable[ResultRow]) -> list[RunCounts]:
    """The counts of every successful run, in cell order (failed runs counted nothing to compare)."""
    out = []
    for r in rows:
        if r.status != "ok":
            continue
        in_flight = r.in_flight_at_end or 0
        base = (r.run_id, r.target, r.workload, r.threads, r.repetition, r.transactions, r.server_transactions,
                in_flight)
        if r.server_transactions is None:
            out.append(RunCounts(*base, None, None, "n/a", r.server_count_reason or NOT_RECORDED))
        elif r.transactions is None:
            out.append(RunCounts(*base, None, None, "n/a", "the client's count was not read"))
        else:
            a = agreement.assess(r.transactions, r.server_transactions, in_flight=in_flight)
            if a is None:  # neither side counted a transaction: nothing to agree on, and no tolerance
                out.append(RunCounts(*base, None, None, "n/a", "neither side counted a transaction in the window"))
            else:
                out.append(RunCounts(*base, a.off, a.tolerance, "agree" if a.agrees else "disagree"))
    return sorted(out, key=lambda c: (c.workload, c.target, c.threads, c.repetition))


@dataclass(frozen=True)
class CountSummary:
    """How many successful runs' counts agree, disagree or have no server count."""

    runs: int
    agree: int
    disagree: int
    na: int

    def line(self) -> str:
        """The report's one-line summary."""
        if not self.runs:
            return "Client and server counts: no successful run."
        text = (f"Client and server counts agree within tolerance ({TOLERANCE_RULE}) on {self.agree} of "
                f"{self.runs} run{'s' if self.runs != 1 else ''}; {self.na} n/a")
        return text + (f"; {self.disagree} disagree ({MARK_COUNTS})." if self.disagree else ".")


def summary(counts: Sequence[RunCounts]) -> CountSummary:
    n = Counter(c.state for c in counts)
    return CountSummary(len(counts), n["agree"], n["disagree"], n["n/a"])


#: The columns of the run list, in every format that lays it out as a table.
HEADER = ("target", "workload", "threads", "repetition", "run", "client", "server", "off", "tolerance", "")


def reasons(counts: Sequence[RunCounts]) -> list[str]:
    """The distinct reasons a server count is n/a, in first-met order (the run list numbers them)."""
    return list(dict.fromkeys(c.reason for c in counts if c.state == "n/a"))


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:.2f}%"


def table_rows(counts: Sequence[RunCounts]) -> list[tuple[str, ...]]:
    """The run list as text cells under ``HEADER``: an n/a server count reads ``n/a (k)``, k
    numbering its reason in ``reasons``."""
    why = {r: i for i, r in enumerate(reasons(counts), 1)}
    return [(c.target, c.workload, str(c.threads), str(c.repetition), c.run_id,
             "n/a" if c.client is None else f"{c.client:,}",
             f"n/a ({why[c.reason]})" if c.state == "n/a" else f"{c.server:,}",
             _pct(c.off), _pct(c.tolerance), c.mark) for c in counts]


def legend_lines(counts: Sequence[RunCounts]) -> list[str]:
    """What the run list's marks and n/a mean."""
    lines = [f"client: transactions the load completed in the window; server: the server's own counter over "
             f"the same window; off: |client - server| / server; {MARK_COUNTS}: they differ by more than "
             f"{TOLERANCE_RULE}"]
    return lines + [f"({i}) n/a: {r}" for i, r in enumerate(reasons(counts), 1)]


def count_lines(counts: Sequence[RunCounts]) -> list[str]:
    """The run list as aligned text: the summary, the table, then its legend."""
    lines = ["Client and server counts, per run:", summary(counts).line()]
    if not counts:
        return lines
    rows = [HEADER] + table_rows(counts)
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    right = {2, 3, 5, 6, 7, 8}
    for r in rows:
        lines.append(("  " + "  ".join(v.rjust(w) if i in right else v.ljust(w)
                                       for i, (v, w) in enumerate(zip(r, widths)))).rstrip())
    return lines + ["  " + x for x in legend_lines(counts)]


def cell_counts(counts: Sequence[RunCounts]) -> dict[tuple[str, str, int], tuple[int | None, int | None, int, int]]:
    """Per cell (target, workload, threads): the client's and the server's totals over its runs
    (None when a run's is n/a), the runs that disagree and those with no server count (the CSV)."""
    out: dict[tuple[str, str, int], tuple[int | None, int | None, int, int]] = {}
    for c in counts:
        key = (c.target, c.workload, c.threads)
        client, server, off, na = out.get(key, (0, 0, 0, 0))
        out[key] = (None if client is None or c.client is None else client + c.client,
                    None if server is None or c.server is None else server + c.server,
                    off + (c.state == "disagree"), na + (c.state == "n/a"))
    return out
