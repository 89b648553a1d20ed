"""The results DB (MariaDB): campaigns and their plan, run states, and results keyed by run id.

The scheduler records campaigns and plans here; the collector stores results and run states;
reports and progress read it. Every write is idempotent, so redelivered messages are harmless.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import mysql.connector
from pydantic import ValidationError

from services.common import logs
from services.common.config import Settings
from services.common.errors import StoreError
from services.common.messages import RunEvent, RunResult, RunSpec
from services.common.results import COLUMNS, HistoryEntry, ResultRow
from services.common.schema import MIGRATIONS
from services.common.spec import CampaignSpec

log = logs.get(__name__)

RUN_STATES = ("pending", "running", "done", "failed", "cancelled")
#: A run in one of these states has its final word; later "running" events must not undo it.
FINAL_STATES = ("done", "failed", "cancelled")
_ROW_SELECT = ", ".join(COLUMNS)
_ROW_SELECT_R = ", ".join(f"r.{c}" for c in COLUMNS)



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


class Store:
    """A connection to the results DB; not thread-safe (one per thread)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._conn: Any = None

    def open(self, migrate: bool = True) -> "Store":
        """Connect, creating the database and applying migrations when asked."""
        params = self.settings.db_params()
        db = params.pop("database")
        # The name goes into CREATE DATABASE; only a plain identifier may (settings, not a spec, give it).
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", str(db)):
            raise StoreError(f"db_name: {db!r} is not a plain database name (letters, digits, _)")
        try:
            self._conn = mysql.connector.connect(use_pure=False, autocommit=True, **params)
        except mysql.connector.Error as e:
            raise StoreError(
                f"cannot connect to the results DB at {self.settings.db_host}:{self.settings.db_port} "
                f"as {self.settings.db_user}: {e.errno} {e.msg}"
            ) from None
        cur = self._conn.cursor()
        if migrate:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
        try:
            self._conn.database = db
        except mysql.connector.Error as e:
            raise StoreError(f"results DB {db!r}: {e.errno} {e.msg}") from None
        if migrate:
            self.migrate()
        return self

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # closing a dead connection must not hide the real error
                pass
            self._conn = None

    def __enter__(self) -> "Store":
        return self if self._conn is not None else self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _execute(self, sql: str, params: Sequence[Any] = (), many: Iterable[Sequence[Any]] | None = None) -> Any:
        if self._conn is None:
            raise StoreError("store is not open")
        try:
            self._conn.ping(reconnect=True, attempts=3, delay=1)
            cur = self._conn.cursor()
            if many is not None:
                cur.executemany(sql, list(many))
            else:
                cur.execute(sql, tuple(params))
            return cur
        except mysql.connector.Error as e:
            raise StoreError(f"results DB: {e.errno} {e.msg}") from None

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
        for version, statements in MIGRATIONS:
            if version in done:
                continue
            for sql in statements:
                self._execute(sql)
            # INSERT IGNORE: two services starting at once may both apply an idempotent step.
            self._execute("INSERT IGNORE INTO schema_migrations VALUES (%s, %s)", (version, time.time()))
            log.info("schema_migrated", version=version)
        return max([v for v, _ in MIGRATIONS] + list(done))

    # -- campaigns --------------------------------------------------------------------------
    def record_campaign(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], now: float | None = None) -> None:
        """Record a campaign and its planned runs (state pending) in one transaction."""
        now = now if now is not None else time.time()
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
            conn.rollback()
            raise StoreError(f"results DB: cannot record campaign {campaign_id}: {e.errno} {e.msg}") from None

    def set_campaign_state(self, campaign_id: str, state: str) -> None:
        self._execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s", (state, campaign_id))

    def delete_campaign(self, campaign_id: str) -> None:
        """Remove a campaign that could not be published, so nothing half-done remains."""
        for table in ("results", "runs", "campaigns"):
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
        return CampaignRow(cid, name, CampaignSpec.model_validate_json(spec_json), baseline, int(total), state, float(created))

    def campaigns(self, limit: int = 20) -> list[CampaignRow]:
        ids = [r[0] for r in self._rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (limit,))]
        return [c for c in (self.campaign(i) for i in ids) if c is not None]

    # -- runs -------------------------------------------------------------------------------
    def mark_running(self, event: RunEvent) -> None:
        """Note that a worker started a run, unless the run already has its final state."""
        self._execute(
            "UPDATE runs SET state='running', worker=%s, started_at=%s, attempts=GREATEST(attempts, %s), updated_at=%s"
            " WHERE run_id=%s AND state NOT IN ('done','failed','cancelled')",
            (event.worker, event.at, event.attempt, time.time(), event.run_id),
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

    # -- results ----------------------------------------------------------------------------
    def store_result(self, result: RunResult) -> None:
        """Insert or replace the result of a run (keyed by run id) and set the run's state."""
        now = time.time()
        lat = result.latency
        self._execute(
            "INSERT INTO results (run_id, campaign_id, target, workload, threads, repetition, status, measured_s,"
            " transactions, queries, errors, qps, tps, p50_ms, p95_ms, p99_ms, max_ms, worker, host, started_at,"
            " ended_at, error, result_json, stored_at) VALUES"
            " (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON DUPLICATE KEY UPDATE status=VALUES(status), measured_s=VALUES(measured_s),"
            " transactions=VALUES(transactions), queries=VALUES(queries), errors=VALUES(errors), qps=VALUES(qps),"
            " tps=VALUES(tps), p50_ms=VALUES(p50_ms), p95_ms=VALUES(p95_ms), p99_ms=VALUES(p99_ms),"
            " max_ms=VALUES(max_ms), worker=VALUES(worker), host=VALUES(host), started_at=VALUES(started_at),"
            " ended_at=VALUES(ended_at), error=VALUES(error), result_json=VALUES(result_json), stored_at=VALUES(stored_at)",
            (
                result.run_id, result.campaign_id, result.cell.target, result.cell.workload, result.cell.threads,
                result.repetition, result.status, result.measured_s, result.totals.transactions, result.totals.queries,
                result.totals.errors, result.qps, result.tps, lat.p50_ms, lat.p95_ms, lat.p99_ms, lat.max_ms,
                result.worker, result.host, result.started_at, result.ended_at, result.error,
                result.encode().decode(), now,
            ),
        )
        state = {"ok": "done", "failed": "failed", "cancelled": "cancelled"}[result.status]
        self._execute(
            "UPDATE runs SET state=%s, worker=%s, started_at=%s, ended_at=%s, error=%s,"
            " attempts=GREATEST(attempts, %s), updated_at=%s WHERE run_id=%s",
            (state, result.worker, result.started_at, result.ended_at, result.error, result.attempt, now, result.run_id),
        )
        self._finish_campaign_if_done(result.campaign_id)

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

    def results(self, campaign_id: str) -> list[ResultRow]:
        """The columns of every result of a campaign (no whole results: see ``stored_results``)."""
        return [
            ResultRow.from_columns(r)
            for r in self._rows(
                f"SELECT {_ROW_SELECT} FROM results WHERE campaign_id=%s ORDER BY workload, threads, target, repetition",
                (campaign_id,),
            )
        ]

    def recent_results(self, campaigns: int) -> list[ResultRow]:
        """The results of the ``campaigns`` newest campaigns, oldest campaign first."""
        ids = [r[0] for r in self._rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (campaigns,))]
        return [row for cid in reversed(ids) for row in self.results(cid)]

    def stored_results(self, campaign_id: str) -> list[RunResult]:
        """Every whole stored result of a campaign, decoded, for reports that need series,
        histograms or the server report beyond the result columns."""
        return [_decode_stored(run_id, text) for run_id, text in self._rows(
            "SELECT run_id, result_json FROM results WHERE campaign_id=%s", (campaign_id,))]

    def cell_history(self, target: str, workload: str, threads: int) -> list[HistoryEntry]:
        """One cell's results across every campaign, oldest campaign first."""
        return [
            HistoryEntry(r[0], float(r[1]), ResultRow.from_columns(r[2:]))
            for r in self._rows(
                f"SELECT c.name, c.created_at, {_ROW_SELECT_R}"
                " FROM results r JOIN campaigns c ON c.campaign_id = r.campaign_id"
                " WHERE r.target=%s AND r.workload=%s AND r.threads=%s ORDER BY c.created_at, r.repetition",
                (target, workload, threads),
            )
        ]

    def result(self, run_id: str) -> RunResult | None:
        """The whole stored result of one run, decoded; None when the run has none."""
        rows = self._rows("SELECT result_json FROM results WHERE run_id=%s", (run_id,))
        return _decode_stored(run_id, rows[0][0]) if rows else None

    def result_count(self, run_id: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM results WHERE run_id=%s", (run_id,))[0][0])


def _decode_stored(run_id: str, text: str) -> RunResult:
    # pydantic-core parses the JSON itself: a 10,000-run report decodes every result at once.
    try:
        return RunResult.model_validate_json(text)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise StoreError(f"stored result of run {run_id} does not decode: {where}: {err['msg']}") from None
