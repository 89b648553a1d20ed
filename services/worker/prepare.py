"""Preparing sysbench's sbtest tables on a target, once per table shape.

Tables and rows are sysbench 1.0's (oltp_common.lua create_table) for the sysbench 1.0 tests: the
secondary index k_N is built after the bulk load, as sysbench does, because that is both faster
and what leaves the index in the same (freshly built) state sysbench leaves it in. The 2010
workloads get what sysbench 0.5's scripts prepared in 2010 (one table, UNSIGNED columns,
MAX_ROWS, k = 0 or k = id, or no rows at all: see services/workload/registry.py TableLayout);
their index k is built after the load too, where those scripts built it before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import mysql.connector
import numpy as np

from services.common.errors import DbError
from services.common.spec.fields import IDENT_PATTERN
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connect
from services.workload.distributions import SPEC_ITER, SPEC_PCT, SPEC_RES
from services.workload.registry import SYSBENCH_10, TableLayout

#: Where the shape of prepared tables is remembered, beside the tables themselves.
SHAPE_TABLE = "benchfleet_shape"
#: Rows per LOAD DATA statement (about 0.5 MB of file). Measured on 4 x 100k InnoDB rows: 10k-row
#: chunks load in 0.7x the time of one LOAD DATA per table, which holds one huge transaction, and
#: 2.5k-row chunks cost the client a third less CPU than 10k ones (their arrays stay in cache)
#: for the same server CPU.
LOAD_ROWS = 2_500
#: Rows per INSERT when the server refuses LOAD DATA LOCAL: about 190 kB of SQL, well under the
#: default max_allowed_packet (16 MB).
INSERT_ROWS = 1000
#: Tables loaded at once; the server, not this client, is the bottleneck beyond a few.
MAX_PARALLEL = 8
#: Session settings while loading. Both are session-scoped, need no privilege and skip only
#: checks that cannot fail here (no unique secondary key, no foreign keys). sql_log_bin=0 is not
#: set: sysbench's rows reach the binary log, and a replica would otherwise miss them.
LOAD_SESSION = ("SET SESSION unique_checks = 0", "SET SESSION foreign_key_checks = 0")
#: MySQL error codes meaning "LOAD DATA LOCAL INFILE is refused" (server local_infile=OFF:
#: 1148 in MySQL, 4166 in MariaDB; 2068: the client library refused the file).
INFILE_REFUSED = frozenset({1148, 4166, 2068})
#: byte -> ASCII digit, and the bytes dropped so that every digit is equally likely (250 = 25 x 10).
_DIGIT = bytes(48 + b % 10 for b in range(256))
_BIASED = bytes(range(250, 256))
#: c is 10 groups of 11 digits, pad 5 groups (sysbench's "###########-..." templates).
_C = "-".join(["D" * 11] * 10)
_PAD = "-".join(["D" * 11] * 5)
#: The 2010 scripts' rows: c a single space, pad this string.
PAD_05 = "qqqqqqqqqqwwwwwwwwwweeeeeeeeeerrrrrrrrrrtttttttttt"
#: MAX_ROWS of the 2010 tables: the seed pages' --myisam-max-rows (sysbench 0.5's default of
#: 1,000,000 would make a MyISAM table of 20M rows full), or the table size when larger.
MAX_ROWS_05 = 50_000_000


def _quote(name: str) -> str:
    # Names come from validated spec identifiers; refusing anything else keeps it so even if a
    # caller builds params by hand.
    if not re.fullmatch(IDENT_PATTERN, name):
        raise ValueError(f"not a valid identifier: {name!r}")
    return f"`{name}`"


def _engine(name: str) -> str:
    # Written bare, as sysbench writes it; the spec's pattern is an identifier's, checked again.
    _quote(name)
    return name


def _table_sql(n: int, engine: str, auto_inc: bool = True, secondary: bool = False) -> str:
    # sysbench's --auto_inc=off leaves id a plain INTEGER NOT NULL; its prepare then inserts
    # the ids 1..table_size explicitly, as this one always does. --secondary=on puts id under
    # a plain index (KEY xid) instead of the PRIMARY KEY.
    return (
        f"CREATE TABLE `sbtest{n}` (\n"
        f"  id INTEGER NOT NULL{' AUTO_INCREMENT' if auto_inc else ''},\n"
        "  k INTEGER DEFAULT '0' NOT NULL,\n"
        "  c CHAR(120) DEFAULT '' NOT NULL,\n"
        "  pad CHAR(60) DEFAULT '' NOT NULL,\n"
        f"  {'KEY xid' if secondary else 'PRIMARY KEY'} (id)\n"
        f") ENGINE = {_engine(engine)}"
    )


def _table_sql_05(n: int, data: DataShape, auto_inc: bool = True) -> str:
    # sysbench/tests/db/*.lua prepare() of 2010, for MySQL; MAX_ROWS matters to MyISAM only.
    return (
        f"CREATE TABLE `sbtest{n}` (\n"
        f"  id INTEGER UNSIGNED NOT NULL{' AUTO_INCREMENT' if auto_inc else ''},\n"
        "  k INTEGER UNSIGNED DEFAULT '0' NOT NULL,\n"
        "  c CHAR(120) DEFAULT '' NOT NULL,\n"
        "  pad CHAR(60) DEFAULT '' NOT NULL,\n"
        "  PRIMARY KEY (id)\n"
        f") ENGINE = {_engine(data.engine)} MAX_ROWS = {max(MAX_ROWS_05, data.table_size)}"
    )


@dataclass(frozen=True)
class Indexes:
    """oltp_common.lua's index options: ``secondary`` puts id under KEY xid instead of the
    PRIMARY KEY, ``create_secondary`` False leaves k without its index k_N."""

    secondary: bool = False
    create_secondary: bool = True


def marker(data: DataShape, auto_inc: bool, layout: TableLayout = SYSBENCH_10, indexes: Indexes = Indexes()) -> str:
    """The shape marker stored beside prepared tables: the data shape, auto_inc, the indexes and,
    for the 2010 layouts, which one (sysbench 1.0's tables keep the markers they always had)."""
    return data.marker(auto_inc, indexes.secondary, indexes.create_secondary) + (
        f":{layout.marker}" if layout.marker else "")


def _check_engine(cur: Any, engine: str) -> None:
    """DbError naming data.engine when the server has no usable engine of that name: a server
    asked for an engine it lacks may substitute its default (sql_mode without
    NO_ENGINE_SUBSTITUTION), which would measure another engine than the spec says."""
    cur.execute("SELECT ENGINE, SUPPORT FROM information_schema.ENGINES")
    engines = {str(e): str(s) for e, s in cur.fetchall()}
    usable = sorted(e for e, s in engines.items() if s.upper() in ("YES", "DEFAULT"))
    if not any(e.lower() == engine.lower() for e in usable):
        raise DbError(1286, f"data.engine: the target's server has no storage engine {engine} "
                            f"(its engines: {', '.join(usable)})")


def _recorded(cur: Any) -> dict[str, str]:
    cur.execute(f"SELECT table_name, shape_marker FROM `{SHAPE_TABLE}`")
    return {str(t): str(m) for t, m in cur.fetchall()}


def _existing(cur: Any, database: str) -> set[str]:
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (database,))
    return {str(r[0]) for r in cur.fetchall()}


