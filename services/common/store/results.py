"""The results DB's result writes: a run's result (its columns, compressed whole, its figures),
its per-second series, and the per-cell statistics the collector computes."""

from __future__ import annotations

import time
import zlib
from typing import Sequence

from services.common import logs
from services.common.errors import StoreRefused
from services.common.messages.results import RunResult
from services.common.store.parts import refuse_unless_planned
from services.common.results.rows import CELL_STAT_COLUMNS, CellStatRow, quality_columns
from services.common.results.figures import FIGURE_COLUMNS, RunFigures
from services.common.store.campaigns import CampaignRecords
from services.common.store.reads import decode_stored

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
#: Bytes of a results row beyond its compressed result: every other column, and the SQL.
ROW_OVERHEAD = 8192
#: The error column is TEXT (65,535 bytes, 4 per character at worst); the whole error stays
#: in the stored result.
ERROR_COLUMN_CHARS = 16_000


class ResultWrites(CampaignRecords):
    """Storing results, their series and cell statistics (a part of Store)."""

    def store_result(self, result: RunResult) -> None:
        """Insert or replace the result of a run (keyed by run id) and set the run's state; a failed
        or cancelled result never replaces an ok one.
        StoreRefused, with nothing written, when no such run was planned or the result's
        campaign, cell or repetition differ from the run's, or it cannot fit the DB's packets."""
        refuse_unless_planned(self, result)
        if result.status != "ok" and self._rows("SELECT 1 FROM results WHERE run_id=%s AND status='ok'", (result.run_id,)):
            # A run redelivered after a broker restart or a worker's death is measured again; a
            # failure of that second measurement says nothing against the one already stored.
            log.warning("result_kept", run_id=result.run_id, kept="ok", dropped=result.status, error=result.error)
            return
        # Compressed: a result is mostly per-second series and histogram buckets (a 2-hour
        # run's 130 kB of JSON packs into about 31 kB), far inside a default max_allowed_packet.
        packed = zlib.compress(result.encode(), 6)
        error = None if result.error is None else result.error[:ERROR_COLUMN_CHARS]
        self._fits_packet(result.run_id, packed, error)
        now = time.time()
        lat = result.latency
        quality = quality_columns(result.quality)
        self._execute(
            "INSERT INTO results (run_id, campaign_id, target, workload, threads, repetition, status, measured_s,"
            " transactions, queries, errors, qps, tps, p50_ms, p95_ms, p99_ms, max_ms, worker, host, started_at,"
            " ended_at, error, result_json, result_z, stored_at, stalled_s, longest_stall_s, overrun_s, quality_flags,"
            " quiesce_s, build, build_version, server_sha256, malloc, " + _FIGURES_SET + ")"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,'',%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
            + _FIGURES_VALUES + ")"
            " ON DUPLICATE KEY UPDATE status=VALUES(status), measured_s=VALUES(measured_s),"
            " transactions=VALUES(transactions), queries=VALUES(queries), errors=VALUES(errors), qps=VALUES(qps),"
            " tps=VALUES(tps), p50_ms=VALUES(p50_ms), p95_ms=VALUES(p95_ms), p99_ms=VALUES(p99_ms),"
            " max_ms=VALUES(max_ms), worker=VALUES(worker), host=VALUES(host), started_at=VALUES(started_at),"
            " ended_at=VALUES(ended_at), error=VALUES(error), result_json='', result_z=VALUES(result_z),"
            " stored_at=VALUES(stored_at), stalled_s=VALUES(stalled_s), longest_stall_s=VALUES(longest_stall_s),"
            " overrun_s=VALUES(overrun_s), quality_flags=VALUES(quality_flags), quiesce_s=VALUES(quiesce_s),"
            " build=VALUES(build), build_version=VALUES(build_version), server_sha256=VALUES(server_sha256),"
            " malloc=VALUES(malloc), " + _FIGURES_UPDATE,
            (
                result.run_id, result.campaign_id, result.cell.target, result.cell.workload, result.cell.threads,
                result.repetition, result.status, result.measured_s, result.totals.transactions, result.totals.queries,
                result.totals.errors, result.qps, result.tps, lat.p50_ms, lat.p95_ms, lat.p99_ms, lat.max_ms,
                result.worker, result.host, result.started_at, result.ended_at, error, packed, now,
                quality["stalled_s"], quality["longest_stall_s"], quality["overrun_s"], quality["quality_flags"],
                result.quiesce.waited_s if result.quiesce is not None else None,
                result.server.build, result.server.build_version, result.server.server_sha256, result.server.malloc,
                *RunFigures.columns(result)[3:],
            ),
        )
        self._store_series(result, now)
        state = {"ok": "done", "failed": "failed", "cancelled": "cancelled"}[result.status]
        self._execute(
            "UPDATE runs SET state=%s, worker=%s, started_at=%s, ended_at=%s, error=%s,"
            " attempts=GREATEST(attempts, %s), updated_at=%s WHERE run_id=%s",
            (state, result.worker, result.started_at, result.ended_at, error, result.attempt, now, result.run_id),
        )
        self._finish_campaign_if_done(result.campaign_id)

    def _fits_packet(self, run_id: str, packed: bytes, error: str | None) -> None:
        """StoreRefused unless the INSERT of this result fits the server's max_allowed_packet
        (sent bigger, the server drops the connection, and the write looks like a DB away)."""
        if self._conn is None:
            self._execute("SELECT 1")  # connects, reading the limit
        # Escaped for the SQL text, a byte takes two at worst; the error column four per character.
        size = 2 * len(packed) + 4 * len(error or "") + ROW_OVERHEAD
        if self._packet_limit and size > self._packet_limit:
            raise StoreRefused(
                f"result of run {run_id}: {len(packed):,} bytes compressed, too big for the results DB's "
                f"max_allowed_packet ({self._packet_limit:,} bytes; the INSERT may take {size:,}): "
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
            self._execute(
                "INSERT INTO result_series (run_id, second, campaign_id, stored_at, transactions, queries, errors,"
                " ignored_errors, reconnects, queue) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON DUPLICATE KEY UPDATE campaign_id=VALUES(campaign_id), stored_at=VALUES(stored_at),"
                " transactions=VALUES(transactions), queries=VALUES(queries), errors=VALUES(errors),"
                " ignored_errors=VALUES(ignored_errors), reconnects=VALUES(reconnects), queue=VALUES(queue)",
                many=rows[first:first + SERIES_ROWS_PER_INSERT],
            )

    def rewrite_series(self, campaign_id: str) -> int:
        """Write result_series and the figure columns again from a campaign's stored results
        (migration 11 backfills only the results kept as plain JSON, migration 16 none; the
        others come through here); how many results."""
        rows = self._rows("SELECT run_id, stored_at, result_json, result_z FROM results WHERE campaign_id=%s",
                          (campaign_id,))
        for run_id, stored_at, text, packed in rows:
            result = decode_stored(run_id, text, packed)
            self._store_series(result, float(stored_at))
            self._execute(f"UPDATE results SET {_FIGURES_ASSIGN} WHERE run_id=%s",
                          RunFigures.columns(result)[3:] + (run_id,))
        return len(rows)

    def save_cell_stats(self, rows: Sequence[CellStatRow], now: float | None = None) -> None:
        """Insert or replace per-cell statistics (keyed by campaign, metric, workload, threads, target)."""
        if not rows:
            return
        cols = CELL_STAT_COLUMNS + ("computed_at",)
        updates = ", ".join(f"{c}=VALUES({c})" for c in cols[5:])
        at = now if now is not None else time.time()
        self._execute(
            f"INSERT INTO cell_stats ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
            f" ON DUPLICATE KEY UPDATE {updates}",
            many=[tuple(getattr(r, c) for c in CELL_STAT_COLUMNS) + (at,) for r in rows],
        )
