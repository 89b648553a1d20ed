"""How long runs measure: the bounds and field types of durations, warm-ups and windows by thread
count, shared by the campaign and its workloads (a workload may lengthen its own windows)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Sequence

from pydantic import BeforeValidator, Field, WithJsonSchema

from services.common.spec.durations import format_duration
from services.common.spec.fields import DURATION_JSON_SCHEMA, Seconds, shown

#: Concurrent connections of one run (a client port range; the worker also needs the fds).
MAX_THREADS = 65_535
MAX_THREAD_COUNTS = 1024
#: The longest duration or warm-up a spec may ask for (a week). The scheduler also refuses runs
#: longer than its settings' max_run_s (2 h by default), where the settings are known.
MAX_DURATION_S = 7 * 86_400


def thread_count_keys(v: Any) -> Any:
    """Keys of a ``*_by_threads`` mapping as thread counts; a stored spec comes back from JSON,
    whose object keys are text, so "1024" is the count 1024 (true, 2.5, "many", and "04" or other
    spellings the editor's schema would refuse, are refused)."""
    if not isinstance(v, dict):
        return v
    out = {}
    for key, value in v.items():
        n = int(key) if isinstance(key, str) and re.fullmatch(r"[1-9][0-9]{0,4}", key) else key
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_THREADS:
            raise ValueError(f"{shown(str(key))!r} is not a thread count (keys are thread counts, 1 to {MAX_THREADS})")
        if n in out:
            raise ValueError(f"{n} is given twice")
        out[n] = value
    return out


#: A measured time, more than nothing and at most a week.
Duration = Annotated[Seconds, Field(gt=0, le=MAX_DURATION_S)]
#: A warm-up, none to a week.
Warmup = Annotated[Seconds, Field(le=MAX_DURATION_S)]
_BY_THREADS_SCHEMA = WithJsonSchema({"type": "object", "maxProperties": MAX_THREAD_COUNTS,
                                     "propertyNames": {"pattern": "^[1-9][0-9]{0,4}$"},
                                     "additionalProperties": DURATION_JSON_SCHEMA})
#: {from this many threads: measured time}.
DurationByThreads = Annotated[dict[int, Duration], BeforeValidator(thread_count_keys),
                              Field(max_length=MAX_THREAD_COUNTS), _BY_THREADS_SCHEMA]
#: {from this many threads: warm-up}.
WarmupByThreads = Annotated[dict[int, Warmup], BeforeValidator(thread_count_keys),
                            Field(max_length=MAX_THREAD_COUNTS), _BY_THREADS_SCHEMA]


def at_threads(threads: int, default: float, by_threads: dict[int, float],
               own: dict[int, float] | None = None) -> float:
    """The time at ``threads``: the entry with the highest count at or below it, else ``default``;
    a workload's ``own`` entries replace the campaign's ``by_threads`` from its lowest count on."""
    if own:
        by_threads = {**{k: v for k, v in by_threads.items() if k < min(own)}, **own}
    keys = [k for k in by_threads if k <= threads]
    return by_threads[max(keys)] if keys else default


def describe_windows(threads: Sequence[int], windows: Callable[[int], tuple[float, float]]) -> str:
    """``W warm-up + D measured``, or, when thread counts differ, one such clause per group of
    thread counts that share it (``... at 16, 64 threads; ...``)."""
    groups: dict[tuple[float, float], list[str]] = {}
    for t in threads:
        groups.setdefault(windows(t), []).append(str(t))
    clauses = [f"{format_duration(w)} warm-up + {format_duration(d)} measured" for w, d in groups]
    if len(groups) == 1:
        return clauses[0]
    return "; ".join(f"{c} at {', '.join(ts)} threads" for c, ts in zip(clauses, groups.values()))


def workload_windows(workloads: Sequence[str], threads: Sequence[int],
                     windows: Callable[[str, int], tuple[float, float]]) -> list[tuple[list[str], str]]:
    """The workloads grouped by the windows they share, each group with its description."""
    shared: dict[str, list[str]] = {}
    for w in workloads:
        shared.setdefault(describe_windows(threads, lambda t, w=w: windows(w, t)), []).append(w)
    return [(keys, text) for text, keys in shared.items()]
