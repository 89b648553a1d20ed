"""Whether a finished run counts: a measurement during which the target went away is a failed
run (with the MySQL error), not a low number in the comparison table, unless the run's ignore
list names that error, in which case its connections were reconnected as sysbench reconnects."""

from __future__ import annotations

from services.common import ignore_errors as ignore
from services.common.messages import RunResult
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
