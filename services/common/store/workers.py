"""The results DB's record of workers: each host's announced server builds, and each worker's
newest endpoint announcement (for Prometheus service discovery)."""

from __future__ import annotations

from pydantic import ValidationError

from services.common import logs
from services.common.messages.announcements import WorkerAnnouncement, WorkerBuilds
from services.common.store.connection import StoreConnection

log = logs.get(__name__)


class Workers:
    """Worker builds and endpoints, the newest announcement kept (``Store.workers``)."""

    def __init__(self, db: StoreConnection):
        self.db = db

    def record_builds(self, msg: WorkerBuilds) -> None:
        """Keep ``msg`` as its host and pool's builds, unless a newer announcement is kept."""
        # Assignments run left to right: announced_at is compared before it is replaced.
        self.db.execute(
            "INSERT INTO worker_builds (host, pool, worker, announcement_json, announced_at) VALUES (%s,%s,%s,%s,%s)"
            " ON DUPLICATE KEY UPDATE"
            " worker=IF(VALUES(announced_at) >= announced_at, VALUES(worker), worker),"
            " announcement_json=IF(VALUES(announced_at) >= announced_at, VALUES(announcement_json), announcement_json),"
            " announced_at=GREATEST(announced_at, VALUES(announced_at))",
            (msg.host, msg.pool, msg.worker, msg.encode().decode(), msg.at),
        )

    def pool_builds(self, pool: str) -> list[WorkerBuilds]:
        """The last build announcement of every host of ``pool``, by host."""
        out = []
        for host, text in self.db.rows("SELECT host, announcement_json FROM worker_builds WHERE pool=%s ORDER BY host",
                                       (pool,)):
            try:
                out.append(WorkerBuilds.model_validate_json(text))
            except ValidationError as e:
                log.warning("worker_builds_undecodable", host=host, error=str(e).splitlines()[0])
        return out

    def record_announcement(self, a: WorkerAnnouncement) -> None:
        """Keep a worker's newest announcement; an older one arriving late changes nothing."""
        self.db.execute(
            "INSERT INTO worker_endpoints (worker, pool, address, state, announced_at) VALUES (%s, %s, %s, %s, %s)"
            " ON DUPLICATE KEY UPDATE"
            " pool=IF(VALUES(announced_at) >= announced_at, VALUES(pool), pool),"
            " address=IF(VALUES(announced_at) >= announced_at, VALUES(address), address),"
            " state=IF(VALUES(announced_at) >= announced_at, VALUES(state), state),"
            " announced_at=GREATEST(announced_at, VALUES(announced_at))",
            (a.worker, a.pool, a.address, a.state, a.at),
        )

    def announcements(self) -> list[WorkerAnnouncement]:
        """Every worker's newest announcement, by worker id."""
        return [WorkerAnnouncement(worker=w, pool=p, address=addr, state=st, at=float(at)) for w, p, addr, st, at in
                self.db.rows("SELECT worker, pool, address, state, announced_at FROM worker_endpoints ORDER BY worker")]
