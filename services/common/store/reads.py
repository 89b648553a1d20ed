"""The results DB's reads for reports: result columns, whole stored results decoded, a cell's
history across campaigns, the builds that ran and the per-cell statistics."""

from __future__ import annotations

import zlib
from typing import Sequence

from pydantic import ValidationError

from services.common.errors import StoreError
from services.common.messages.results import RunResult
from services.common.results.rows import CELL_STAT_COLUMNS, COLUMNS, CellStatRow, HistoryEntry, ResultRow, TargetBuild
from services.common.results.figures import FIGURE_COLUMNS, RunFigures
from services.common.store.connection import StoreConnection

#: Run ids per ``IN (...)`` list when reading chosen whole results.
IDS_PER_SELECT = 500
_ROW_SELECT = ", ".join(COLUMNS)
_ROW_SELECT_R = ", ".join(f"r.{c}" for c in COLUMNS)


class ResultReads(StoreConnection):
    """Reading stored results and statistics (a part of Store)."""

    def results(self, campaign_id: str, workload: str | None = None,
                targets: Sequence[str] | None = None, *, or_threads: int | None = None,
                figures: bool = False) -> list[ResultRow]:
        """The columns of every result of a campaign, or of one of its workloads, or of some of
        its targets in one workload, and then of every target at ``or_threads`` too (no whole
        results: see ``stored_results``); with ``figures``, each row's figures too (None for a
        row stored before schema 16 and not backfilled)."""
        where, params = ("campaign_id=%s", (campaign_id,)) if workload is None else \
            ("campaign_id=%s AND workload=%s", (campaign_id, workload))
        if targets is not None:
            where += " AND (target IN (" + ",".join(["%s"] * len(targets)) + ")"
            params = (*params, *targets)
            if or_threads is not None:
                where += " OR threads=%s"
                params = (*params, or_threads)
            where += ")"
        n = len(COLUMNS)
        extra = ", " + ", ".join(FIGURE_COLUMNS) if figures else ""
        return [
            ResultRow.from_columns(r[:n], RunFigures.from_columns(r[n:]) if figures else None)
            for r in self._rows(
                f"SELECT {_ROW_SELECT}{extra} FROM results WHERE {where}"
                " ORDER BY workload, threads, target, repetition",
                params,
            )
        ]

    def recent_results(self, campaigns: int) -> list[ResultRow]:
        """The results of the ``campaigns`` newest campaigns, oldest campaign first."""
        ids = [r[0] for r in self._rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (campaigns,))]
        return [row for cid in reversed(ids) for row in self.results(cid)]

    def target_builds(self, campaign_id: str) -> list[TargetBuild]:
        """The distinct builds each target of a campaign ran, from the results' columns (results
        stored before migration 14 kept them only in result_json)."""
        rows = self._rows(
            "SELECT DISTINCT target, COALESCE(build, JSON_VALUE(result_json, '$.server.build')),"
            " COALESCE(build_version, JSON_VALUE(result_json, '$.server.build_version')),"
            " COALESCE(server_sha256, JSON_VALUE(result_json, '$.server.server_sha256')),"
            " COALESCE(malloc, JSON_VALUE(result_json, '$.server.malloc')) FROM results"
            " WHERE campaign_id=%s AND status='ok' ORDER BY target", (campaign_id,))
        return [TargetBuild(*r) for r in rows]

    def stored_results(self, campaign_id: str, run_ids: Sequence[str] | None = None) -> list[RunResult]:
        """Every whole stored result of a campaign (or those of ``run_ids``), decoded, for reports
        that need series, histograms or the server report beyond the result columns."""
        if run_ids is None:
            return [decode_stored(run_id, text, packed) for run_id, text, packed in self._rows(
                "SELECT run_id, result_json, result_z FROM results WHERE campaign_id=%s", (campaign_id,))]
        out, ids = [], list(run_ids)
        for first in range(0, len(ids), IDS_PER_SELECT):
            chunk = ids[first:first + IDS_PER_SELECT]
            out.extend(decode_stored(run_id, text, packed) for run_id, text, packed in self._rows(
                "SELECT run_id, result_json, result_z FROM results WHERE campaign_id=%s AND run_id IN ("
                + ",".join(["%s"] * len(chunk)) + ")", (campaign_id, *chunk)))
        return out

    def cell_history(self, target: str, workload: str, threads: int, *, with_results: bool = False) -> list[HistoryEntry]:
        """One cell's results across every campaign, oldest campaign first; with the whole
        results when asked (metrics beyond the columns)."""
        extra = ", r.result_json, r.result_z" if with_results else ""
        entries = []
        for r in self._rows(
                f"SELECT c.name, c.created_at, {_ROW_SELECT_R}{extra}"
                " FROM results r JOIN campaigns c ON c.campaign_id = r.campaign_id"
                " WHERE r.target=%s AND r.workload=%s AND r.threads=%s ORDER BY c.created_at, r.repetition",
                (target, workload, threads)):
            row = ResultRow.from_columns(r[2:2 + len(COLUMNS)])
            if with_results:
                row = row.with_result(decode_stored(row.run_id, r[-2], r[-1]))
            entries.append(HistoryEntry(r[0], float(r[1]), row))
        return entries

    def result(self, run_id: str) -> RunResult | None:
        """The whole stored result of one run, decoded; None when the run has none."""
        rows = self._rows("SELECT result_json, result_z FROM results WHERE run_id=%s", (run_id,))
        return decode_stored(run_id, *rows[0]) if rows else None

    def cell_stats(self, campaign_id: str, *, metric: str | None = None, workload: str | None = None,
                   threads: int | None = None) -> list[CellStatRow]:
        """The stored per-cell statistics of a campaign (of one metric, workload, thread count when given)."""
        where, params = "campaign_id=%s", [campaign_id]
        for column, value in (("metric", metric), ("workload", workload), ("threads", threads)):
            if value is not None:
                where += f" AND {column}=%s"
                params.append(value)
        return [CellStatRow(*[bool(v) if c in ("higher_is_better", "high_cv", "collapsed") else v
                              for c, v in zip(CELL_STAT_COLUMNS, r)])
                for r in self._rows(f"SELECT {', '.join(CELL_STAT_COLUMNS)} FROM cell_stats WHERE {where}"
                                    " ORDER BY metric, workload, threads, target", params)]

    def result_count(self, run_id: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM results WHERE run_id=%s", (run_id,))[0][0])

def decode_stored(run_id: str, text: str, packed: bytes | None = None) -> RunResult:
    # pydantic-core parses the JSON itself: a 10,000-run report decodes every result at once.
    # Results stored before migration 5 have their JSON in result_json, later ones in result_z.
    try:
        return RunResult.model_validate_json(zlib.decompress(packed) if packed is not None else text)
    except zlib.error as e:
        raise StoreError(f"stored result of run {run_id} does not decompress: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise StoreError(f"stored result of run {run_id} does not decode: {where}: {err['msg']}") from None
