"""The results DB's campaign records: a campaign and its planned runs recorded, its state, and
the scheduler's guards on submitting (the submit lock, the idempotency key) and cancelling."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Sequence

from services.common.messages.runs import RunSpec
from services.common.results.rows import CampaignNight
from services.common.spec.campaign import CampaignSpec
from services.common.spec.stored import read_stored_spec
from services.common.errors import NotYourCampaign, StoreError
from services.common.store.connection import DENIED, StoreConnection
from services.common.store.procedures import REFUSED_ERRNO

#: States in which a campaign still has work to do; a spec-hash duplicate is only refused
#: against these (an explicit --idempotency-key is refused against any earlier campaign).
ACTIVE_STATES = ("submitted", "running")
#: A named lock serialising "is there a duplicate? then record" across concurrent submits.
SUBMIT_LOCK = "benchfleet.submit"
#: Seconds a submit waits for that lock before it is refused.
SUBMIT_LOCK_WAIT_S = 30
#: MySQL error for a CALL of a procedure the database does not have.
ER_SP_DOES_NOT_EXIST = 1305
#: Planned runs per call of bf_add_runs: about 200 kB of JSON, well inside max_allowed_packet.
RUNS_PER_CALL = 2000


@dataclass(frozen=True)
class CampaignRow:
    campaign_id: str
    name: str
    spec: CampaignSpec
    baseline: str
    total_runs: int
    state: str
    created_at: float


@dataclass(frozen=True)
class Duplicate:
    """An earlier campaign submitted with the same idempotency key."""

    campaign_id: str
    state: str


def spec_hash(spec: CampaignSpec) -> str:
    """A stable hash of a spec's meaning (not its YAML formatting)."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def default_key(spec_hash: str) -> str:
    return f"spec:{spec_hash}"


