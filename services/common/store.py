"""The results DB (MariaDB): campaigns and their plan, run states, and results keyed by run id.

The scheduler records campaigns and plans here; the collector stores results and run states;
reports and progress read it. Every write is idempotent, so redelivered messages are harmless,
and so is running a statement again on a new connection after the old one was lost.

Three kinds of failure leave this module, for callers to tell apart: StoreUnavailable (the DB
is away: wait and try again, the message is not to blame), StoreRefused (this write is wrong:
a run that does not exist, a value the DB rejects, a result too big for its packet limit), and
StoreError for the rest (a DB that answers but cannot be used as configured).
"""

from __future__ import annotations

import hashlib
import re
import time
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import mysql.connector
from pydantic import ValidationError

from services.common import logs
from services.common.config import Settings
from services.common.errors import StoreError, StoreRefused, StoreUnavailable
from services.common.export import CampaignExport, ExportedCampaign, ExportedRun
from services.common.messages import Cell, RunEvent, RunResult, RunSpec, WorkerAnnouncement, WorkerBuilds
from services.common.results import (
    CELL_STAT_COLUMNS,
    COLUMNS,
    CellStatRow,
    HistoryEntry,
    ResultRow,
    TargetBuild,
    quality_columns,
)
from services.common.part_store import PartStore
from services.common.run_figures import FIGURE_COLUMNS, RunFigures
from services.common.schema import MIGRATIONS
from services.common.spec import CampaignSpec
from services.common.stored_spec import read_stored_spec
from services.common.views import refresh_views

log = logs.get(__name__)

#: Rows of result_series per INSERT: about 30 kB of SQL, inside even a 64 kB max_allowed_packet.
SERIES_ROWS_PER_INSERT = 200

RUN_STATES = ("pending", "running", "done", "failed", "cancelled")
#: A run in one of these states has its final word; later "running" events must not undo it.
FINAL_STATES = ("done", "failed", "cancelled")
_ROW_SELECT = ", ".join(COLUMNS)
_ROW_SELECT_R = ", ".join(f"r.{c}" for c in COLUMNS)

#: MySQL errors after which the connection is gone or useless: connect again (the database is
#: in the connect parameters, so a new connection is in the right one) and run the statement again.
RECONNECT_ON = frozenset({
    1046,  # no database selected: a connection that lost its database
    1053,  # server shutdown in progress
    1152, 1158, 1159, 1160, 1161,  # aborted connection, network read/write errors
    1927,  # connection killed (KILL <id>)
    2002, 2003, 2005, 2006, 2013, 2014, 2055,  # cannot connect, gone away, lost, out of sync
    4031,  # disconnected by the server after wait_timeout (MySQL 8.0.24+)
})
#: Errors that pass by themselves: run the statement again on the same connection.
RETRY_ON = frozenset({
    1040, 1203,  # too many connections
    1205, 1213,  # lock wait timeout, deadlock
    1290,  # read-only (--read-only during a switchover)
})
#: MySQL errors that blame the values written, not the DB: data exceptions and integrity
#: violations (SQLSTATE classes 22 and 23), text the column's character set cannot hold, and a
#: statement above max_allowed_packet (the server closes the connection after that one).
REFUSED_SQLSTATE_CLASSES = ("22", "23")
ER_NET_PACKET_TOO_LARGE = 1153
ER_BAD_DB_ERROR = 1049
REFUSED_ON = frozenset({ER_NET_PACKET_TOO_LARGE, 1366})
#: Tries of one statement (the first again at once, a lost connection needs no wait), then the
#: DB counts as away; pauses between tries double from RETRY_BACKOFF_S.
RETRY_ATTEMPTS = 4
RETRY_BACKOFF_S = 0.5
#: Run ids per ``IN (...)`` list when reading chosen whole results.
IDS_PER_SELECT = 500
#: The figure columns the store writes (queries, transactions and p50_ms are written with the
#: other result columns): schema 16, see services/common/run_figures.py.
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



@dataclass(frozen=True)
class CampaignRow:
    campaign_id: str
    name: str
    spec: CampaignSpec
    baseline: str
    total_runs: int
    state: str
    created_at: float


