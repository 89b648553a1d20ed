"""How to reach one MySQL/MariaDB server: the one record targets build and drivers read.

Each client turns it into its own form once per connection or run (mysql.connector keyword
arguments in dsn.py, libmariadb's connect arguments in the native driver, sysbench's
``--mysql-*`` options and config file), never per query. The password stays out of its
``repr`` and ``str``, so a log line or an exception that shows the record never shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["ConnectParams"]


@dataclass(frozen=True)
class ConnectParams:
    """A connection to one server; None leaves the choice to the client (host and port unset
    with a socket, as a managed server is reached). It pickles, to reach the load processes."""

    host: str | None = None
    port: int | None = None
    unix_socket: str | None = None
    user: str = ""
    password: str = field(default="", repr=False)
    #: The schema the run's tables live in; "" connects without selecting one.
    database: str = ""
    #: tls: disabled (no TLS at all, not even opportunistic).
    ssl_disabled: bool = False
    #: The CA to check the server's certificate against (tls: verify).
    ssl_ca: str | None = None
    ssl_verify_cert: bool = False
    ssl_verify_identity: bool = False
    #: Whether a client may send the password in clear text when the server asks for it
    #: (mysql_clear_password, PAM's dialog): the worker operator's BENCHFLEET_TARGET_ALLOW_CLEARTEXT.
    allow_cleartext: bool = False

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"ConnectParams({shown}, password={'***' if self.password else ''!r})"

    __str__ = __repr__

    @property
    def where(self) -> str:
        """The server's address as an error message names it: the socket, else host:port."""
        return self.unix_socket or f"{self.host}:{self.port}"
