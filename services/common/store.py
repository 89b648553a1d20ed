"""The results DB (MariaDB): campaigns and their plan, run states, and results keyed by run id.

The scheduler records campaigns and plans here; the collector stores results and run states;
reports and progress read it. Every write is idempotent, so redelivered messages are harmless,
and so is running a statement again on a new connection after the old one was lost. Store is
made of one part per kind of record (services/common/store_*.py, part_store.py); its errors are
told apart in store_connection.py.
"""

from __future__ import annotations

from services.common.part_store import PartStore
from services.common.store_transfer import CampaignTransfer
from services.common.store_workers import WorkerRecords


class Store(CampaignTransfer, WorkerRecords, PartStore):
    """A connection to the results DB with every kind of record it holds; not thread-safe (one
    per thread)."""
