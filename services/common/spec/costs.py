"""What a campaign costs the fleet beyond its run count: the messages it makes (a run split over
load hosts is that many parts, each with its own delivery and result), the bytes they carry, and
the rows its prepares load. Pure: the spec's parts come in as arguments, so the campaign model and the scheduler agree.
"""

from __future__ import annotations

from typing import Sequence

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.workload.registry import SYSBENCH_10

#: The most rows one campaign may load into its targets' tables, prepares over again included:
#: at the loading rates prepare reaches, days of loading, and hundreds of GB per target.
MAX_ROWS_PREPARED = 2_000_000_000


#: The most bytes of targets and workloads a campaign's messages may carry in all: each run order
#: holds its whole workload, and each target goes out once (a definition on the control log).
MAX_MESSAGE_BYTES = 128 << 20


def message_bytes(target_sizes: Sequence[int], workload_sizes: Sequence[int], per_cell: int) -> int:
    """Bytes of target and workload the campaign's messages carry: each target once, and every
    workload with every target ``per_cell`` times (thread counts x repetitions x load hosts);
    sizes are their JSON's."""
    return sum(target_sizes) + per_cell * sum(workload_sizes) * len(target_sizes)


def messages(runs: int, load_hosts: int) -> int:
    """Run deliveries of a campaign: each run split over ``load_hosts`` workers is as many parts,
    each delivered, announced at a barrier and answered with a result of its own."""
    return runs * load_hosts


def _table_kind(w: WorkloadSpec, data: DataShape) -> tuple[str, bool | None, bool]:
    """(the tables' shape marker, auto_inc or None when any will do, whether the layout has rows) of
    the tables ``w`` runs on: a run on another kind than the last prepares its tables again. A
    script runs on sysbench 1.0's tables, as the worker prepares them."""
    known = w.registered
    layout = SYSBENCH_10 if known is None else known.tables
    shape = w.data_for(data)
    indexes = "" if known is not None and "secondary" not in known.options else \
        f":{bool(w.option('secondary'))}:{bool(w.option('create_secondary'))}"
    auto_inc = bool(w.option("auto_inc")) if known is None or known.table_auto_inc else None
    return f"{shape.tables}x{shape.table_size}:{layout.marker}{indexes}", auto_inc, layout.k is not None


def rows_prepared(workloads: Sequence[WorkloadSpec], data: DataShape, repeat: int) -> int:
    """How many rows one target's prepares load over a campaign run in plan order (repetition,
    then workload, then thread count): a workload's own tables x table_size each time its tables
    are loaded, which is once, and again whenever a workload needs another shape, layout or
    auto_inc than the one before it, or its layout is rebuilt every run."""
    count = 0
    last: tuple[str, bool | None] | None = None
    for rep in range(min(repeat, 2)):
        per_rep = 0
        for w in workloads:
            marker, auto_inc, has_rows = _table_kind(w, data)
            known = w.registered
            fresh = known is not None and known.tables.fresh
            same = last is not None and last[0] == marker and (auto_inc is None or last[1] in (None, auto_inc))
            if not same or fresh:
                shape = w.data_for(data)
                per_rep += has_rows * shape.tables * shape.table_size
                last = (marker, auto_inc if auto_inc is not None else (last[1] if same and last else None))
        # The second repetition starts where the first ended, as every later one does.
        count += per_rep if rep == 0 else per_rep * (repeat - 1)
    return count
