"""When the server read its status: the sampler's statement that reads the global status between
two readings of the server's own clock, and the offset that puts the server's clock on the
worker's. Under load the reply can come back long after the server read its counters, so a
round trip's midpoint misdates a window's edges. Pure but for the statement's text.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

#: Row names that carry the server's clock in the dated status statement (no status is named so).
BEFORE, AFTER = "@read_from", "@read_to"
#: The global status between two readings of the server's clock, in one statement. MariaDB runs a
#: UNION ALL's parts in order and fills information_schema.GLOBAL_STATUS when its part runs, so
#: the counters were read between the two instants. It counts one Com_select (SHOW GLOBAL STATUS
#: could not say when it read), which the sampler takes out again.
DATED_STATUS = (f"SELECT '{BEFORE}', UNIX_TIMESTAMP(SYSDATE(6)) "
                "UNION ALL SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                f"UNION ALL SELECT '{AFTER}', UNIX_TIMESTAMP(SYSDATE(6))")
#: Dated samples taken before the load to measure the server's clock against the worker's; the
#: one with the shortest round trip gives the offset (its error is at most half that trip).
CALIBRATION_SAMPLES = 3


def dated_status(rows: Sequence[tuple[Any, Any]], names: Mapping[str, str]) -> tuple[dict[str, float], float]:
    """(status, the server's instant of reading it) from DATED_STATUS's rows; ``names`` maps
    information_schema's upper-case names to SHOW GLOBAL STATUS's. ValueError without both instants."""
    status: dict[str, float] = {}
    instants: dict[str, float] = {}
    for name, value in rows:
        key = str(name)
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if key in (BEFORE, AFTER):
            instants[key] = number
        else:
            status[names.get(key.upper(), key)] = number
    if BEFORE not in instants or AFTER not in instants:
        raise ValueError(f"the dated status has no {BEFORE} and {AFTER} rows (got {sorted(instants)})")
    return status, (instants[BEFORE] + instants[AFTER]) / 2


def clock_offset(trips: Sequence[tuple[float, float, float]]) -> float:
    """The server's clock minus the worker's, from (sent, received, server instant) trips: the
    shortest trip's, where the server's instant can be furthest from its midpoint by least."""
    if not trips:
        raise ValueError("no trip to measure the server's clock by")
    sent, received, server_t = min(trips, key=lambda t: t[1] - t[0])
    return server_t - (sent + received) / 2
