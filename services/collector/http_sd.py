"""The fleet's workers for Prometheus HTTP service discovery (``http_sd_configs``): the newest
announcement of each worker, as the target groups Prometheus reads from ``/sd/workers``.

Workers announce themselves on the results queue (messages.WorkerAnnouncement); the collector
keeps each one in the results DB (so a restarted collector lists the fleet at once) and here.
A worker that died without withdrawing stays listed, so Prometheus sees it down and
BenchfleetWorkerDown fires, as with file discovery, until its announcement is older than the
TTL (announce_ttl_s; running workers announce every ANNOUNCE_EVERY_S): then it is dropped, so a
host taken out of the fleet, or a worker started without --id and gone, does not page for ever.
Pure apart from a lock: the HTTP thread reads while the consumer thread updates.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from services.common.messages.announcements import WorkerAnnouncement

#: Where the collector serves the list, beside /metrics.
SD_PATH = "/sd/workers"


@dataclass(frozen=True)
class TargetGroup:
    """One entry of Prometheus' HTTP SD format: targets and the labels they get."""

    targets: tuple[str, ...]
    worker: str
    pool: str

    def to_json(self) -> dict[str, object]:
        return {"targets": list(self.targets), "labels": {"worker": self.worker, "pool": self.pool}}


class WorkerDirectory:
    """Each worker's newest announcement, by worker id."""

    def __init__(self, announcements: Iterable[WorkerAnnouncement] = (), *, ttl_s: float = 0.0,
                 clock: Callable[[], float] = time.time) -> None:
        #: Seconds after which an announcement not refreshed is not listed (0: never).
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._by_worker: dict[str, WorkerAnnouncement] = {}
        for a in announcements:
            self.update(a)

    def update(self, a: WorkerAnnouncement) -> bool:
        """Take ``a`` unless an announcement of the same worker made later is already known
        (messages of one worker may arrive out of order after a reconnect); True when taken and
        it says something new (state, address or pool: not a periodic refresh)."""
        with self._lock:
            known = self._by_worker.get(a.worker)
            if known is not None and known.at > a.at:
                return False
            self._by_worker[a.worker] = a
            return known is None or (known.state, known.address, known.pool) != (a.state, a.address, a.pool)

    def groups(self) -> list[TargetGroup]:
        """The workers that are up and announced within the TTL, one group each, by worker id."""
        oldest = self.clock() - self.ttl_s if self.ttl_s > 0 else float("-inf")
        with self._lock:
            up = sorted((a for a in self._by_worker.values() if a.state == "up" and a.at >= oldest),
                        key=lambda a: a.worker)
        return [TargetGroup((a.address,), a.worker, a.pool) for a in up]

    def render(self) -> bytes:
        """The HTTP SD response body."""
        return json.dumps([g.to_json() for g in self.groups()]).encode()
