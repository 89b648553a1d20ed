"""The results DB's results: a run's result stored (its columns, compressed whole, its figures),
its per-second series and the per-cell statistics the collector computes; and read back for
reports (columns, whole results decoded, a cell's history, the builds that ran, the statistics)."""

from __future__ import annotations

import time
import zlib
from typing import Sequence

from pydantic import ValidationError

from services.common import logs
from services.common.errors import StoreError, StoreRefused
from services.common.messages.results import RunResult
from services.common.messages.runs import pool_of_run_id
from services.common.store.parts import refuse_unless_planned
from services.common.results.figures import FIGURE_COLUMNS, RunFigures
from services.common.results.rows import (CELL_STAT_COLUMNS, COLUMNS, COUNT_COLUMNS, CellStatRow, HistoryEntry, ResultRow,
                                          TargetBuild, WINDOW_COLUMNS, count_columns, quality_columns, window_columns)
from services.common.store.connection import StoreConnection
from services.common.store.runs import Runs
from services.common.store.takers import Claim, Taker, judge_result, refusal_reason

log = logs.get(__name__)

#: Rows of result_series per INSERT: about 30 kB of SQL, inside even a 64 kB max_allowed_packet.
SERIES_ROWS_PER_INSERT = 200
#: The figure columns the store writes (queries, transactions and p50_ms are written with the
#: other result columns): schema 16, see services/common/results/figures.py.
_FIGURES_WRITTEN = FIGURE_COLUMNS[3:]
_FIGURES_SET = ", ".join(_FIGURES_WRITTEN)
_FIGURES_VALUES = ",".join(["%s"] * len(_FIGURES_WRITTEN))
_FIGURES_UPDATE = ", ".join(f"{c}=VALUES({c})" for c in _FIGURES_WRITTEN)
_FIGURES_ASSIGN = ", ".join(f"{c}=%s" for c in _FIGURES_WRITTEN)
#: The window's columns (schema 20) and the server's count (schema 21), written after the figures.
_LATER = WINDOW_COLUMNS + COUNT_COLUMNS
_WINDOW_SET = ", ".join(_LATER)
_WINDOW_VALUES = ",".join(["%s"] * len(_LATER))
_WINDOW_UPDATE = ", ".join(f"{c}=VALUES({c})" for c in _LATER)
_COUNT_ASSIGN = ", ".join(f"{c}=%s" for c in COUNT_COLUMNS)
#: Bytes of a results row beyond its compressed result: every other column, and the SQL.
ROW_OVERHEAD = 8192
#: The error column is TEXT (65,535 bytes, 4 per character at worst); the whole error stays
#: in the stored result.
ERROR_COLUMN_CHARS = 16_000
#: Run ids per ``IN (...)`` list when reading chosen whole results.
IDS_PER_SELECT = 500
_ROW_SELECT = ", ".join(COLUMNS)
_ROW_SELECT_R = ", ".join(f"r.{c}" for c in COLUMNS)


