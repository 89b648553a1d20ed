"""What the workers of one run's parts need of the broker to meet at a barrier: a private queue
bound to the parts exchange under the run's id, and publishing there (services/common/bus/rabbitmq.py
has RabbitMQ's; ``StubPartsHub`` here is an in-memory one for unit tests, with links that can be
cut as a host is unplugged).

One PartsLink is one connection, used from one thread (the part session's own).
"""

from __future__ import annotations

import threading
from typing import Callable, Protocol

from services.common.errors import BusError


class PartsLink(Protocol):
    def open(self, run_id: str) -> None:
        """Connect and hear every signal published for ``run_id`` (own ones included); BusError
        when the broker or the parts exchange is not there."""
        ...

    def send(self, run_id: str, body: bytes) -> None:
        """Publish a signal to every part of ``run_id``; BusError when it cannot."""
        ...

    def receive(self, timeout_s: float) -> list[bytes]:
        """The signals that arrived, waiting up to ``timeout_s`` for the first; BusError when
        the connection is lost."""
        ...

    def close(self) -> None:
        """Close; never raises."""
        ...


#: Makes an unconnected PartsLink whose connection carries ``name``.
PartsFactory = Callable[[str], PartsLink]


class StubPartsHub:
    """The in-memory parts exchange every StubPartsLink made from it shares."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._links: list[StubPartsLink] = []
        self._cut: set[str] = set()
        #: Every signal published, in order (run id, body), for tests to look at.
        self.published: list[tuple[str, bytes]] = []

    def link(self, name: str = "stub") -> "StubPartsLink":
        return StubPartsLink(self, name)

    def cut(self, name: str) -> None:
        """Unplug the links named ``name``: what they send is lost, they hear nothing more."""
        with self._changed:
            self._cut.add(name)
            self._changed.notify_all()


    def restore(self, name: str) -> None:
        """Plug the links named ``name`` back in (new links of that name work again)."""
        with self._changed:
            self._cut.discard(name)
            self._changed.notify_all()


class StubPartsLink:
    def __init__(self, hub: StubPartsHub, name: str):
        self.hub, self.name = hub, name
        self.run_id: str | None = None
        self._inbox: list[bytes] = []

    def _check(self) -> None:
        if self.name in self.hub._cut:
            raise BusError(f"connection lost (stub parts link {self.name!r} was cut)")
        if self.run_id is None:
            raise BusError("not connected to the stub parts exchange")

    def open(self, run_id: str) -> None:
        with self.hub._changed:
            self.run_id = run_id
            self._check()
            self.hub._links.append(self)

    def send(self, run_id: str, body: bytes) -> None:
        with self.hub._changed:
            self._check()
            self.hub.published.append((run_id, body))
            for link in self.hub._links:
                if link.run_id == run_id and link.name not in self.hub._cut:
                    link._inbox.append(body)
            self.hub._changed.notify_all()

    def receive(self, timeout_s: float) -> list[bytes]:
        with self.hub._changed:
            self._check()
            if not self._inbox:
                self.hub._changed.wait(timeout_s)
                self._check()
            out, self._inbox = self._inbox, []
            return out

    def close(self) -> None:
        with self.hub._changed:
            if self in self.hub._links:
                self.hub._links.remove(self)
            self.run_id = None