def auto_inc_of(workload: WorkloadSpec) -> bool | None:
    """The auto_inc a workload needs its tables prepared with, or None when it does not care
    (the select_random_* tests only read and have no auto_inc option)."""
    known = workload.registered
    if known is not None and not known.table_auto_inc:
        return None
    return bool(workload.option("auto_inc"))


def indexes_of(workload: WorkloadSpec) -> Indexes:
    """The indexes a workload's tables are prepared with (its secondary and create_secondary
    options; a script's, as oltp_common.lua reads them)."""
    known = workload.registered
    if known is not None and "secondary" not in known.options:
        return Indexes()
    return Indexes(bool(workload.option("secondary")), bool(workload.option("create_secondary")))


def ensure_workload_tables(params: ConnectParams, data: DataShape, workload: WorkloadSpec) -> bool:
    """The tables ``workload`` runs on, prepared unless already there (see ensure_tables); a
    script runs on sysbench 1.0's tables (oltp_common.lua's)."""
    known = workload.registered
    return ensure_tables(params, data, auto_inc=auto_inc_of(workload),
                         layout=SYSBENCH_10 if known is None else known.tables, indexes=indexes_of(workload))


#: Seconds a part of a run split over load hosts waits for another part's prepare of the same
#: database (the tables of a big data set take minutes to load).
PREPARE_LOCK_TIMEOUT_S = 3600


