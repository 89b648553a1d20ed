"""The results DB (MariaDB): campaigns and their plan, run states, and results keyed by run id.

The scheduler records campaigns and plans here; the collector stores results and run states;
reports and progress read it. Every write is idempotent, so redelivered messages are harmless,
and so is running a statement again on a new connection after the old one was lost. A Store is
one connection (store/connection.py, where its errors are told apart) and one part per kind of
record, each owning its SQL: ``store.campaigns``, ``store.runs``, ``store.results``,
``store.parts``, ``store.workers``, ``store.judgements`` (change points, gate verdicts) and
``store.transfer``.
"""

from __future__ import annotations

from typing import Self

from services.common.config import Settings
from services.common.store.campaigns import Campaigns
from services.common.store.judgements import Judgements
from services.common.store.connection import RETRY_ATTEMPTS, RETRY_BACKOFF_S, StoreConnection
from services.common.store.parts import Parts
from services.common.store.results import Results
from services.common.store.runs import Runs
from services.common.store.transfer import Transfer
from services.common.store.workers import Workers


class Store:
    """A connection to the results DB and its parts; not thread-safe (one per thread)."""

    def __init__(self, settings: Settings, *, attempts: int = RETRY_ATTEMPTS, backoff_s: float = RETRY_BACKOFF_S):
        #: The connection every part holds: ``rows``, ``execute`` and ``transaction`` for SQL of
        #: one's own (a test's, a benchmark's).
        self.db = StoreConnection(settings, attempts=attempts, backoff_s=backoff_s)
        self.campaigns = Campaigns(self.db)
        self.runs = Runs(self.db)
        self.results = Results(self.db, self.runs)
        self.parts = Parts(self.db)
        self.workers = Workers(self.db)
        self.judgements = Judgements(self.db)
        self.transfer = Transfer(self.db, self.campaigns, self.results)

    def open(self, migrate: bool = True) -> Self:
        """Connect, creating the database and applying migrations when asked."""
        self.db.open(migrate)
        return self

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        self.db.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reachable(self) -> bool:
        """Whether the results DB answers now (tells "DB away" from "DB refused this write")."""
        return self.db.reachable()

    def migrate(self) -> int:
        """Apply pending migrations in order; the schema version now in force."""
        return self.db.migrate()