def spec_hash(spec: CampaignSpec) -> str:
    """A stable hash of a spec's meaning (not its YAML formatting)."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


class Store(PartStore):
    """A connection to the results DB; not thread-safe (one per thread). A lost connection is
    made again on the next statement, into the same database."""

    def __init__(self, settings: Settings, *, attempts: int = RETRY_ATTEMPTS, backoff_s: float = RETRY_BACKOFF_S):
        self.settings = settings
        self.attempts = attempts
        self.backoff_s = backoff_s
        self._conn: Any = None
        #: Opened and not closed (``_conn`` is None between losing a connection and the next).
        self._open = False
        #: The server's max_allowed_packet, read on each new connection.
        self._packet_limit = 0

    @property
    def _where(self) -> str:
        s = self.settings
        return f"{s.db_host}:{s.db_port}" if not s.db_socket else s.db_socket

    def _params(self) -> dict[str, Any]:
        params = self.settings.db_params()
        db = params["database"]
        # The name goes into CREATE DATABASE; only a plain identifier may (settings, not a spec, give it).
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", str(db)):
            raise StoreError(f"db_name: {db!r} is not a plain database name (letters, digits, _)")
        return params

    def _connect(self, *, create: bool = False, patient: bool = False) -> Any:
        """A new connection into the results DB (created first when ``create`` and missing);
        ``patient``: without read/write timeouts, for migrations that may work long on big tables."""
        params = self._params()
        if patient:
            params.pop("read_timeout", None)
            params.pop("write_timeout", None)
        try:
            conn = mysql.connector.connect(use_pure=False, autocommit=True, **params)
        except mysql.connector.Error as e:
            if e.errno == ER_BAD_DB_ERROR and create:
                self._create_database()
                return self._connect(patient=patient)
            what = (f"cannot connect to the results DB at {self._where} as {self.settings.db_user}: "
                    f"{e.errno} {e.msg}")
            raise (StoreUnavailable if _away(e) else StoreError)(what) from None
        try:
            cur = conn.cursor(buffered=True)
            cur.execute("SELECT @@max_allowed_packet")
            self._packet_limit = int(cur.fetchall()[0][0])
        except mysql.connector.Error as e:
            _close(conn)
            raise (StoreUnavailable if _away(e) else StoreError)(f"results DB: {e.errno} {e.msg}") from None
        return conn

    def _create_database(self) -> None:
        params = self._params()
        db = params.pop("database")
        try:
            conn = mysql.connector.connect(use_pure=False, autocommit=True, **params)
            try:
                conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
            finally:
                _close(conn)
        except mysql.connector.Error as e:
            raise (StoreUnavailable if _away(e) else StoreError)(f"results DB {db!r}: {e.errno} {e.msg}") from None

    def open(self, migrate: bool = True) -> "Store":
        """Connect, creating the database and applying migrations when asked."""
        self._conn = self._connect(create=migrate)
        self._open = True
        if migrate:
            self.migrate()
        return self

    def close(self) -> None:
        self._open = False
        if self._conn is not None:
            _close(self._conn)
            self._conn = None

    def __enter__(self) -> "Store":
        return self if self._open else self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _execute(self, sql: str, params: Sequence[Any] = (), many: Iterable[Sequence[Any]] | None = None) -> Any:
        """Run one statement, connecting again when the connection was lost and trying again
        while the DB is away (every statement here may run twice)."""
        if not self._open:
            raise StoreError("store is not open")
        rows = None if many is None else list(many)
        error = ""
        for attempt in range(1, self.attempts + 1):
            if attempt > 2:
                time.sleep(self.backoff_s * 2 ** (attempt - 3))
            try:
                if self._conn is None:
                    self._conn = self._connect()
                cur = self._conn.cursor(buffered=True)
                if rows is not None:
                    cur.executemany(sql, rows)
                else:
                    cur.execute(sql, tuple(params))
                return cur
            except StoreUnavailable as e:  # from _connect
                error = str(e)
            except mysql.connector.Error as e:
                error = f"results DB: {e.errno} {e.msg}"
                if _lost(e) or e.errno == ER_NET_PACKET_TOO_LARGE:
                    _close(self._conn)
                    self._conn = None
                if _refused(e):
                    raise StoreRefused(error) from None
                if not _away(e):
                    raise StoreError(error) from None
            except (OverflowError, ValueError) as e:
                # A parameter the client library cannot convert: the value is wrong, not the DB.
                raise StoreRefused(f"results DB: cannot send a value: {type(e).__name__}: {e}") from None
        raise StoreUnavailable(f"{error} (results DB at {self._where}, {self.attempts} tries)")

    def reachable(self) -> bool:
        """Whether the results DB answers now (tells "DB away" from "DB refused this write")."""
        try:
            self._execute("SELECT 1").fetchall()
            return True
        except StoreError:
            return False

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._execute(sql, params).fetchall())

    # -- schema -----------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply pending migrations in order; returns the schema version now in force."""
        self._execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INT NOT NULL PRIMARY KEY, applied_at DOUBLE NOT NULL)")
        done = {r[0] for r in self._rows("SELECT version FROM schema_migrations")}
        pending = [(v, statements) for v, statements in MIGRATIONS if v not in done]
        if pending:
            # Backfills may work on big tables longer than a statement's read timeout.
            _close(self._conn)
            self._conn = None
            self._conn = self._connect(patient=True)
        try:
            for version, statements in pending:
                for sql in statements:
                    self._execute(sql)
                # INSERT IGNORE: two services starting at once may both apply an idempotent step.
                self._execute("INSERT IGNORE INTO schema_migrations VALUES (%s, %s)", (version, time.time()))
                log.info("schema_migrated", version=version)
        finally:
            if pending:  # back to a connection with the timeouts
                _close(self._conn)
                self._conn = None
        refresh_views(self)  # views follow their tables' columns (views.py)
        return max([v for v, _ in MIGRATIONS] + list(done))

    # -- campaigns --------------------------------------------------------------------------
    def record_campaign(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], now: float | None = None) -> None:
        """Record a campaign and its planned runs (state pending) in one transaction."""
        now = now if now is not None else time.time()
        self._execute("SELECT 1")  # a live connection (made again if it was lost) for the transaction
        conn = self._conn
        try:
            conn.start_transaction()
            cur = conn.cursor()
            cur.execute(
                "INSERT INTO campaigns (campaign_id, name, spec_json, spec_hash, pool, baseline, total_runs, state, created_at)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,'submitted',%s)",
                (campaign_id, spec.name, spec.model_dump_json(), spec_hash(spec), spec.pool, spec.baseline_name, len(runs), now),
            )
            cur.executemany(
                "INSERT INTO runs (run_id, campaign_id, seq, target, workload, threads, repetition, state, updated_at)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,'pending',%s)",
                [(r.run_id, campaign_id, r.seq, r.cell.target, r.cell.workload, r.cell.threads, r.repetition, now) for r in runs],
            )
            conn.commit()
        except mysql.connector.Error as e:
            try:
                conn.rollback()
            except mysql.connector.Error:  # a lost connection rolled it back already
                pass
            error = f"results DB: cannot record campaign {campaign_id}: {e.errno} {e.msg}"
            raise (StoreUnavailable if _away(e) else StoreError)(error) from None

    def set_campaign_state(self, campaign_id: str, state: str) -> None:
        self._execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s", (state, campaign_id))

    def delete_campaign(self, campaign_id: str) -> None:
        """Remove a campaign that could not be published, so nothing half-done remains."""
        for table in ("cell_stats", "result_series", "results", "runs", "campaigns"):
            self._execute(f"DELETE FROM {table} WHERE campaign_id=%s", (campaign_id,))

    def campaign(self, ref: str) -> CampaignRow | None:
        """A campaign by id, or the latest one of that name."""
        rows = self._rows(
            "SELECT campaign_id, name, spec_json, baseline, total_runs, state, created_at FROM campaigns"
            " WHERE campaign_id=%s OR name=%s ORDER BY (campaign_id=%s) DESC, created_at DESC LIMIT 1",
            (ref, ref, ref),
        )
        if not rows:
            return None
        cid, name, spec_json, baseline, total, state, created = rows[0]
        # Leniently: a campaign recorded by an earlier spec model stays readable (stored_spec).
        return CampaignRow(cid, name, read_stored_spec(spec_json, cid), baseline, int(total), state, float(created))

    def campaigns(self, limit: int = 20) -> list[CampaignRow]:
        ids = [r[0] for r in self._rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (limit,))]
        return [c for c in (self.campaign(i) for i in ids) if c is not None]

    # -- runs -------------------------------------------------------------------------------
    def mark_running(self, event: RunEvent) -> None:
        """Note that a worker started a run, unless the run already has its final state; or, for a
        "measuring" event, when its warm-up began. Both by the worker's clock: updated_at equals
        started_at until the measured part began, then holds that moment (run_finality reads it)."""
        if event.state == "measuring":
            self._execute(
                "UPDATE runs SET updated_at=GREATEST(%s, started_at + 0.001) WHERE run_id=%s AND state='running'"
                " AND started_at <= %s AND attempts <= %s",
                (event.at, event.run_id, event.at, event.attempt),
            )
            return
        self._execute(
            "UPDATE runs SET state='running', worker=%s, started_at=%s, attempts=GREATEST(attempts, %s), updated_at=%s"
            " WHERE run_id=%s AND state NOT IN ('done','failed','cancelled')",
            (event.worker, event.at, event.attempt, event.at, event.run_id),
        )

    def run_counts(self, campaign_id: str) -> dict[str, int]:
        counts = {s: 0 for s in RUN_STATES}
        for state, n in self._rows("SELECT state, COUNT(*) FROM runs WHERE campaign_id=%s GROUP BY state", (campaign_id,)):
            counts[state] = int(n)
        return counts

    def campaign_span(self, campaign_id: str) -> tuple[float | None, float | None]:
        """When the campaign's first run started and its last run ended (None before any did)."""
        (first, last), = self._rows("SELECT MIN(started_at), MAX(ended_at) FROM runs WHERE campaign_id=%s",
                                    (campaign_id,))
        return first, last

    def active_runs(self, campaign_id: str) -> list[tuple[str, str, int, int, str | None, float | None]]:
        """Runs in progress: (target, workload, threads, repetition, worker, started_at)."""
        return [
            (r[0], r[1], int(r[2]), int(r[3]), r[4], r[5])
            for r in self._rows(
                "SELECT target, workload, threads, repetition, worker, started_at FROM runs"
                " WHERE campaign_id=%s AND state='running' ORDER BY seq",
                (campaign_id,),
            )
        ]

    # -- worker builds ----------------------------------------------------------------------
    def record_worker_builds(self, msg: WorkerBuilds) -> None:
        """Keep ``msg`` as its host and pool's builds, unless a newer announcement is kept."""
        # Assignments run left to right: announced_at is compared before it is replaced.
        self._execute(
            "INSERT INTO worker_builds (host, pool, worker, announcement_json, announced_at) VALUES (%s,%s,%s,%s,%s)"
            " ON DUPLICATE KEY UPDATE"
            " worker=IF(VALUES(announced_at) >= announced_at, VALUES(worker), worker),"
            " announcement_json=IF(VALUES(announced_at) >= announced_at, VALUES(announcement_json), announcement_json),"
            " announced_at=GREATEST(announced_at, VALUES(announced_at))",
            (msg.host, msg.pool, msg.worker, msg.encode().decode(), msg.at),
        )

    def pool_builds(self, pool: str) -> list[WorkerBuilds]:
        """The last build announcement of every host of ``pool``, by host."""
        out = []
        for host, text in self._rows("SELECT host, announcement_json FROM worker_builds WHERE pool=%s ORDER BY host",
                                     (pool,)):
            try:
                out.append(WorkerBuilds.model_validate_json(text))
            except ValidationError as e:
                log.warning("worker_builds_undecodable", host=host, error=str(e).splitlines()[0])
        return out

    # -- results ----------------------------------------------------------------------------
    def store_result(self, result: RunResult) -> None:
        """Insert or replace the result of a run (keyed by run id) and set the run's state; a failed
        or cancelled result never replaces an ok one.
        StoreRefused, with nothing written, when no such run was planned or the result's
        campaign, cell or repetition differ from the run's, or it cannot fit the DB's packets."""
        planned = self._rows("SELECT campaign_id, target, workload, threads, repetition FROM runs WHERE run_id=%s",
                             (result.run_id,))
        if not planned:
            raise StoreRefused(f"run_id: no run {result.run_id!r} was planned in the results DB")
        cid, target, workload, threads, repetition = planned[0]
        problem = result.mismatch(cid, Cell(target=target, workload=workload, threads=int(threads)), int(repetition))
        if problem is not None:
            raise StoreRefused(problem)
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
            result = _decode_stored(run_id, text, packed)
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

    # -- export / import -------------------------------------------------------------------
    def export_campaign(self, ref: str) -> CampaignExport | None:
        """Everything stored of campaign ``ref`` (id, or name for the latest); None if unknown."""
        c = self.campaign(ref)
        if c is None:
            return None
        (spec_hash_, pool, key), = self._rows(
            "SELECT spec_hash, pool, idempotency_key FROM campaigns WHERE campaign_id=%s", (c.campaign_id,))
        runs = [ExportedRun(run_id=r[0], seq=int(r[1]), target=r[2], workload=r[3], threads=int(r[4]),
                            repetition=int(r[5]), state=r[6], attempts=int(r[7]), worker=r[8], started_at=r[9],
                            ended_at=r[10], error=r[11], updated_at=float(r[12]))
                for r in self._rows("SELECT run_id, seq, target, workload, threads, repetition, state, attempts, worker,"
                                    " started_at, ended_at, error, updated_at FROM runs WHERE campaign_id=%s"
                                    " ORDER BY seq, run_id", (c.campaign_id,))]
        results = sorted(self.stored_results(c.campaign_id), key=lambda r: r.run_id)
        return CampaignExport(
            campaign=ExportedCampaign(campaign_id=c.campaign_id, name=c.name, spec=c.spec, spec_hash=spec_hash_,
                                      pool=pool, baseline=c.baseline, total_runs=c.total_runs, state=c.state,
                                      created_at=c.created_at, idempotency_key=key),
            runs=runs, results=results)

    def import_campaign(self, export: CampaignExport) -> None:
        """Bring an exported campaign in: the same campaign id, run ids and results, replacing
        what an earlier import of it stored (so importing twice changes nothing)."""
        c = export.campaign
        self._execute(
            "INSERT INTO campaigns (campaign_id, name, spec_json, spec_hash, pool, baseline, total_runs, state,"
            " created_at, idempotency_key) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON DUPLICATE KEY UPDATE"
            " name=VALUES(name), spec_json=VALUES(spec_json), spec_hash=VALUES(spec_hash), pool=VALUES(pool),"
            " baseline=VALUES(baseline), total_runs=VALUES(total_runs), state=VALUES(state),"
            " created_at=VALUES(created_at), idempotency_key=VALUES(idempotency_key)",
            (c.campaign_id, c.name, c.spec.model_dump_json(), c.spec_hash, c.pool, c.baseline, c.total_runs, c.state,
             c.created_at, c.idempotency_key))
        # The runs first: a result is stored only for a planned run. Storing it sets its run's
        # state, so the export's rows are written again after, their word being final.
        self._upsert_runs(c.campaign_id, export.runs)
        for result in export.results:
            self.store_result(result)
        self._upsert_runs(c.campaign_id, export.runs)
        self.set_campaign_state(c.campaign_id, c.state)

    def _upsert_runs(self, campaign_id: str, runs: Sequence[ExportedRun]) -> None:
        if not runs:
            return
        self._execute(
            "INSERT INTO runs (run_id, campaign_id, seq, target, workload, threads, repetition, state, attempts,"
            " worker, started_at, ended_at, error, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON DUPLICATE KEY UPDATE campaign_id=VALUES(campaign_id), seq=VALUES(seq), target=VALUES(target),"
            " workload=VALUES(workload), threads=VALUES(threads), repetition=VALUES(repetition),"
            " state=VALUES(state), attempts=VALUES(attempts), worker=VALUES(worker),"
            " started_at=VALUES(started_at), ended_at=VALUES(ended_at), error=VALUES(error),"
            " updated_at=VALUES(updated_at)",
            many=[(r.run_id, campaign_id, r.seq, r.target, r.workload, r.threads, r.repetition, r.state,
                   r.attempts, r.worker, r.started_at, r.ended_at, r.error, r.updated_at) for r in runs])

    def _finish_campaign_if_done(self, campaign_id: str) -> None:
        counts = self.run_counts(campaign_id)
        if counts["pending"] == 0 and counts["running"] == 0 and sum(counts.values()) > 0:
            state = "finished" if counts["failed"] == 0 and counts["cancelled"] == 0 else "finished_with_failures"
            # A late result can turn a reaped run done again: the campaign's state follows it.
            self._execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s"
                          " AND state IN ('submitted','running','finished','finished_with_failures')",
                          (state, campaign_id))
        else:
            self._execute("UPDATE campaigns SET state='running' WHERE campaign_id=%s AND state='submitted'", (campaign_id,))

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
            return [_decode_stored(run_id, text, packed) for run_id, text, packed in self._rows(
                "SELECT run_id, result_json, result_z FROM results WHERE campaign_id=%s", (campaign_id,))]
        out, ids = [], list(run_ids)
        for first in range(0, len(ids), IDS_PER_SELECT):
            chunk = ids[first:first + IDS_PER_SELECT]
            out.extend(_decode_stored(run_id, text, packed) for run_id, text, packed in self._rows(
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
                row = row.with_result(_decode_stored(row.run_id, r[-2], r[-1]))
            entries.append(HistoryEntry(r[0], float(r[1]), row))
        return entries

    def result(self, run_id: str) -> RunResult | None:
        """The whole stored result of one run, decoded; None when the run has none."""
        rows = self._rows("SELECT result_json, result_z FROM results WHERE run_id=%s", (run_id,))
        return _decode_stored(run_id, *rows[0]) if rows else None

    # -- worker endpoints (Prometheus service discovery) -------------------------------------
    def record_announcement(self, a: WorkerAnnouncement) -> None:
        """Keep a worker's newest announcement; an older one arriving late changes nothing."""
        self._execute(
            "INSERT INTO worker_endpoints (worker, pool, address, state, announced_at) VALUES (%s, %s, %s, %s, %s)"
            " ON DUPLICATE KEY UPDATE"
            " pool=IF(VALUES(announced_at) >= announced_at, VALUES(pool), pool),"
            " address=IF(VALUES(announced_at) >= announced_at, VALUES(address), address),"
            " state=IF(VALUES(announced_at) >= announced_at, VALUES(state), state),"
            " announced_at=GREATEST(announced_at, VALUES(announced_at))",
            (a.worker, a.pool, a.address, a.state, a.at),
        )

    def announcements(self) -> list[WorkerAnnouncement]:
        """Every worker's newest announcement, by worker id."""
        return [WorkerAnnouncement(worker=w, pool=p, address=addr, state=st, at=float(at)) for w, p, addr, st, at in
                self._rows("SELECT worker, pool, address, state, announced_at FROM worker_endpoints ORDER BY worker")]

    def result_count(self, run_id: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM results WHERE run_id=%s", (run_id,))[0][0])


def _lost(e: mysql.connector.Error) -> bool:
    """Whether a MySQL error means this connection is gone (the client library says so with no
    code, or -1: "MySQL Connection not available", once the server closed it after wait_timeout)."""
    return e.errno is None or e.errno < 0 or e.errno in RECONNECT_ON


def _away(e: mysql.connector.Error) -> bool:
    """Whether a MySQL error means the DB is away or busy for now (not: refuses this write)."""
    return _lost(e) or e.errno in RETRY_ON


def _refused(e: mysql.connector.Error) -> bool:
    """Whether a MySQL error blames the values written (see REFUSED_ON)."""
    return e.errno in REFUSED_ON or (e.sqlstate or "")[:2] in REFUSED_SQLSTATE_CLASSES


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # closing a dead connection must not hide the real error
        pass


def _decode_stored(run_id: str, text: str, packed: bytes | None = None) -> RunResult:
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
