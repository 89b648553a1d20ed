"""Preparing sysbench's sbtest tables on a target, once per table shape.

Tables and rows are sysbench 1.0's (oltp_common.lua create_table): the secondary index k_N is
built after the bulk load, as sysbench does, because that is both faster and what leaves the
index in the same (freshly built) state sysbench leaves it in.
"""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from services.common.spec import IDENT_PATTERN, DataShape

from .distributions import special
from .target import connect

#: Where the shape of prepared tables is remembered, beside the tables themselves.
SHAPE_TABLE = "benchfleet_shape"
#: Rows per INSERT: about 200 kB of SQL, well under the default max_allowed_packet (16 MB).
BATCH_ROWS = 1000
#: Tables loaded at once; the server, not this client, is the bottleneck beyond a few.
MAX_PARALLEL = 8
#: byte -> ASCII digit, and the bytes dropped so that every digit is equally likely (250 = 25 x 10).
_DIGIT = bytes(48 + b % 10 for b in range(256))
_BIASED = bytes(range(250, 256))
#: Digits per row: c is 10 groups of 11, pad 5 groups of 11 (sysbench's "###########-..." templates).
_ROW_DIGITS = 165


def _quote(name: str) -> str:
    # Names come from validated spec identifiers; refusing anything else keeps it so even if a
    # caller builds params by hand.
    if not re.fullmatch(IDENT_PATTERN, name):
        raise ValueError(f"not a valid identifier: {name!r}")
    return f"`{name}`"


def _table_sql(n: int, engine: str) -> str:
    return (
        f"CREATE TABLE `sbtest{n}` (\n"
        "  id INTEGER NOT NULL AUTO_INCREMENT,\n"
        "  k INTEGER DEFAULT '0' NOT NULL,\n"
        "  c CHAR(120) DEFAULT '' NOT NULL,\n"
        "  pad CHAR(60) DEFAULT '' NOT NULL,\n"
        "  PRIMARY KEY (id)\n"
        f") ENGINE = {engine}"
    )


def _recorded(cur: Any) -> dict[str, str]:
    cur.execute(f"SELECT table_name, shape_marker FROM `{SHAPE_TABLE}`")
    return {str(t): str(m) for t, m in cur.fetchall()}


def _existing(cur: Any, database: str) -> set[str]:
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (database,))
    return {str(r[0]) for r in cur.fetchall()}


def ensure_tables(params: Mapping[str, Any], data: DataShape, seed: int = 0) -> bool:
    """Create the database and sbtest1..N for ``data`` unless tables of that exact shape are
    already there; return True if it (re)created them."""
    database = str(params["database"])
    conn = connect(params, database=False)
    try:
        cur = conn.cursor()
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {_quote(database)}")
        cur.execute(f"USE {_quote(database)}")
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS `{SHAPE_TABLE}` (table_name VARCHAR(64) NOT NULL PRIMARY KEY, "
            "shape_marker VARCHAR(128) NOT NULL, row_count BIGINT NOT NULL, "
            "prepared_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        wanted = [f"sbtest{n}" for n in range(1, data.tables + 1)]
        recorded, existing = _recorded(cur), _existing(cur, database)
        marker = data.marker()
        if all(recorded.get(t) == marker and t in existing for t in wanted):
            return False
        # Forget the old shape before touching any table, so a prepare that dies half way is
        # redone next time instead of being taken for a finished one.
        stale = sorted(set(recorded) - set(wanted))
        cur.execute(f"DELETE FROM `{SHAPE_TABLE}`")
        for t in stale:
            cur.execute(f"DROP TABLE IF EXISTS {_quote(t)}")
    finally:
        conn.close()
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, data.tables)) as pool:
        # list() re-raises the first failure of any table here.
        list(pool.map(lambda n: _load_table(params, data, n, seed), range(1, data.tables + 1)))
    return True


def _load_table(params: Mapping[str, Any], data: DataShape, n: int, seed: int) -> None:
    rng = random.Random(f"{seed}:sbtest{n}")
    conn = connect(params)
    try:
        cur = conn.cursor()
        cur.execute(f"DROP TABLE IF EXISTS `sbtest{n}`")
        cur.execute(_table_sql(n, data.engine))
        size = data.table_size
        head = f"INSERT INTO `sbtest{n}` (k, c, pad) VALUES "
        # Autocommitted batches: measured faster here than one transaction with InnoDB's
        # empty-table bulk load (unique_checks=0), which was 1.4-2x slower on MariaDB 10.11.
        for start in range(0, size, BATCH_ROWS):
            cur.execute(head + _rows(rng, min(BATCH_ROWS, size - start), size))
        cur.execute(f"CREATE INDEX `k_{n}` ON `sbtest{n}` (k)")
        cur.execute(
            f"REPLACE INTO `{SHAPE_TABLE}` (table_name, shape_marker, row_count) VALUES (%s, %s, %s)",
            (f"sbtest{n}", data.marker(), size),
        )
    finally:
        conn.close()


def _digits(rng: random.Random, n: int) -> str:
    out = b""
    while len(out) < n:
        out += rng.randbytes(n - len(out) + (n >> 4) + 16).translate(_DIGIT, _BIASED)
    return out[:n].decode()


def _rows(rng: random.Random, rows: int, size: int) -> str:
    """``rows`` VALUES tuples of sysbench's rows: k from the 'special' distribution, c and pad
    uniform random digit groups. Digits are drawn for the whole batch at once: about 3x less
    client CPU than formatting each group, so the server stays the bottleneck of prepare."""
    d, r = _digits(rng, _ROW_DIGITS * rows), rng.random
    out = []
    for i in range(0, _ROW_DIGITS * rows, _ROW_DIGITS):
        s = d[i:i + _ROW_DIGITS]
        # k is sb_rand(1, table_size), i.e. sysbench.rand.default at prepare time: 'special'
        # unless --rand-type was given to prepare, so k is skewed the same way here.
        out.append(f"({special(r, 1, size)},'{s[0:11]}-{s[11:22]}-{s[22:33]}-{s[33:44]}-{s[44:55]}-"
                   f"{s[55:66]}-{s[66:77]}-{s[77:88]}-{s[88:99]}-{s[99:110]}',"
                   f"'{s[110:121]}-{s[121:132]}-{s[132:143]}-{s[143:154]}-{s[154:165]}')")
    return ",".join(out)


def cleanup(params: Mapping[str, Any], data: DataShape) -> None:
    """Drop the sbtest tables of ``data`` (and any others recorded) and the shape record."""
    database = str(params["database"])
    conn = connect(params, database=False)
    try:
        cur = conn.cursor()
        if database not in _databases(cur):
            return
        cur.execute(f"USE {_quote(database)}")
        tables = {f"sbtest{n}" for n in range(1, data.tables + 1)}
        if SHAPE_TABLE in _existing(cur, database):
            tables |= set(_recorded(cur))
        for t in sorted(tables):
            cur.execute(f"DROP TABLE IF EXISTS {_quote(t)}")
        cur.execute(f"DROP TABLE IF EXISTS `{SHAPE_TABLE}`")
    finally:
        conn.close()


def _databases(cur: Any) -> set[str]:
    cur.execute("SHOW DATABASES")
    return {str(r[0]) for r in cur.fetchall()}
