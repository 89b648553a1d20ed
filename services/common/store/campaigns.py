"""The results DB's campaign records: a campaign and its planned runs, their states as workers
start and finish them, and the campaign's state that follows its runs'."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Sequence

from services.common.messages.events import RunEvent
from services.common.messages.runs import RunSpec
from services.common.spec.campaign import CampaignSpec
from services.common.store.connection import StoreConnection
from services.common.spec.stored import read_stored_spec

RUN_STATES = ("pending", "running", "done", "failed", "cancelled")
#: A run in one of these states has its final word; later "running" events must not undo it.
FINAL_STATES = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class CampaignRow:
    campaign_id: str
    name: str
    spec: CampaignSpec
    baseline: str
    total_runs: int
    state: str
    created_at: float


def spec_hash(spec: CampaignSpec) -> str:
    """A stable hash of a spec's meaning (not its YAML formatting)."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


class CampaignRecords(StoreConnection):
    """Campaigns, their runs and the states of both (a part of Store)."""

    def record_campaign(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], now: float | None = None) -> None:
        """Record a campaign and its planned runs (state pending) in one transaction."""
        now = now if now is not None else time.time()

        def insert(cur: Any) -> None:
            cur.execute(
                "INSERT INTO campaigns (campaign_id, name, spec_json, spec_hash, pool, baseline, total_runs, state, created_at)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,'submitted',%s)",
                (campaign_id, spec.name, spec.model_dump_json(), spec_hash(spec), spec.pool, spec.baseline_name, len(runs), now),
            )
            cur.executemany(
                "INSERT INTO runs (run_id, campaign_id, seq, target, workload, threads, repetition, state, updated_at)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,'pending',%s)",
                [(r.run_id, campaign_id, r.seq, r.cell.target, r.cell.workload, r.cell.threads, r.repetition, now) for r in runs],
            )

        self._transaction(f"cannot record campaign {campaign_id}", insert)

    def set_campaign_state(self, campaign_id: str, state: str) -> None:
        self._execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s", (state, campaign_id))

    def delete_campaign(self, campaign_id: str) -> None:
        """Remove a campaign that could not be published, so nothing half-done remains."""
        for table in ("cell_stats", "result_series", "results", "runs", "campaigns"):
            self._execute(f"DELETE FROM {table} WHERE campaign_id=%s", (campaign_id,))

    def campaign(self, ref: str) -> CampaignRow | None:
        """A campaign by id, or the latest one of that name."""
        rows = self._rows(
            "SELECT campaign_id, name, spec_json, baseline, total_runs, state, created_at FROM campaigns"
            " WHERE campaign_id=%s OR name=%s ORDER BY (campaign_id=%s) DESC, created_at DESC LIMIT 1",
            (ref, ref, ref),
        )
        if not rows:
            return None
        cid, name, spec_json, baseline, total, state, created = rows[0]
        # Leniently: a campaign recorded by an earlier spec model stays readable (stored_spec).
        return CampaignRow(cid, name, read_stored_spec(spec_json, cid), baseline, int(total), state, float(created))

    def campaigns(self, limit: int = 20) -> list[CampaignRow]:
        ids = [r[0] for r in self._rows("SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT %s", (limit,))]
        return [c for c in (self.campaign(i) for i in ids) if c is not None]

    # -- runs -------------------------------------------------------------------------------
    def mark_running(self, event: RunEvent) -> None:
        """Note that a worker started a run, unless the run already has its final state; or, for a
        "measuring" event, when its warm-up began. Both by the worker's clock: updated_at equals
        started_at until the measured part began, then holds that moment (run_finality reads it)."""
        if event.state == "measuring":
            self._execute(
                "UPDATE runs SET updated_at=GREATEST(%s, started_at + 0.001) WHERE run_id=%s AND state='running'"
                " AND started_at <= %s AND attempts <= %s",
                (event.at, event.run_id, event.at, event.attempt),
            )
            return
        self._execute(
            "UPDATE runs SET state='running', worker=%s, started_at=%s, attempts=GREATEST(attempts, %s), updated_at=%s"
            " WHERE run_id=%s AND state NOT IN ('done','failed','cancelled')",
            (event.worker, event.at, event.attempt, event.at, event.run_id),
        )

    def run_counts(self, campaign_id: str) -> dict[str, int]:
        counts = {s: 0 for s in RUN_STATES}
        for state, n in self._rows("SELECT state, COUNT(*) FROM runs WHERE campaign_id=%s GROUP BY state", (campaign_id,)):
            counts[state] = int(n)
        return counts

    def campaign_span(self, campaign_id: str) -> tuple[float | None, float | None]:
        """When the campaign's first run started and its last run ended (None before any did)."""
        (first, last), = self._rows("SELECT MIN(started_at), MAX(ended_at) FROM runs WHERE campaign_id=%s",
                                    (campaign_id,))
        return first, last

    def active_runs(self, campaign_id: str) -> list[tuple[str, str, int, int, str | None, float | None]]:
        """Runs in progress: (target, workload, threads, repetition, worker, started_at)."""
        return [
            (r[0], r[1], int(r[2]), int(r[3]), r[4], r[5])
            for r in self._rows(
                "SELECT target, workload, threads, repetition, worker, started_at FROM runs"
                " WHERE campaign_id=%s AND state='running' ORDER BY seq",
                (campaign_id,),
            )
        ]

    def _finish_campaign_if_done(self, campaign_id: str) -> None:
        counts = self.run_counts(campaign_id)
        if counts["pending"] == 0 and counts["running"] == 0 and sum(counts.values()) > 0:
            state = "finished" if counts["failed"] == 0 and counts["cancelled"] == 0 else "finished_with_failures"
            # A late result can turn a reaped run done again: the campaign's state follows it.
            self._execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s"
                          " AND state IN ('submitted','running','finished','finished_with_failures')",
                          (state, campaign_id))
        else:
            self._execute("UPDATE campaigns SET state='running' WHERE campaign_id=%s AND state='submitted'", (campaign_id,))
