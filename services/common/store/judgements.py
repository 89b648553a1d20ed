"""What a spec's history found, kept for the history board: the change points the collector finds when
a campaign ends, and the verdict of each gate (``Store.judgements``). Tables of migration 25."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from services.common.errors import StoreError
from services.common.store.connection import StoreConnection

GateOutcome = Literal["passed", "failed", "unjudged"]


def outcome(judged: bool, slower_cells: int) -> GateOutcome:
    """The stored word for a gate's verdict: unjudged when there was nothing to judge against."""
    if not judged:
        return "unjudged"
    return "failed" if slower_cells else "passed"


@dataclass(frozen=True)
class StoredChangePoint:
    """One change in one series of a spec: the first campaign after it, its size and significance."""

    spec_name: str
    campaign_id: str
    target: str
    workload: str
    threads: int
    metric: str
    #: After / before (the segments' geometric means).
    ratio: float
    p_value: float
    q_value: float
    #: "worse", "better" or "differs".
    direction: str
    #: The ended campaign whose search found it, and when (the first time it was found).
    found_by: str
    found_at: float


@dataclass(frozen=True)
class GateRecord:
    """A gate's verdict on a campaign: against which campaign (None: its own baseline target, or none
    good to judge it against), by how much a cell had to be slower, and how many were."""

    campaign_id: str
    against_campaign: str | None
    verdict: GateOutcome
    beyond: float
    slower_cells: int
    judged_at: float
    judged_by: str = ""


class Judgements:
    """Change points and gate verdicts (``Store.judgements``)."""

    def __init__(self, db: StoreConnection):
        self.db = db

    def record_change_points(self, found: Sequence[StoredChangePoint]) -> None:
        """Keep each change point; one found again keeps when it was first found and takes the newer
        size and significance (the collector may INSERT and UPDATE, not DELETE)."""
        if not found:
            return
        self.db.transaction("cannot record change points", lambda cur: cur.executemany(
            "INSERT INTO change_points (spec_name, campaign_id, target, workload, threads, metric, ratio, p_value,"
            " q_value, direction, found_at, found_by) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON DUPLICATE KEY UPDATE ratio=VALUES(ratio), p_value=VALUES(p_value), q_value=VALUES(q_value),"
            " direction=VALUES(direction)",
            [(c.spec_name, c.campaign_id, c.target, c.workload, c.threads, c.metric, c.ratio, c.p_value, c.q_value,
              c.direction, c.found_at, c.found_by) for c in found]))

    def change_points(self, spec_name: str) -> list[StoredChangePoint]:
        """The spec's stored change points, oldest found first."""
        rows = self.db.rows(
            "SELECT spec_name, campaign_id, target, workload, threads, metric, ratio, p_value, q_value, direction,"
            " found_by, found_at FROM change_points WHERE spec_name=%s"
            " ORDER BY found_at, campaign_id, target, workload, threads, metric", (spec_name,))
        return [StoredChangePoint(s, c, t, w, int(n), m, float(r), float(p), float(q), d, by, float(at))
                for s, c, t, w, n, m, r, p, q, d, by, at in rows]

    def record_gate(self, verdict: GateRecord) -> None:
        """Record a gate's verdict on the caller's campaign, through the procedure a submitter may call
        (the row names the caller, whatever ``judged_by`` says)."""
        def call(cur: Any) -> None:
            cur.execute("CALL bf_record_gate_verdict(%s,%s,%s,%s,%s,%s)",
                        (verdict.campaign_id, verdict.against_campaign, verdict.verdict, verdict.beyond,
                         verdict.slower_cells, verdict.judged_at))

        self.db.transaction(f"cannot record the gate's verdict on campaign {verdict.campaign_id}", call)

    def keep_gate(self, verdict: GateRecord, warn: Callable[[str], None]) -> None:
        """record_gate, for a gate whose verdict stands whether or not it is recorded: ``warn`` says
        why the results DB would not keep it (a DB whose procedures predate it, another's campaign)."""
        try:
            self.record_gate(verdict)
        except StoreError as e:
            warn(f"the gate's verdict on {verdict.campaign_id} stands but was not recorded in the results DB: {e}")

    def gate_verdicts(self, campaign_id: str) -> list[GateRecord]:
        """Every verdict on ``campaign_id``, oldest first."""
        rows = self.db.rows(
            "SELECT campaign_id, against_campaign, verdict, beyond, slower_cells, judged_at, judged_by"
            " FROM gate_verdicts WHERE campaign_id=%s ORDER BY judged_at, id", (campaign_id,))
        return [GateRecord(c, a, v, float(b), int(n), float(at), by) for c, a, v, b, n, at, by in rows]

