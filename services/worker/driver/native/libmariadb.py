"""MariaDB Connector/C (libmariadb, the client library sysbench links) through ctypes, with its
non-blocking API, so one thread drives many connections.

Only the measurement loop uses this: a thread per connection pays for the GIL and a context
switch on every query, which on a small client machine costs more CPU per query than the
server's own work. Everything else (prepare, server checks) keeps mysql.connector.

Two handles on the same library: ``_lib`` holds the GIL for the calls that never wait
(the *_start/*_cont steps, freeing results), ``_blocking`` releases it for those that do
(connect, prepare), so other connections open in parallel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from typing import Any, Sequence

from services.common.errors import ClientLibraryError, DbError
from services.worker.target.connect_params import ConnectParams

#: libmariadb's wait flags returned by *_start/*_cont (mysql.h).
WAIT_READ, WAIT_WRITE, WAIT_EXCEPT, WAIT_TIMEOUT = 1, 2, 4, 8

_OPT_CONNECT_TIMEOUT = 0
_OPT_COMPRESS = 1
_OPT_LOCAL_INFILE = 8
_OPT_SSL_VERIFY_SERVER_CERT = 21
_OPT_NONBLOCK = 6000
#: MARIADB_OPT_RESTRICTED_AUTH (Connector/C 3.3+): the authentication plugins a connection may use.
_OPT_RESTRICTED_AUTH = 7026
#: The plugins allowed unless the operator allows clear text: none of them sends the password
#: as it is without TLS (mysql_clear_password and PAM's dialog do; a rogue server may ask for
#: either by an auth switch, which libmariadb otherwise accepts).
SAFE_AUTH = b"mysql_native_password,client_ed25519,caching_sha2_password,sha256_password,parsec"
# Kept alive for the library's copy at every connect.
_SAFE_AUTH_BUFFER = ctypes.create_string_buffer(SAFE_AUTH)
_TYPE_NULL, _TYPE_LONGLONG, _TYPE_DOUBLE, _TYPE_STRING = 6, 8, 5, 254

_P = ctypes.c_void_p
_NULL = type(None)
_INT_P = ctypes.POINTER(ctypes.c_int)




class Bind(ctypes.Structure):
    """MYSQL_BIND of MariaDB Connector/C 3.x (112 bytes on 64-bit; tests check the layout)."""

    _fields_ = [("length", _P), ("is_null", _P), ("buffer", _P), ("error", _P), ("row_ptr", _P),
                ("store_param_func", _P), ("fetch_result", _P), ("skip_result", _P),
                ("buffer_length", ctypes.c_ulong), ("offset", ctypes.c_ulong),
                ("length_value", ctypes.c_ulong), ("flags", ctypes.c_uint), ("pack_length", ctypes.c_uint),
                ("buffer_type", ctypes.c_int), ("error_value", ctypes.c_char), ("is_unsigned", ctypes.c_char),
                ("long_data_used", ctypes.c_char), ("is_null_value", ctypes.c_char), ("extension", _P)]


_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mysql_server_init": (ctypes.c_int, [ctypes.c_int, _P, _P]),
    "mysql_init": (_P, [_P]),
    "mysql_options": (ctypes.c_int, [_P, ctypes.c_int, _P]),
    "mysql_ssl_set": (ctypes.c_byte, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]),
    "mysql_real_connect": (_P, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.c_uint, ctypes.c_char_p, ctypes.c_ulong]),
    "mysql_close": (None, [_P]),
    "mysql_errno": (ctypes.c_uint, [_P]),
    "mysql_error": (ctypes.c_char_p, [_P]),
    "mysql_get_socket": (ctypes.c_int, [_P]),
    "mysql_real_query_start": (ctypes.c_int, [_INT_P, _P, ctypes.c_char_p, ctypes.c_ulong]),
    "mysql_real_query_cont": (ctypes.c_int, [_INT_P, _P, ctypes.c_int]),
    "mysql_field_count": (ctypes.c_uint, [_P]),
    "mysql_affected_rows": (ctypes.c_ulonglong, [_P]),
    "mysql_store_result_start": (ctypes.c_int, [ctypes.POINTER(_P), _P]),
    "mysql_store_result_cont": (ctypes.c_int, [ctypes.POINTER(_P), _P, ctypes.c_int]),
    "mysql_free_result": (None, [_P]),
    "mysql_stmt_init": (_P, [_P]),
    "mysql_stmt_prepare": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_ulong]),
    "mysql_stmt_param_count": (ctypes.c_ulong, [_P]),
    "mysql_stmt_field_count": (ctypes.c_uint, [_P]),
    "mysql_stmt_bind_param": (ctypes.c_byte, [_P, _P]),
    "mysql_stmt_execute": (ctypes.c_int, [_P]),
    "mysql_stmt_store_result": (ctypes.c_int, [_P]),
    "mysql_real_query": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_ulong]),
    "mysql_store_result": (_P, [_P]),
    "mysql_stmt_execute_start": (ctypes.c_int, [_INT_P, _P]),
    "mysql_stmt_execute_cont": (ctypes.c_int, [_INT_P, _P, ctypes.c_int]),
    "mysql_stmt_store_result_start": (ctypes.c_int, [_INT_P, _P]),
    "mysql_stmt_store_result_cont": (ctypes.c_int, [_INT_P, _P, ctypes.c_int]),
    "mysql_stmt_free_result": (ctypes.c_byte, [_P]),
    "mysql_stmt_affected_rows": (ctypes.c_ulonglong, [_P]),
    "mysql_stmt_close": (ctypes.c_byte, [_P]),
    "mysql_stmt_errno": (ctypes.c_uint, [_P]),
    "mysql_stmt_error": (ctypes.c_char_p, [_P]),
}

#: The per-query calls, also bound without argtypes (see hot()).
_HOT = ("mysql_stmt_execute_start", "mysql_stmt_execute_cont", "mysql_stmt_store_result_start",
        "mysql_stmt_store_result_cont", "mysql_stmt_free_result", "mysql_stmt_affected_rows")

#: The per-statement calls that wait for the server, bound without argtypes on a handle that
#: lets go of the GIL (see hot_blocking()).
_HOT_BLOCKING = ("mysql_stmt_execute", "mysql_stmt_store_result")

_libs: tuple[Any, Any, Any, Any] | None = None


def _load() -> tuple[Any, Any, Any, Any]:
    """(GIL-holding, GIL-releasing, hot, hot blocking) handles on libmariadb, loaded and
    initialised once."""
    global _libs
    if _libs is None:
        path = ctypes.util.find_library("mariadb") or "libmariadb.so.3"
        try:
            fast, blocking, hot_ = ctypes.PyDLL(path), ctypes.CDLL(path), ctypes.PyDLL(path)
            hot_blocking_ = ctypes.CDLL(path)
        except OSError as e:
            raise ClientLibraryError(
                f"cannot load MariaDB Connector/C ({path}): {e}; install the Debian package libmariadb3 "
                "(deploy/ensure-services worker installs it)") from e
        for lib in (fast, blocking):
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
        for name in _HOT:
            getattr(hot_, name).restype = _SIGNATURES[name][0] if name.endswith("_rows") else ctypes.c_int
        for name in _HOT_BLOCKING:
            getattr(hot_blocking_, name).restype = ctypes.c_int
        # mysql_init would do this on first use, but it is not thread-safe, and connections
        # are opened from a thread pool.
        if fast.mysql_server_init(0, None, None):
            raise ClientLibraryError(f"cannot initialise MariaDB Connector/C ({path})")
        _libs = (fast, blocking, hot_, hot_blocking_)
    return _libs


def library() -> Any:
    """The GIL-holding handle, for the non-blocking calls of the measurement loop."""
    return _load()[0]


def hot() -> Any:
    """The per-query calls without argtypes: callers pass ctypes objects they made once
    (``Statement.ref``, a ``byref`` of the return slot), which ctypes hands over unconverted."""
    return _load()[2]


def blocking_library() -> Any:
    """The GIL-releasing handle with signatures, for calls that wait (blocking connections)."""
    return _load()[1]


def hot_blocking() -> Any:
    """mysql_stmt_execute and mysql_stmt_store_result without argtypes, letting go of the GIL
    while they wait, for a connection opened with ``nonblocking=False``."""
    return _load()[3]


class Statement:
    """A server-side prepared statement whose parameters live in buffers bound once; ``set``
    writes new values into them (re-binding only when a value's type or size changes)."""

    __slots__ = ("handle", "ref", "nparams", "has_result", "int_cells", "_binds", "_cells", "_kinds")

    def __init__(self, handle: int, nparams: int, has_result: bool):
        self.handle = handle
        #: The handle as a ctypes object, for the hot calls.
        self.ref = ctypes.c_void_p(handle)
        self.nparams = nparams
        self.has_result = has_result
        #: When every parameter is bound as an integer: their cells, so the loop writes values
        #: straight in (most statements: ids and k).
        self.int_cells: list[Any] | None = None
        self._binds = (Bind * max(1, nparams))()
        self._cells: list[Any] = [None] * nparams
        self._kinds: list[Any] = [None] * nparams

    def set(self, values: Sequence[Any]) -> None:
        kinds, cells = self._kinds, self._cells
        rebind = False
        for i, v in enumerate(values):
            t = type(v)
            if t is int and kinds[i] is int:
                cells[i].value = v
            elif t is str and kinds[i] is str and len(b := v.encode()) <= cells[i][2]:
                cells[i][0].value = b
                cells[i][1].value = len(b)
            elif t is _NULL and kinds[i] is _NULL:
                pass  # still bound as NULL (insert's id with auto_inc)
            else:
                self._bind_one(i, v)
                rebind = True
        if rebind:
            if _load()[0].mysql_stmt_bind_param(self.handle, ctypes.addressof(self._binds)):
                raise DbError(0, f"cannot bind parameters of type {[type(v).__name__ for v in values]}")
            self.int_cells = list(cells) if all(k is int for k in kinds) else None

    def _bind_one(self, i: int, v: Any) -> None:
        b = self._binds[i]
        if v is None:
            self._kinds[i], self._cells[i] = _NULL, None
            b.buffer_type, b.buffer, b.is_null_value = _TYPE_NULL, None, b"\x01"
            return
        b.is_null_value = b"\x00"
        if isinstance(v, bool) or isinstance(v, int):
            cell = ctypes.c_longlong(int(v))
            self._kinds[i], self._cells[i] = int, cell
            b.buffer_type, b.buffer, b.buffer_length = _TYPE_LONGLONG, ctypes.addressof(cell), 8
            return
        if isinstance(v, float):
            cell = ctypes.c_double(v)
            self._kinds[i], self._cells[i] = float, cell
            b.buffer_type, b.buffer, b.buffer_length = _TYPE_DOUBLE, ctypes.addressof(cell), 8
            return
        data = v.encode() if isinstance(v, str) else bytes(v)
        capacity = max(256, 2 * len(data))
        buf, length = ctypes.create_string_buffer(data, capacity), ctypes.c_ulong(len(data))
        # str values are re-encoded into this buffer in place; its capacity bounds their size.
        self._kinds[i] = str if isinstance(v, str) else bytes
        self._cells[i] = (buf, length, capacity - 1)
        b.buffer_type, b.buffer, b.buffer_length = _TYPE_STRING, ctypes.addressof(buf), capacity
        b.length = ctypes.addressof(length)


@dataclass(frozen=True)
class ConnectArgs:
    """ConnectParams as mysql_real_connect and mysql_ssl_set take them (bytes, None for unset)."""

    host: bytes
    user: bytes
    password: bytes
    database: bytes | None
    port: int
    unix_socket: bytes | None
    #: Set only when TLS is wanted: the server's certificate is then verified against it.
    ssl_ca: bytes | None


def connect_args(params: ConnectParams) -> ConnectArgs:
    """libmariadb's form of ``params``; over a socket the host is "localhost", which is how
    the library is told to use it."""
    sock = params.unix_socket
    return ConnectArgs(
        host=("localhost" if sock else params.host or "127.0.0.1").encode(), user=params.user.encode(),
        password=params.password.encode(), database=params.database.encode() if params.database else None,
        port=params.port or 3306, unix_socket=sock.encode() if sock else None,
        ssl_ca=params.ssl_ca.encode() if params.ssl_ca and not params.ssl_disabled else None)


class Connection:
    """One connection, in non-blocking mode unless ``nonblocking`` is False, opened (blocking)."""

    def __init__(self, params: ConnectParams, connect_timeout: int = 10, *, nonblocking: bool = True,
                 compress: bool = False):
        args = connect_args(params)
        fast, blocking, *_ = _load()
        self._lib = fast
        m = fast.mysql_init(None)
        if not m:
            raise DbError(2008, "out of memory initialising a connection")
        self.handle = m
        if nonblocking:
            fast.mysql_options(m, _OPT_NONBLOCK, None)
        timeout = ctypes.c_uint(connect_timeout)
        fast.mysql_options(m, _OPT_CONNECT_TIMEOUT, ctypes.addressof(timeout))
        if compress:
            # The compressed protocol, if the server agrees (sysbench's --mysql-compression).
            fast.mysql_options(m, _OPT_COMPRESS, None)
        # Connector/C sends any file a server asks for by default; a rogue target could ask.
        no_infile = ctypes.c_uint(0)
        fast.mysql_options(m, _OPT_LOCAL_INFILE, ctypes.addressof(no_infile))
        if not params.allow_cleartext and fast.mysql_options(m, _OPT_RESTRICTED_AUTH, ctypes.addressof(_SAFE_AUTH_BUFFER)):
            self.close()
            raise DbError(2059, "this MariaDB Connector/C cannot restrict authentication plugins (3.3 and later "
                                "can), so it would send a password in clear text to a server asking for it; "
                                "the password is not sent")
        if args.ssl_ca is not None:
            fast.mysql_ssl_set(m, None, None, args.ssl_ca, None, None)
            verify = ctypes.c_char(b"\x01")
            fast.mysql_options(m, _OPT_SSL_VERIFY_SERVER_CERT, ctypes.addressof(verify))
        ok = blocking.mysql_real_connect(m, args.host, args.user, args.password, args.database, args.port,
                                         args.unix_socket, 0)
        if not ok:
            err = self.error()
            self.close()
            raise err
        self.fd: int = fast.mysql_get_socket(m)

    def error(self) -> DbError:
        return DbError(int(self._lib.mysql_errno(self.handle)),
                       (self._lib.mysql_error(self.handle) or b"").decode(errors="replace"))

    def prepare(self, sql: str) -> Statement:
        fast, blocking, *_ = _load()
        h = fast.mysql_stmt_init(self.handle)
        q = sql.encode()
        if blocking.mysql_stmt_prepare(h, q, len(q)):
            err = DbError(int(fast.mysql_stmt_errno(h)), (fast.mysql_stmt_error(h) or b"").decode(errors="replace"))
            fast.mysql_stmt_close(h)
            raise err
        return Statement(h, int(fast.mysql_stmt_param_count(h)), bool(fast.mysql_stmt_field_count(h)))

    def stmt_error(self, st: Statement) -> DbError:
        return DbError(int(self._lib.mysql_stmt_errno(st.handle)),
                       (self._lib.mysql_stmt_error(st.handle) or b"").decode(errors="replace"))

    def close(self) -> None:
        if self.handle:
            # mysql_close sends COM_QUIT; on a dead socket it fails quietly.
            _load()[1].mysql_close(self.handle)
            self.handle = None
