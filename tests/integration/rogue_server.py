"""A rogue MySQL server for tests: it accepts any login, and answers every query with a LOAD DATA
LOCAL request for a file of its choosing (the 0xFB packet), recording whatever the client sends
back. A client that honours the request hands the server a file of the worker's. With
``clear_text`` it first asks the client to switch to mysql_clear_password (an auth switch
request) and records what the client answers: a client that complies sends the password as it is."""

from __future__ import annotations

import socket
import struct
import threading

#: Capabilities offered: protocol 4.1, secure connection, plugin auth, transactions, LOCAL FILES.
_CAPS = 0x0001 | 0x0004 | 0x0008 | 0x0080 | 0x0200 | 0x2000 | 0x8000 | 0x80000
_OK = b"\x00\x00\x00\x02\x00\x00\x00"
COM_QUIT, COM_QUERY, COM_STMT_PREPARE = 0x01, 0x03, 0x16


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload


def _read(conn: socket.socket) -> tuple[int, bytes] | None:
    head = conn.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return None
    size = head[0] | head[1] << 8 | head[2] << 16
    body = conn.recv(size, socket.MSG_WAITALL) if size else b""
    return (head[3], body) if len(body) == size else None


class RogueServer:
    """Listens on ``host`` (a free port); ``received`` holds the bytes of every file a client sent,
    ``passwords`` every clear-text answer, ``connections`` counts the clients that came."""

    def __init__(self, wanted: str = "/etc/hostname", *, host: str = "127.0.0.1", clear_text: bool = False):
        self.wanted = wanted
        self.clear_text = clear_text
        self.received: list[bytes] = []
        self.passwords: list[bytes] = []
        self.requests = 0
        self.connections = 0
        self._sock = socket.create_server((host, 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            salt = b"abcdefghijklmnopqrst"
            conn.sendall(_packet(0, bytes([10]) + b"5.5.5-10.11.6-MariaDB\0" + struct.pack("<I", 7) + salt[:8] + b"\0"
                                 + struct.pack("<HBHH", _CAPS & 0xFFFF, 33, 2, _CAPS >> 16) + bytes([21]) + b"\0" * 10
                                 + salt[8:] + b"\0mysql_native_password\0"))
            got = _read(conn)
            if got is None:
                return
            if self.clear_text:
                conn.sendall(_packet(got[0] + 1, b"\xfe" + b"mysql_clear_password\0"))
                got = _read(conn)
                if got is None:  # the client refused to switch
                    return
                self.passwords.append(got[1])
            conn.sendall(_packet(got[0] + 1, _OK))
            while (got := _read(conn)) is not None and got[1][:1] and got[1][0] != COM_QUIT:
                command = got[1][0]
                if command == COM_STMT_PREPARE:
                    # "not supported in the prepared statement protocol": clients fall back to plain queries.
                    conn.sendall(_packet(1, b"\xff" + struct.pack("<H", 1295) + b"#HY000not supported"))
                elif command == COM_QUERY:
                    self.requests += 1
                    conn.sendall(_packet(1, b"\xfb" + self.wanted.encode()))
                    data, seq = b"", 1
                    while (part := _read(conn)) is not None and part[1]:
                        seq, data = part[0], data + part[1]
                    if part is None:
                        return
                    if data:
                        self.received.append(data)
                    conn.sendall(_packet(part[0] + 1, _OK))
                else:
                    conn.sendall(_packet(1, _OK))
