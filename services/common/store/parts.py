"""The results DB's side of runs split over load hosts: each part's result kept in ``run_parts``
(migration 17; keyed by run, group and index since 19) until its whole group has arrived, so a
collector restart, or a part arriving an hour after the others, loses nothing. The collector
merges (services/collector/part_merge.py) and stores the merge as the run's one result.
"""

from __future__ import annotations

import time
import zlib

from services.common.errors import StoreRefused
from services.common.messages.runs import Cell
from services.common.messages.results import RunResult
from services.common.messages.codec import decode
from services.common.store.connection import StoreConnection


def refuse_unless_planned(db: StoreConnection, result: RunResult) -> None:
    """StoreRefused unless ``result`` names a planned run with the same campaign, cell and
    repetition (whole results and parts are checked alike)."""
    planned = db.rows("SELECT campaign_id, target, workload, threads, repetition FROM runs WHERE run_id=%s",
                      (result.run_id,))
    if not planned:
        raise StoreRefused(f"run_id: no run {result.run_id!r} was planned in the results DB")
    cid, target, workload, threads, repetition = planned[0]
    problem = result.mismatch(cid, Cell(target=target, workload=workload, threads=int(threads)), int(repetition))
    if problem is not None:
        raise StoreRefused(problem)


class Parts:
    """Parts of runs kept until their group is complete (``Store.parts``)."""

    def __init__(self, db: StoreConnection):
        self.db = db

    def keep(self, result: RunResult) -> list[RunResult]:
        """Keep a part's result (again: replaced, never added; a part of another group is a row of
        its own, and a group already merged stays merged) and return every kept, unmerged part of
        its group, this one included. StoreRefused when no such run was planned."""
        part = result.part
        if part is None:
            raise StoreRefused("part: the result is not a part of a run")
        refuse_unless_planned(self.db, result)
        self.db.execute(
            "INSERT INTO run_parts (run_id, part_index, part_count, part_group, status, result_z, stored_at, merged_at)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,NULL) ON DUPLICATE KEY UPDATE"
            " status=IF(merged_at IS NULL, VALUES(status), status),"
            " result_z=IF(merged_at IS NULL, VALUES(result_z), result_z),"
            " stored_at=IF(merged_at IS NULL, VALUES(stored_at), stored_at)",
            (result.run_id, part.index, part.count, part.group, result.status, zlib.compress(result.encode(), 6),
             time.time()))
        rows = self.db.rows("SELECT result_z FROM run_parts WHERE run_id=%s AND part_group=%s AND merged_at IS NULL"
                            " ORDER BY part_index", (result.run_id, part.group))
        return [decode(zlib.decompress(z), expect=(RunResult,)) for (z,) in rows]

    def merged(self, run_id: str, group: str) -> None:
        """The group's merge is stored: its parts keep their row, emptied (no DELETE needed)."""
        self.db.execute("UPDATE run_parts SET result_z='', merged_at=%s WHERE run_id=%s AND part_group=%s",
                        (time.time(), run_id, group))
