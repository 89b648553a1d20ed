"""Where a target password may be sent: the ``@HOST[:PORT]`` or ``@/SOCKET`` part of an entry of
the worker's password allow-list (secret_policy.py). Pure: no resolving, no connecting.

  @db1.example          host db1.example, port 3306 (MySQL's, and a spec's default)
  @db1.example:3307     that host and port
  @db1.example:*        that host, any port
  @[2001:db8::5]:3306   an IPv6 address (brackets when a port follows)
  @/run/mysqld/mysqld.sock   that unix socket

Socket paths compare with their links resolved (the worker resolves both sides, as its socket
directory check does). Host names compare case-insensitively and as written: a binding to ``db1.example`` does not
admit its address, nor ``localhost`` admit 127.0.0.1 (list both when a spec may use either).
An entry without ``@`` (the allow-list's form before bindings) admits this worker's loopback
only: ``localhost``, 127.0.0.0/8, ::1 and unix sockets.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from services.common.spec.targets import is_loopback

#: The port a binding without one admits (a spec's default port too).
DEFAULT_PORT = 3306
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
_SOCKET = re.compile(r"/[A-Za-z0-9_.+/-]{1,255}")


@dataclass(frozen=True)
class Where:
    """Where a target connects: a host and port, or a unix socket (which then wins)."""

    host: str
    port: int
    socket: str | None = None

    def __str__(self) -> str:
        if self.socket:
            return self.socket
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Destination:
    """One binding: a host and port (``port`` None: any), a socket, or (``loopback``) the
    worker's own machine, which is what an entry without a binding means."""

    host: str | None = None
    port: int | None = DEFAULT_PORT
    socket: str | None = None
    loopback: bool = False

    def admits(self, where: Where) -> bool:
        """Whether a password bound here may go to ``where``."""
        if self.loopback:
            return where.socket is not None or is_loopback(where.host)
        if where.socket is not None or self.socket is not None:
            return where.socket == self.socket
        return (self.host or "").lower() == _host_key(where.host) and self.port in (None, where.port)

    def same_host(self, where: Where) -> bool:
        """Whether ``where`` differs from this binding in its port alone."""
        return (not self.loopback and self.socket is None and where.socket is None
                and (self.host or "").lower() == _host_key(where.host))

    def __str__(self) -> str:
        if self.loopback:
            return "this worker's loopback (the entry names no host)"
        if self.socket is not None:
            return self.socket
        host = f"[{self.host}]" if ":" in (self.host or "") else self.host
        return f"{host}:{'*' if self.port is None else self.port}"


#: What an entry without ``@`` admits.
LOOPBACK = Destination(host=None, port=None, loopback=True)


def _host_key(host: str) -> str:
    """A host as bindings compare it: names lower-cased, IPv6 addresses in their short form."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def parse(text: str) -> Destination:
    """The destination an entry's ``@`` part names; ValueError saying what is wrong."""
    if text.startswith("/"):
        if not _SOCKET.fullmatch(text):
            raise ValueError(f"{text!r} is not a socket path (letters, digits and _.+/- only)")
        return Destination(host=None, port=None, socket=text)
    port_text: str | None = None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r}: an IPv6 address is written [ADDRESS] or [ADDRESS]:PORT")
        port_text = rest[1:] if rest else None
        _address(host, text)
    elif text.count(":") > 1:
        host = text
        _address(host, text)
    else:
        host, sep, port_text_ = text.partition(":")
        port_text = port_text_ if sep else None
        if not _HOST.fullmatch(host):
            raise ValueError(f"{text!r}: {host!r} is not a host name or address")
    if port_text is None:
        port: int | None = DEFAULT_PORT
    elif port_text == "*":
        port = None
    elif port_text.isdigit() and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise ValueError(f"{text!r}: the port must be 1..65535 or *")
    return Destination(host=_host_key(host), port=port)


def _address(host: str, text: str) -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
