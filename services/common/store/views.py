"""The results DB's views for SQL users and Grafana, kept current with their tables.

MariaDB fixes a view's column list when the view is created (``c.*`` included), so a view made
once never shows a column added later. The views are therefore not migrations: after the
migrations, a missing view is made with CREATE VIEW and each view whose definition or underlying
columns changed since it was made is made again with CREATE OR REPLACE, and its fingerprint recorded
in ``schema_views`` (migration 18).
results_v lists every column of results but the whole stored result, read from the table itself,
so a column a migration adds reaches it without touching this file.

CREATE OR REPLACE needs DROP on the view, even when the view does not exist yet; CREATE VIEW needs
only CREATE VIEW. The operator role (and root) has DROP; the collector's does not (least
privilege), so a collector creates missing views (CREATE VIEW, never OR REPLACE) and leaves an
outdated one, logged, for the next command run as a user that may (any `scheduler` command run
as an operator; docs/operations.md).
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Iterable, Mapping, Protocol, Sequence

from services.common import logs
from services.common.errors import StoreError

log = logs.get(__name__)

#: results columns results_v leaves out: the whole stored result (read it through the store).
RESULTS_V_SKIPS = ("result_json", "result_z")

#: Each view's SELECT; ``{results_columns}`` stands for every results column but RESULTS_V_SKIPS.
VIEWS: tuple[tuple[str, str], ...] = (
    ("campaigns_v", "SELECT c.*, FROM_UNIXTIME(c.created_at) AS created_time FROM campaigns c"),
    ("runs_v", "SELECT r.*, FROM_UNIXTIME(r.started_at) AS started_time, FROM_UNIXTIME(r.ended_at) AS ended_time,"
               " FROM_UNIXTIME(r.updated_at) AS updated_time FROM runs r"),
    ("results_v", "SELECT {results_columns}, FROM_UNIXTIME(r.started_at) AS started_time,"
                  " FROM_UNIXTIME(r.ended_at) AS ended_time, FROM_UNIXTIME(r.stored_at) AS stored_time FROM results r"),
    ("series_v", "SELECT s.run_id, r.campaign_id, r.target, r.workload, r.threads, r.repetition, s.second,"
                 " FROM_UNIXTIME(r.ended_at - r.measured_s + s.second) AS time,"
                 " s.queries AS qps, s.transactions AS tps, s.errors, s.ignored_errors, s.reconnects, s.queue"
                 " FROM result_series s JOIN results r ON r.run_id = s.run_id AND r.stored_at = s.stored_at"),
    ("cell_stats_v", "SELECT s.*, c.name AS campaign_name, FROM_UNIXTIME(c.created_at) AS campaign_time,"
                     " FROM_UNIXTIME(s.computed_at) AS computed_time"
                     " FROM cell_stats s JOIN campaigns c ON c.campaign_id = s.campaign_id"),
)
#: The tables the views read, whose columns are part of each view's fingerprint.
TABLES = ("campaigns", "runs", "results", "result_series", "cell_stats")
#: A view reads with its reader's rights: its maker's come from a role (deploy/ensure-services), which
#: MariaDB does not take on in a definer's context, and every role that reads may read the tables.
SECURITY = "SQL SECURITY INVOKER"
#: MySQL errors for a statement this user may not run (no DROP to replace a view).
DENIED = frozenset({1044, 1142, 1227})


def definitions(columns: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, str]]:
    """Each view's SELECT, given the tables' columns in order, and its fingerprint (the SELECT and
    the columns of the tables it reads: a new column changes it)."""
    results_cols = ", ".join(f"r.`{c}`" for c in columns.get("results", ()) if c not in RESULTS_V_SKIPS)
    out = {}
    for name, select in VIEWS:
        sql = select.format(results_columns=results_cols)
        read = [t for t in TABLES if re.search(rf"\b{t}\b", select)]
        text = sql + "|" + "|".join(f"{t}:{','.join(columns.get(t, ()))}" for t in read)
        out[name] = (sql, hashlib.sha256(text.encode()).hexdigest())
    return out


class Statements(Protocol):
    """What refreshing the views needs of the store's connection (which calls it, so it is not
    imported here)."""

    def execute(self, sql: str, params: Sequence[Any] = (), many: Iterable[Sequence[Any]] | None = None) -> Any: ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


def refresh_views(db: Statements) -> list[str]:
    """Make every missing view, and again every view whose fingerprint changed; the views made. A
    view this user may not replace is logged and left for a user who may."""
    columns: dict[str, list[str]] = {}
    for table, column in db.rows(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            f" AND TABLE_NAME IN ({', '.join(['%s'] * len(TABLES))}) ORDER BY TABLE_NAME, ORDINAL_POSITION", TABLES):
        columns.setdefault(table, []).append(column)
    recorded = dict(db.rows("SELECT name, fingerprint FROM schema_views"))
    existing = dict(db.rows("SELECT TABLE_NAME, SECURITY_TYPE FROM information_schema.VIEWS"
                            " WHERE TABLE_SCHEMA = DATABASE()"))
    made = []
    for name, (sql, fingerprint) in definitions(columns).items():
        if recorded.get(name) == fingerprint and existing.get(name) == "INVOKER":
            continue
        # OR REPLACE only for a view that is there: it needs DROP even for a missing one, which the
        # collector's user lacks. IF NOT EXISTS: two services starting at once may both make it.
        create = f"CREATE OR REPLACE {SECURITY} VIEW" if name in existing else f"CREATE {SECURITY} VIEW IF NOT EXISTS"
        try:
            db.execute(f"{create} {name} AS {sql}")
        except StoreError as e:
            if not _denied(e):
                raise
            log.warning("view_out_of_date", view=name, error=str(e),
                        hint="run any scheduler command as an operator (its user may replace views) to bring it up to date")
            continue
        db.execute("INSERT INTO schema_views (name, fingerprint, made_at) VALUES (%s, %s, %s)"
                       " ON DUPLICATE KEY UPDATE fingerprint=VALUES(fingerprint), made_at=VALUES(made_at)",
                       (name, fingerprint, time.time()))
        log.info("view_made", view=name)
        made.append(name)
    return made


def _denied(e: StoreError) -> bool:
    m = re.search(r"results DB: (\d+) ", str(e))
    return m is not None and int(m.group(1)) in DENIED