class Results:
    """Stored results, their series and the per-cell statistics, written and read (``Store.results``)."""

    def __init__(self, db: StoreConnection, runs: Runs):
        self.db = db
        #: Storing a result sets its run's state, and the campaign's that follows.
        self.runs = runs

    def store(self, result: RunResult, *, sender: Taker | None = None, replace_ok: bool = False) -> bool:
        """Insert or replace the result of a run (keyed by run id) and set the run's state; whether
        it was stored. A stored ok result is never replaced (unless ``replace_ok``: an import the
        user asked to replace) but by the same message delivered again: a failure never replaces
        it, nor another measurement, nor an edited copy (a forged result). With ``sender`` (who
        published it), only the run's taker's result is stored (store/takers.py); another's is
        logged and dropped (False).
        StoreRefused, with nothing written, when no such run was planned or the result's
        campaign, cell or repetition differ from the run's, no worker claimed the run, or it
        cannot fit the DB's packets."""
        refuse_unless_planned(self.db, result)
        if sender is not None and not self._from_its_taker(result, sender):
            return False
        encoded = result.encode()
        if not replace_ok:
            stored = self.db.rows("SELECT result_json, result_z FROM results WHERE run_id=%s AND status='ok'",
                                  (result.run_id,))
            if stored:
                text, packed = stored[0]
                if (zlib.decompress(packed) if packed is not None else str(text).encode()) == encoded:
                    return True  # the same result again (a redelivery): stored already, as it was
                # A run redelivered after a broker restart or a worker's death is measured again; that
                # second measurement (or its failure) says nothing against the one already stored.
                log.warning("result_kept", run_id=result.run_id, kept="ok", dropped=result.status,
                            worker=result.worker, attempt=result.attempt, error=result.error)
                return False
        # Compressed: a result is mostly per-second series and histogram buckets (a 2-hour
        # run's 130 kB of JSON packs into about 31 kB), far inside a default max_allowed_packet.
        packed = zlib.compress(encoded, 6)
        error = None if result.error is None else result.error[:ERROR_COLUMN_CHARS]
        self._fits_packet(result.run_id, packed, error)
        now = time.time()
        lat = result.latency
        quality = quality_columns(result.quality)
        # One transaction: a reader (Grafana, `scheduler status`, SQL users) never sees a result whose
        # run still reads running, nor a run done without its result or series.
        with self.db.atomic(f"store the result of run {result.run_id}"):
            self.db.execute(
                "INSERT INTO results (run_id, campaign_id, target, workload, threads, repetition, status, measured_s,"
                " transactions, queries, errors, qps, tps, p50_ms, p95_ms, p99_ms, max_ms, worker, host, started_at,"
                " ended_at, error, result_json, result_z, stored_at, stalled_s, longest_stall_s, overrun_s, quality_flags,"
                " quiesce_s, build, build_version, server_sha256, malloc, pool, " + _FIGURES_SET + ", " + _WINDOW_SET + ")"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,'',%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
                + _FIGURES_VALUES + "," + _WINDOW_VALUES + ")"
                " ON DUPLICATE KEY UPDATE status=VALUES(status), measured_s=VALUES(measured_s),"
                " transactions=VALUES(transactions), queries=VALUES(queries), errors=VALUES(errors), qps=VALUES(qps),"
                " tps=VALUES(tps), p50_ms=VALUES(p50_ms), p95_ms=VALUES(p95_ms), p99_ms=VALUES(p99_ms),"
                " max_ms=VALUES(max_ms), worker=VALUES(worker), host=VALUES(host), started_at=VALUES(started_at),"
                " ended_at=VALUES(ended_at), error=VALUES(error), result_json='', result_z=VALUES(result_z),"
                " stored_at=VALUES(stored_at), stalled_s=VALUES(stalled_s), longest_stall_s=VALUES(longest_stall_s),"
                " overrun_s=VALUES(overrun_s), quality_flags=VALUES(quality_flags), quiesce_s=VALUES(quiesce_s),"
                " build=VALUES(build), build_version=VALUES(build_version), server_sha256=VALUES(server_sha256),"
                " malloc=VALUES(malloc), " + _FIGURES_UPDATE + ", " + _WINDOW_UPDATE,
                (
                    result.run_id, result.campaign_id, result.cell.target, result.cell.workload, result.cell.threads,
                    result.repetition, result.status, result.measured_s, result.totals.transactions, result.totals.queries,
                    result.totals.errors, result.qps, result.tps, lat.p50_ms, lat.p95_ms, lat.p99_ms, lat.max_ms,
                    result.worker, result.host, result.started_at, result.ended_at, error, packed, now,
                    quality["stalled_s"], quality["longest_stall_s"], quality["overrun_s"], quality["quality_flags"],
                    result.quiesce.waited_s if result.quiesce is not None else None,
                    result.server.build, result.server.build_version, result.server.server_sha256, result.server.malloc,
                    pool_of_run_id(result.run_id), *RunFigures.columns(result)[3:], *window_columns(result.window).values(),
                    *count_columns(result.server.count).values(),
                ),
            )
            self._store_series(result, now)
            state = {"ok": "done", "failed": "failed", "cancelled": "cancelled"}[result.status]
            self.db.execute(
                "UPDATE runs SET state=%s, worker=%s, started_at=%s, ended_at=%s, error=%s,"
                " attempts=GREATEST(attempts, %s), updated_at=%s WHERE run_id=%s",
                (state, result.worker, result.started_at, result.ended_at, error, result.attempt, now, result.run_id),
            )
            self.runs.finish_campaign_if_done(result.campaign_id)
        return True

    def _from_its_taker(self, result: RunResult, sender: Taker) -> bool:
        """Whether ``sender`` may deliver this whole result: the run's taker (logged when not).
        StoreRefused for a run no worker claimed: a worker claims a run (its run-started event,
        before the result on the same queue) before it measures, so such a result is no worker's."""
        binding = self.runs.binding(result.run_id)
        assert binding is not None  # planned: checked just before
        decision = judge_result(binding, sender, ok=result.status == "ok", part=False)
        if decision is Claim.BIND:
            raise StoreRefused(f"run {result.run_id}: no worker claimed it, and a result is taken only from the "
                               f"worker whose run-started event did ({sender} sent this one)")
        if decision is Claim.REFUSE:
            log.warning("result_refused", run_id=result.run_id, campaign_id=result.campaign_id, status=result.status,
                        sender=str(sender), taker=str(binding.taker) if binding.taker else None,
                        reason=refusal_reason(binding, ok=result.status == "ok", part=False))
            return False
        return True

    def _fits_packet(self, run_id: str, packed: bytes, error: str | None) -> None:
        """StoreRefused unless the INSERT of this result fits the server's max_allowed_packet
        (sent bigger, the server drops the connection, and the write looks like a DB away)."""
        limit = self.db.packet_limit()
        # Escaped for the SQL text, a byte takes two at worst; the error column four per character.
        size = 2 * len(packed) + 4 * len(error or "") + ROW_OVERHEAD
        if limit and size > limit:
            raise StoreRefused(
                f"result of run {run_id}: {len(packed):,} bytes compressed, too big for the results DB's "
                f"max_allowed_packet ({limit:,} bytes; the INSERT may take {size:,}): "
                "raise max_allowed_packet, then move it back from the dead letters")

    def _store_series(self, result: RunResult, stored_at: float) -> None:
        """The result's per-second series as rows of result_series (upserted: see schema 11)."""
        s = result.series
        n = len(s.queries)
        if not n:
            return

        def at(values: list[int], i: int, default: int | None = 0) -> int | None:
            return values[i] if i < len(values) else default

        rows = [(result.run_id, i, result.campaign_id, stored_at, at(s.transactions, i), s.queries[i],
                 at(s.errors, i), at(s.ignored_errors, i, None), at(s.reconnects, i, None), at(s.queue, i, None))
                for i in range(n)]
        # The client sends executemany's rows as one INSERT: in batches, so a long run's series
        # fits any max_allowed_packet that its compressed result fits.
        for first in range(0, n, SERIES_ROWS_PER_INSERT):
            self.db.execute(
                "INSERT INTO result_series (run_id, second, campaign_id, stored_at, transactions, queries, errors,"
                " ignored_errors, reconnects, queue) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON DUPLICATE KEY UPDATE campaign_id=VALUES(campaign_id), stored_at=VALUES(stored_at),"
                " transactions=VALUES(transactions), queries=VALUES(queries), errors=VALUES(errors),"
                " ignored_errors=VALUES(ignored_errors), reconnects=VALUES(reconnects), queue=VALUES(queue)",
                many=rows[first:first + SERIES_ROWS_PER_INSERT],
            )

    def rewrite_series(self, campaign_id: str) -> int:
        """Write result_series, the figure columns and the server's count again from a campaign's
        stored results (migration 11 backfills only the results kept as plain JSON, migrations 16
        and 21 none; the others come through here); how many results."""
        rows = self.db.rows("SELECT run_id, stored_at, result_json, result_z FROM results WHERE campaign_id=%s",
                          (campaign_id,))
        for run_id, stored_at, text, packed in rows:
            result = decode_stored(run_id, text, packed)
            self._store_series(result, float(stored_at))
            self.db.execute(f"UPDATE results SET {_FIGURES_ASSIGN}, {_COUNT_ASSIGN} WHERE run_id=%s",
                          RunFigures.columns(result)[3:] + tuple(count_columns(result.server.count).values())
                          + (run_id,))
        return len(rows)

    def save_cell_stats(self, rows: Sequence[CellStatRow], now: float | None = None) -> None:
        """Insert or replace per-cell statistics (keyed by campaign, metric, workload, threads, target, pool)."""
        if not rows:
            return
        cols = CELL_STAT_COLUMNS + ("computed_at",)
        updates = ", ".join(f"{c}=VALUES({c})" for c in cols[5:] if c != "pool")
        at = now if now is not None else time.time()
        self.db.execute(
            f"INSERT INTO cell_stats ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
            f" ON DUPLICATE KEY UPDATE {updates}",
            many=[tuple(getattr(r, c) for c in CELL_STAT_COLUMNS) + (at,) for r in rows],
        )

    def clear_verdicts(self, campaign_id: str) -> None:
        """Empty the stored verdicts of a campaign (decision, q-value, adjusted interval, and the
        decision's mark, first in a cell's marks): its cells are no longer the family they were
        judged in, until the whole campaign is judged again."""
        # The mark first: MariaDB assigns left to right. A row with a verdict and a ratio starts
        # with its decision's mark (services/reporting/cell_stats.py).
        self.db.execute(
            "UPDATE cell_stats SET mark=IF(ratio IS NOT NULL AND mark <> '', SUBSTRING(mark, 2), mark),"
            " verdict=NULL, q_value=NULL, interval_low=NULL, interval_high=NULL, interval_level=NULL"
            " WHERE campaign_id=%s AND verdict IS NOT NULL",
            (campaign_id,),
        )

    # -- reads ------------------------------------------------------------------------------
    def rows(self, campaign_id: str, workload: str | None = None,
             targets: Sequence[str] | None = None, *, or_threads: int | None = None,
             figures: bool = False, pool: str | None = None) -> list[ResultRow]:
        """The columns of every result of a campaign (of one ``pool`` of a campaign on several), or
        of one of its workloads, or of some of its targets in one workload, and then of every target
        at ``or_threads`` too (no whole results: see ``whole``); with ``figures``, each row's figures
        too (None for a row stored before schema 16 and not backfilled)."""
        where, params = _of_campaign(campaign_id, workload=workload, pool=pool)
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
            for r in self.db.rows(
                f"SELECT {_ROW_SELECT}{extra} FROM results WHERE {where}"
                " ORDER BY workload, threads, target, repetition",
                params,
            )
        ]

    def recent(self, campaigns: int) -> list[ResultRow]:
        """The results of the ``campaigns`` newest campaigns, oldest campaign first."""
        ids = [r[0] for r in self.db.rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (campaigns,))]
        return [row for cid in reversed(ids) for row in self.rows(cid)]

    def target_builds(self, campaign_id: str) -> list[TargetBuild]:
        """The distinct builds each target of a campaign ran, from the results' columns (results
        stored before migration 14 kept them only in result_json)."""
        rows = self.db.rows(
            "SELECT DISTINCT target, COALESCE(build, JSON_VALUE(result_json, '$.server.build')),"
            " COALESCE(build_version, JSON_VALUE(result_json, '$.server.build_version')),"
            " COALESCE(server_sha256, JSON_VALUE(result_json, '$.server.server_sha256')),"
            " COALESCE(malloc, JSON_VALUE(result_json, '$.server.malloc')) FROM results"
            " WHERE campaign_id=%s AND status='ok' ORDER BY target", (campaign_id,))
        return [TargetBuild(*r) for r in rows]

    def whole(self, campaign_id: str, run_ids: Sequence[str] | None = None, *, workload: str | None = None,
              pool: str | None = None) -> list[RunResult]:
        """Every whole stored result of a campaign, of one workload or pool when given (or those of
        ``run_ids``), decoded, for reports that need series, histograms or the server report beyond
        the result columns."""
        if run_ids is None:
            where, params = _of_campaign(campaign_id, workload=workload, pool=pool)
            return [decode_stored(run_id, text, packed) for run_id, text, packed in self.db.rows(
                f"SELECT run_id, result_json, result_z FROM results WHERE {where}", params)]
        out, ids = [], list(run_ids)
        for first in range(0, len(ids), IDS_PER_SELECT):
            chunk = ids[first:first + IDS_PER_SELECT]
            out.extend(decode_stored(run_id, text, packed) for run_id, text, packed in self.db.rows(
                "SELECT run_id, result_json, result_z FROM results WHERE campaign_id=%s AND run_id IN ("
                + ",".join(["%s"] * len(chunk)) + ")", (campaign_id, *chunk)))
        return out

    def history(self, target: str, workload: str, threads: int, *, with_results: bool = False) -> list[HistoryEntry]:
        """One cell's results across every campaign, oldest campaign first; with the whole
        results when asked (metrics beyond the columns)."""
        extra = ", r.result_json, r.result_z" if with_results else ""
        entries = []
        for r in self.db.rows(
                f"SELECT c.name, c.created_at, {_ROW_SELECT_R}{extra}"
                " FROM results r JOIN campaigns c ON c.campaign_id = r.campaign_id"
                " WHERE r.target=%s AND r.workload=%s AND r.threads=%s ORDER BY c.created_at, r.repetition",
                (target, workload, threads)):
            row = ResultRow.from_columns(r[2:2 + len(COLUMNS)])
            if with_results:
                row = row.with_result(decode_stored(row.run_id, r[-2], r[-1]))
            entries.append(HistoryEntry(r[0], float(r[1]), row))
        return entries

    def of_spec(self, name: str) -> list[HistoryEntry]:
        """Every result of every campaign named ``name`` (one spec's nights), oldest campaign first;
        the result columns only."""
        return [HistoryEntry(r[0], float(r[1]), ResultRow.from_columns(r[2:2 + len(COLUMNS)]))
                for r in self.db.rows(
                    f"SELECT c.name, c.created_at, {_ROW_SELECT_R}"
                    " FROM results r JOIN campaigns c ON c.campaign_id = r.campaign_id"
                    " WHERE c.name=%s ORDER BY c.created_at, r.target, r.workload, r.threads, r.repetition",
                    (name,))]

    def get(self, run_id: str) -> RunResult | None:
        """The whole stored result of one run, decoded; None when the run has none."""
        rows = self.db.rows("SELECT result_json, result_z FROM results WHERE run_id=%s", (run_id,))
        return decode_stored(run_id, *rows[0]) if rows else None

    def cell_stats(self, campaign_id: str, *, metric: str | None = None, workload: str | None = None,
                   threads: int | None = None, pool: str | None = None) -> list[CellStatRow]:
        """The stored per-cell statistics of a campaign (of one metric, workload, thread count, pool
        when given: '' is a one-pool campaign's)."""
        where, params = "campaign_id=%s", [campaign_id]
        for column, value in (("metric", metric), ("workload", workload), ("threads", threads), ("pool", pool)):
            if value is not None:
                where += f" AND {column}=%s"
                params.append(value)
        return [CellStatRow(*[bool(v) if c in ("higher_is_better", "high_cv", "collapsed") else v
                              for c, v in zip(CELL_STAT_COLUMNS, r)])
                for r in self.db.rows(f"SELECT {', '.join(CELL_STAT_COLUMNS)} FROM cell_stats WHERE {where}"
                                    " ORDER BY pool, metric, workload, threads, target", params)]

    def count(self, run_id: str) -> int:
        return int(self.db.rows("SELECT COUNT(*) FROM results WHERE run_id=%s", (run_id,))[0][0])


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


def _of_campaign(campaign_id: str, *, workload: str | None, pool: str | None) -> tuple[str, tuple]:
    """The WHERE clause (and its parameters) of a campaign's results, of one workload and pool when given."""
    where, params = "campaign_id=%s", (campaign_id,)
    for column, value in (("workload", workload), ("pool", pool)):
        if value is not None:
            where += f" AND {column}=%s"
            params = (*params, value)
    return where, params