@contextlib.contextmanager
def prepare_lock(params: ConnectParams, timeout_s: float = PREPARE_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the target server's named lock on the run's database while preparing: the parts of
    one run (spec load_hosts) prepare on the same server at once, so one loads the tables and
    the others find them ready. DbError when it cannot be had within ``timeout_s``."""
    name = f"benchfleet_prepare.{params.database}"[:64]
    try:
        conn = connect(params, database=False)
    except mysql.connector.Error as e:
        raise DbError(e.errno or 0, e.msg) from None
    try:
        cur = conn.cursor()
        cur.execute("SELECT GET_LOCK(%s, %s)", (name, int(timeout_s)))
        if (cur.fetchone() or (None,))[0] != 1:
            raise DbError(0, f"another load host held the prepare lock {name!r} for {timeout_s:.0f} s")
        try:
            yield
        finally:
            cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
            cur.fetchall()
    except mysql.connector.Error as e:
        raise DbError(e.errno or 0, e.msg) from None
    finally:
        conn.close()


def ensure_tables(params: ConnectParams, data: DataShape, seed: int = 0, auto_inc: bool | None = True,
                  layout: TableLayout = SYSBENCH_10, indexes: Indexes = Indexes()) -> bool:
    """Create the database and sbtest1..N for ``data`` unless tables of that exact shape and
    ``layout`` are already there (a fresh layout is built every time); return True if it
    (re)created them. ``auto_inc`` is sysbench's option of that name (False: id is not
    AUTO_INCREMENT); None takes tables prepared either way and prepares missing ones with
    sysbench's default (True). DbError when the server refuses."""
    try:
        return _ensure_tables(params, data, seed, auto_inc, layout, indexes)
    except mysql.connector.Error as e:
        raise DbError(e.errno or 0, e.msg) from None


def _ensure_tables(params: ConnectParams, data: DataShape, seed: int, auto_inc: bool | None,
                   layout: TableLayout, indexes: Indexes) -> bool:
    database = params.database
    conn = connect(params, database=False)
    try:
        cur = conn.cursor()
        _check_engine(cur, data.engine)
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {_quote(database)}")
        cur.execute(f"USE {_quote(database)}")
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS `{SHAPE_TABLE}` (table_name VARCHAR(64) NOT NULL PRIMARY KEY, "
            "shape_marker VARCHAR(128) NOT NULL, row_count BIGINT NOT NULL, "
            "prepared_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        wanted = [f"sbtest{n}" for n in range(1, data.tables + 1)]
        recorded, existing = _recorded(cur), _existing(cur, database)
        accepted = {marker(data, a, layout, indexes) for a in ((True, False) if auto_inc is None else (auto_inc,))}
        if not layout.fresh and any(all(recorded.get(t) == m and t in existing for t in wanted) for m in accepted):
            return False
        auto_inc = True if auto_inc is None else auto_inc
        # Forget the old shape before touching any table, so a prepare that dies half way is
        # redone next time instead of being taken for a finished one.
        stale = sorted(set(recorded) - set(wanted))
        cur.execute(f"DELETE FROM `{SHAPE_TABLE}`")
        for t in stale:
            cur.execute(f"DROP TABLE IF EXISTS {_quote(t)}")
    finally:
        conn.close()
    with _infile_dir() as infiles, ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, data.tables)) as pool:
        # list() re-raises the first failure of any table here.
        list(pool.map(lambda n: _load_table(params, data, n, seed, auto_inc, infiles, layout, indexes),
                      range(1, data.tables + 1)))
    return True


