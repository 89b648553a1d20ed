"""The results DB (MariaDB): campaigns and their plan, run states, and results keyed by run id.

The scheduler records campaigns and plans here; the collector stores results and run states;
reports and progress read it. Every write is idempotent, so redelivered messages are harmless,
and so is running a statement again on a new connection after the old one was lost. Store is
made of one part per kind of record (services/common/store/, store/parts.py); its errors are
told apart in store/connection.py.
"""

from __future__ import annotations

from services.common.store.parts import PartStore
from services.common.store.transfer import CampaignTransfer
from services.common.store.workers import WorkerRecords


class Store(CampaignTransfer, WorkerRecords, PartStore):
    """A connection to the results DB with every kind of record it holds; not thread-safe (one
    per thread)."""
