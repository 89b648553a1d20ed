"""Campaign guards in the results DB: the duplicate-submission check and cancellation.

Kept apart from store.py (the results store every service shares) because only the scheduler
writes these; they use the Store's connection and its error handling.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.store import Store

#: States in which a campaign still has work to do; a spec-hash duplicate is only refused
#: against these (an explicit --idempotency-key is refused against any earlier campaign).
ACTIVE_STATES = ("submitted", "running")
#: A named lock serialising "is there a duplicate? then record" across concurrent submits.
SUBMIT_LOCK = "benchfleet.submit"
#: Seconds a submit waits for that lock before it is refused.
SUBMIT_LOCK_WAIT_S = 30


@dataclass(frozen=True)
class Duplicate:
    campaign_id: str
    state: str


def default_key(spec_hash: str) -> str:
    return f"spec:{spec_hash}"


def lock_submit(store: Store, timeout_s: int = SUBMIT_LOCK_WAIT_S) -> bool:
    return bool(store._rows("SELECT GET_LOCK(%s, %s)", (SUBMIT_LOCK, timeout_s))[0][0])


def unlock_submit(store: Store) -> None:
    store._rows("SELECT RELEASE_LOCK(%s)", (SUBMIT_LOCK,))


def find_duplicate(store: Store, key: str, explicit: bool) -> Duplicate | None:
    """The earlier campaign submitted with ``key``: any (explicit key) or an active one (spec hash)."""
    sql = "SELECT campaign_id, state FROM campaigns WHERE idempotency_key=%s"
    if not explicit:
        sql += " AND state IN ('submitted','running')"
    rows = store._rows(sql + " ORDER BY created_at DESC LIMIT 1", (key,))
    return Duplicate(rows[0][0], rows[0][1]) if rows else None


def set_key(store: Store, campaign_id: str, key: str | None) -> None:
    store._execute("UPDATE campaigns SET idempotency_key=%s WHERE campaign_id=%s", (key, campaign_id))


def cancel(store: Store, campaign_id: str, now: float) -> int:
    """Mark the campaign cancelled and its pending runs cancelled; returns how many pending
    runs were dropped. Running runs are left to their worker, which stores a partial,
    cancelled result. The idempotency key is released so the spec can be submitted again."""
    cur = store._execute(
        "UPDATE runs SET state='cancelled', error='campaign cancelled before the run started', updated_at=%s"
        " WHERE campaign_id=%s AND state='pending'",
        (now, campaign_id),
    )
    dropped = int(cur.rowcount or 0)
    store._execute("UPDATE campaigns SET state='cancelled', idempotency_key=NULL WHERE campaign_id=%s", (campaign_id,))
    return dropped


def is_cancelled(store: Store, campaign_id: str) -> bool:
    rows = store._rows("SELECT state FROM campaigns WHERE campaign_id=%s", (campaign_id,))
    return bool(rows) and rows[0][0] == "cancelled"