@contextlib.contextmanager
def _infile_dir() -> Iterator[str]:
    """A private directory (in /dev/shm when there is one, so the files never reach a disk)
    holding this prepare's LOAD DATA files, removed afterwards. The loading connections may
    send only files from it: a server asking for any other file (a rogue target can ask for
    one in answer to any statement) is refused by the client library."""
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    path = tempfile.mkdtemp(prefix="benchfleet-load-", dir=shm)
    try:
        yield os.path.realpath(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _load_table(params: ConnectParams, data: DataShape, n: int, seed: int, auto_inc: bool, infiles: str,
                layout: TableLayout = SYSBENCH_10, indexes: Indexes = Indexes()) -> None:
    gen = rng_for(seed, n)
    old = layout.schema == "0.5"
    make = rows_05 if old else rows
    conn = connect(params, allow_local_infile=False, allow_local_infile_in_path=infiles)
    try:
        cur = conn.cursor()
        for sql in LOAD_SESSION:
            cur.execute(sql)
        cur.execute(f"DROP TABLE IF EXISTS `sbtest{n}`")
        cur.execute(_table_sql_05(n, data, auto_inc) if old else
                    _table_sql(n, data.engine, auto_inc, indexes.secondary))
        size = 0 if layout.k is None else data.table_size
        # Autocommitted chunks: measured faster here than one transaction with InnoDB's
        # empty-table bulk load, which was 1.4-2x slower on MariaDB 10.11.
        done = _load_infile(cur, gen, n, size, infiles, layout) if size else 0
        if not done:
            gen = rng_for(seed, n)  # the INSERTs draw the table's rows from the start of its stream
        head = f"INSERT INTO `sbtest{n}` (id, k, c, pad) VALUES "
        for start in range(done, size, INSERT_ROWS):
            chunk = make(gen, start, min(INSERT_ROWS, size - start), size, "sql", layout)
            cur.execute(head + chunk[:-1].decode())
        if old:
            cur.execute(f"CREATE INDEX `k` ON `sbtest{n}` (k)")
        elif indexes.create_secondary:
            cur.execute(f"CREATE INDEX `k_{n}` ON `sbtest{n}` (k)")
        cur.execute(
            f"REPLACE INTO `{SHAPE_TABLE}` (table_name, shape_marker, row_count) VALUES (%s, %s, %s)",
            (f"sbtest{n}", marker(data, auto_inc, layout, indexes), size),
        )
    finally:
        conn.close()


def _load_infile(cur: Any, gen: np.random.Generator, n: int, size: int, directory: str,
                 layout: TableLayout = SYSBENCH_10) -> int:
    """Load sbtest``n`` with LOAD DATA LOCAL INFILE from a file in ``directory`` rewritten per
    chunk; return the rows loaded: ``size``, or 0 when the server or client refuses LOCAL INFILE
    and the caller must INSERT instead."""
    with tempfile.NamedTemporaryFile(prefix=f"sbtest{n}-", suffix=".tsv", dir=directory) as f:
        # The next chunk is generated while the server loads this one (the connector releases
        # the GIL while it waits), so the client's work overlaps the server's.
        with ThreadPoolExecutor(max_workers=1) as ahead:
            starts = list(range(0, size, LOAD_ROWS)) + [size]
            make = rows_05 if layout.schema == "0.5" else rows
            chunk = ahead.submit(make, gen, 0, starts[1], size, "tsv", layout)
            for start, end, after in zip(starts, starts[1:], starts[2:] + [size]):
                data = chunk.result()
                if end < size:
                    chunk = ahead.submit(make, gen, end, after - end, size, "tsv", layout)
                # Overwritten in place: the file keeps its pages instead of freeing and zeroing them.
                f.seek(0)
                f.write(data)
                f.truncate()
                f.flush()
                try:
                    # CHARACTER SET binary: the file is ASCII digits, so the server need not decode
                    # it as the database's character set (utf8mb4: about 10% of its CPU here).
                    cur.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE `sbtest{n}` CHARACTER SET binary "
                                "(id, k, c, pad)", (f.name,))
                except mysql.connector.Error as e:
                    if start == 0 and e.errno in INFILE_REFUSED:
                        return 0
                    raise
    return size


def _template(width: int, form: str) -> bytes:
    """One row with I for a digit of id, K for one of k and D for a random digit; ``form`` is
    "tsv" (a LOAD DATA line) or "sql" (a VALUES tuple and its comma)."""
    i, k = "I" * width, "K" * width
    if form == "tsv":
        return f"{i}\t{k}\t{_C}\t{_PAD}\n".encode()
    return f"({i},{k},'{_C}','{_PAD}'),".encode()


@functools.cache
def _layout(width: int, form: str) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """The template and its fixed characters as (column, byte), worked out once per shape."""
    tmpl = _template(width, form)
    return tmpl, tuple((j, ch) for j, ch in enumerate(tmpl) if ch not in b"DIK")


def rng_for(seed: int, table: int) -> np.random.Generator:
    """The random stream of one table: SFC64, which draws bytes about 3x faster than random's
    Mersenne Twister, seeded from the run seed and the table number so a prepare repeats."""
    digest = hashlib.sha256(f"{seed}:sbtest{table}".encode()).digest()
    return np.random.Generator(np.random.SFC64(int.from_bytes(digest[:16], "little")))