class Campaigns:
    """Campaigns, their planned runs as recorded, and their state (``Store.campaigns``)."""

    def __init__(self, db: StoreConnection):
        self.db = db

    def record(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], now: float | None = None,
               publisher: str | None = None, key: str | None = None) -> None:
        """Record a campaign as the caller's, with its planned runs (state pending) and idempotency
        key (None: no key), in one transaction, through the procedures a submitter may call
        (store/procedures.py); ``publisher`` is the broker user that publishes its runs
        (store/takers.py trusts the dead letters it sent)."""
        now = now if now is not None else time.time()
        planned = [[r.run_id, r.seq, r.cell.target, r.cell.workload, r.cell.threads, r.repetition] for r in runs]

        def insert(cur: Any) -> None:
            cur.execute("CALL bf_record_campaign(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        (campaign_id, spec.name, spec.model_dump_json(), spec_hash(spec), spec.pool,
                         spec.baseline_name, len(runs), now, publisher, key))
            for first in range(0, len(planned), RUNS_PER_CALL):
                cur.execute("CALL bf_add_runs(%s,%s,%s)",
                            (campaign_id, json.dumps(planned[first:first + RUNS_PER_CALL]), now))

        try:
            self.db.transaction(f"cannot record campaign {campaign_id}", insert)
        except StoreError as e:
            if e.errno != ER_SP_DOES_NOT_EXIST:
                raise
            raise StoreError(f"{e}: the results DB {self.db.settings.db_name} lacks the procedures submitters "
                             "write through; run deploy/ensure-services mariadb (it makes them)", errno=e.errno) from None

    def set_state(self, campaign_id: str, state: str) -> None:
        self.db.execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s", (state, campaign_id))

    def delete(self, campaign_id: str) -> None:
        """Take back out a campaign of the caller's whose runs could not be published (none of them
        began), so nothing half-done remains."""
        self.db.transaction(f"cannot withdraw campaign {campaign_id}",
                            lambda cur: cur.execute("CALL bf_withdraw_campaign(%s)", (campaign_id,)))

    def get(self, ref: str) -> CampaignRow | None:
        """A campaign by id, or the latest one of that name."""
        rows = self.db.rows(
            "SELECT campaign_id, name, spec_json, baseline, total_runs, state, created_at FROM campaigns"
            " WHERE campaign_id=%s OR name=%s ORDER BY (campaign_id=%s) DESC, created_at DESC LIMIT 1",
            (ref, ref, ref),
        )
        if not rows:
            return None
        cid, name, spec_json, baseline, total, state, created = rows[0]
        # Leniently: a campaign recorded by an earlier spec model stays readable (stored_spec).
        return CampaignRow(cid, name, read_stored_spec(spec_json, cid), baseline, int(total), state, float(created))

    def specs(self, campaign_ids: Sequence[str]) -> dict[str, CampaignSpec]:
        """The recorded specs of these campaigns, by id, in one query (a campaign not in the DB is absent)."""
        ids = list(dict.fromkeys(campaign_ids))
        if not ids:
            return {}
        rows = self.db.rows("SELECT campaign_id, spec_json FROM campaigns WHERE campaign_id IN ("
                            + ",".join(["%s"] * len(ids)) + ")", tuple(ids))
        return {cid: read_stored_spec(spec_json, cid) for cid, spec_json in rows}

    def named(self, name: str) -> list[CampaignNight]:
        """Every campaign of one name (a spec's nights), oldest first."""
        return [CampaignNight(r[0], float(r[1]), r[2]) for r in self.db.rows(
            "SELECT campaign_id, created_at, state FROM campaigns WHERE name=%s ORDER BY created_at, campaign_id",
            (name,))]

    def latest(self, limit: int = 20) -> list[CampaignRow]:
        """The ``limit`` newest campaigns, newest first."""
        ids = [r[0] for r in self.db.rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (limit,))]
        return [c for c in (self.get(i) for i in ids) if c is not None]

    # -- the scheduler's guards ---------------------------------------------------------------
    def lock_submit(self, timeout_s: int = SUBMIT_LOCK_WAIT_S) -> bool:
        """Take the lock that serialises submits; whether it was granted within ``timeout_s``."""
        return bool(self.db.rows("SELECT GET_LOCK(%s, %s)", (SUBMIT_LOCK, timeout_s))[0][0])

    def unlock_submit(self) -> None:
        self.db.rows("SELECT RELEASE_LOCK(%s)", (SUBMIT_LOCK,))

    def find_duplicate(self, key: str, explicit: bool) -> Duplicate | None:
        """The earlier campaign submitted with ``key``: any (explicit key) or an active one (spec hash)."""
        sql = "SELECT campaign_id, state FROM campaigns WHERE idempotency_key=%s"
        if not explicit:
            sql += " AND state IN (" + ",".join(f"'{s}'" for s in ACTIVE_STATES) + ")"
        rows = self.db.rows(sql + " ORDER BY created_at DESC LIMIT 1", (key,))
        return Duplicate(rows[0][0], rows[0][1]) if rows else None

    def cancel(self, campaign_id: str, now: float) -> int:
        """Mark the campaign cancelled and its pending runs cancelled; returns how many pending
        runs were dropped. Running runs are left to their worker, which stores a partial,
        cancelled result. The idempotency key is released so the spec can be submitted again.
        The caller's own campaign goes through bf_cancel_campaign; anyone else's only for a user
        whose grants allow the UPDATEs (an operator): NotYourCampaign for the others."""
        dropped: list[int] = []

        def own(cur: Any) -> None:
            cur.execute("CALL bf_cancel_campaign(%s, %s, @bf_dropped)", (campaign_id, now))
            cur.execute("SELECT @bf_dropped")
            dropped.append(int(cur.fetchall()[0][0] or 0))

        try:
            self.db.transaction(f"cannot cancel campaign {campaign_id}", own)
            return dropped[0]
        except StoreError as e:
            if e.errno != REFUSED_ERRNO:
                raise
            refusal = e
        try:
            return self._cancel_any(campaign_id, now)
        except StoreError as e:
            if e.errno not in DENIED:
                raise
            raise NotYourCampaign(f"campaign {campaign_id} " + str(refusal).split(f"{REFUSED_ERRNO} ", 1)[-1]) from None

    def _cancel_any(self, campaign_id: str, now: float) -> int:
        """Cancel any campaign (an operator's grants: UPDATE on runs and campaigns)."""
        counts: list[int] = []

        def update(cur: Any) -> None:
            cur.execute("UPDATE runs SET state='cancelled', error='campaign cancelled before the run started',"
                        " updated_at=%s WHERE campaign_id=%s AND state='pending'", (now, campaign_id))
            counts.append(int(cur.rowcount or 0))
            cur.execute("UPDATE campaigns SET state='cancelled', idempotency_key=NULL WHERE campaign_id=%s",
                        (campaign_id,))

        self.db.transaction(f"cannot cancel campaign {campaign_id}", update)
        return counts[0]

    def cancelled_since(self, created_after: float) -> list[str]:
        """Ids of the cancelled campaigns created after ``created_after``, oldest first."""
        rows = self.db.rows("SELECT campaign_id FROM campaigns WHERE state='cancelled' AND created_at > %s"
                            " ORDER BY created_at", (created_after,))
        return [r[0] for r in rows]

    def is_cancelled(self, campaign_id: str) -> bool:
        rows = self.db.rows("SELECT state FROM campaigns WHERE campaign_id=%s", (campaign_id,))
        return bool(rows) and rows[0][0] == "cancelled"
