"""Whether a finished run counts: a measurement during which the target went away is a failed
run (with the MySQL error), not a low number in the comparison table, unless the run's ignore
list names that error, in which case its connections were reconnected as sysbench reconnects.
And whether its result can travel: one bigger than a message may be is refused here, with
the reason, rather than dead-lettered by the collector."""

from __future__ import annotations

from services.common.spec import ignore_errors as ignore
from services.common.messages.base import MAX_BODY_BYTES
from services.common.messages.results import Latency, RunResult, Series
from services.worker.target.dsn import mysql_message

#: Client error codes meaning the connection to the server was lost (the codes sysbench
#: reconnects on when they are ignored), with their messages.
LOST_CONNECTION = {2006: "MySQL server has gone away", 2013: "Lost connection to MySQL server during query",
                   2055: "Lost connection to MySQL server", 2011: "Lost connection to MySQL server"}


def judge(result: RunResult, ignore_errors: ignore.IgnoreErrors = ignore.DEFAULT) -> RunResult:
    """``result``, marked failed when connections to the target were lost while measuring and
    ``ignore_errors`` (the run's) does not name the error."""
    if result.status != "ok":
        return result
    lost = {int(code): n for code, n in result.errors_by_code.items()
            if code.isdigit() and int(code) in LOST_CONNECTION and not ignore.ignores(ignore_errors, int(code))}
    if not lost:
        return result
    code = max(lost, key=lambda c: lost[c])
    error = (f"MySQL error {code}: {mysql_message(code, LOST_CONNECTION[code])} ({sum(lost.values())} connection(s) lost during the run; "
             "the target went away)")
    return result.model_copy(update={"status": "failed", "error": error, "error_code": code})


def fit_for_the_bus(result: RunResult, limit: int | None = None) -> RunResult:
    """``result`` when its message fits ``limit`` bytes (MAX_BODY_BYTES); else the run failed,
    saying so, with its totals and percentiles but without the per-second series and histograms."""
    limit = MAX_BODY_BYTES if limit is None else limit
    size = len(result.encode())
    if size <= limit:
        return result
    lat = result.latency
    error = (f"the result is {size:,} bytes, above the {limit:,} bytes a message may hold; its per-second "
             "series and histograms were dropped (a shorter duration keeps them)")
    return result.model_copy(update={
        "status": "failed", "error": error, "error_code": None, "series": Series(),
        "latency": Latency(p50_ms=lat.p50_ms, p95_ms=lat.p95_ms, p99_ms=lat.p99_ms, max_ms=lat.max_ms),
        "server": result.server.model_copy(update={"variables": {}, "status_deltas": {}, "status_end": {}})})