def rows(gen: np.random.Generator, start: int, count: int, size: int, form: str = "tsv",
         layout: TableLayout = SYSBENCH_10) -> bytearray:
    """Rows ``start`` + 1 .. ``start`` + ``count`` of sysbench's table of ``size`` rows: id,
    k from the 'special' distribution, c and pad groups of uniform random digits.

    ids are explicit because LOAD DATA reserves AUTO_INCREMENT values in growing blocks and
    leaves gaps after each statement, while the workloads draw ids from 1..table_size, as
    sysbench's auto-incremented prepare leaves them.

    Every row has the same width (id and k are zero-padded, which MariaDB reads as the same
    integers), so the batch is one (count x width) byte array: random digits everywhere, then
    each fixed character and each digit of id and k written down its column. Nothing is done
    per row in Python: on a small machine the client shares the CPUs with the server it loads.
    """
    width = len(str(size))
    tmpl, fixed = _layout(width, form)
    need = len(tmpl) * count
    buf = bytearray()
    while len(buf) < need:
        # Raw 64-bit words, each byte kept unless biased; 6.25% spare covers the 2.3% dropped,
        # so one draw nearly always does.
        raw = bytearray(gen.bit_generator.random_raw((need - len(buf)) // 8 + (need >> 7) + 8))
        if buf:
            buf += raw.translate(_DIGIT, _BIASED)
        else:
            buf = raw.translate(_DIGIT, _BIASED)
    del buf[need:]
    table = np.frombuffer(buf, dtype=np.uint8).reshape(count, len(tmpl))
    for j, ch in fixed:
        table[:, j] = ch
    # k is sb_rand(1, table_size), i.e. sysbench.rand.default at prepare time: 'special'
    # unless --rand-type was given to prepare, so k is skewed the same way here.
    _digits(table, tmpl.index(b"I"), width, np.arange(start + 1, start + count + 1, dtype=np.uint32))
    _digits(table, tmpl.index(b"K"), width, special_many(gen, 1, size, count).astype(np.uint32))
    return buf


def _digits(table: np.ndarray, col: int, width: int, values: np.ndarray) -> None:
    """Write ``values`` zero-padded to ``width`` digits into columns col.. of every row."""
    for j in range(width - 1, -1, -1):
        values, digit = np.divmod(values, 10)
        table[:, col + j] = digit
    table[:, col:col + width] += 48


def rows_05(gen: np.random.Generator | None, start: int, count: int, size: int, form: str = "tsv",
            layout: TableLayout = SYSBENCH_10) -> bytearray:
    """Rows ``start`` + 1 .. ``start`` + ``count`` as the 2010 scripts' prepare() inserted them:
    id, k = 0 (or k = id for the select_random_* layout), c a single space, pad PAD_05. Nothing is
    random (``gen`` is unused), so every 2010 table of a size is the same table."""
    width = len(str(size))
    i, k = "I" * width, "K" * width
    line = f"{i}\t{k}\t \t{PAD_05}\n" if form == "tsv" else f"({i},{k},' ','{PAD_05}'),"
    tmpl = line.encode()
    buf = bytearray(tmpl * count)
    table = np.frombuffer(buf, dtype=np.uint8).reshape(count, len(tmpl))
    ids = np.arange(start + 1, start + count + 1, dtype=np.uint32)
    _digits(table, tmpl.index(b"I"), width, ids)
    _digits(table, tmpl.index(b"K"), width, ids if layout.k == "id" else np.zeros(count, dtype=np.uint32))
    return buf


def special_many(gen: np.random.Generator, a: int, b: int, count: int, iters: int = SPEC_ITER,
                 pct: int = SPEC_PCT, res: int = SPEC_RES) -> np.ndarray:
    """``count`` draws of distributions.special (sysbench 1.0's default), vectorised: the same
    branches and arithmetic, one array operation each instead of a Python call per draw."""
    t = b - a
    rnd = gen.random(count)
    cold = rnd * t * (100.0 / (100.0 - res)) < t
    spread = gen.random((count, iters)).sum(axis=1)
    d = t * (pct / 100.0)
    hot = rnd * (d + 1) + t / 2 - t * (pct / 200.0)
    return a + np.where(cold, spread * t / iters, hot).astype(np.int64)


def cleanup(params: ConnectParams, data: DataShape) -> None:
    """Drop the sbtest tables of ``data`` (and any others recorded) and the shape record."""
    database = params.database
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
