"""The results DB's run states: a run started and measuring, counted by state, failed with a reason
(its run spec or result was dead-lettered, or its worker vanished), overdue for a result, and the
campaign's state that follows its runs'. The deadlines themselves are in store/finality.py."""

from __future__ import annotations

import json
import time

from services.common import logs
from services.common.messages.events import RunEvent
from services.common.messages.runs import Cell
from services.common.errors import StoreError
from services.common.spec.campaign import CampaignSpec
from services.common.spec.stored import read_stored_spec
from services.common.store.connection import StoreConnection
from services.common.store.finality import FailedRun, OverdueRun, deadline, run_span, start_allowance
from services.common.store.takers import Binding, Claim, DeadLetterFrom, Taker, judge_claim, may_fail

log = logs.get(__name__)

RUN_STATES = ("pending", "running", "done", "failed", "cancelled")
#: A run in one of these states has its final word; later "running" events must not undo it.
FINAL_STATES = ("done", "failed", "cancelled")
#: The reason kept in runs.error (a TEXT column) is cut to this many characters.
MAX_REASON = 2000


class Runs:
    """The states of planned runs and what follows from them (``Store.runs``)."""

    def __init__(self, db: StoreConnection):
        self.db = db

    def binding(self, run_id: str, part: int | None = None) -> Binding | None:
        """Who took run ``run_id`` and with which attempt (store/takers.py), None for no such run. With
        ``part``, that part's binding when the run is split over load hosts and has such a part (else
        the run's own, on which a part's message is refused)."""
        rows = self.db.rows(
            "SELECT r.taker_user, r.taker_worker, r.taker_attempt, r.state,"
            " COALESCE(JSON_VALUE(c.spec_json, '$.load_hosts'), 1), c.publisher, r.started_at"
            " FROM runs r JOIN campaigns c ON c.campaign_id = r.campaign_id WHERE r.run_id=%s", (run_id,))
        if not rows:
            return None
        user, worker, attempt, state, hosts, publisher, started_at = rows[0]
        if int(hosts) <= 1:
            taker = None if user is None else Taker(str(user), str(worker or ""))
            return Binding(taker, int(attempt or 0), False, str(state), publisher,
                           None if started_at is None else float(started_at))
        one = part is not None and 0 <= part < int(hosts)
        parts = {int(i): (Taker(str(u), str(w)), int(a), float(at)) for i, u, w, a, at in self.db.rows(
            "SELECT part_index, taker_user, taker_worker, taker_attempt, claimed_at FROM run_part_takers"
            " WHERE run_id=%s" + (" AND part_index=%s" if one else ""), (run_id, part) if one else (run_id,))}
        if one:
            taker, attempt, at = parts.get(part, (None, 0, None))
            return Binding(taker, attempt, False, str(state), publisher, at, part=part)
        return Binding(None, 0, True, str(state), publisher, None if started_at is None else float(started_at),
                       part_takers=frozenset(t for t, _, _ in parts.values()))

    def bind(self, run_id: str, taker: Taker, attempt: int, was: Taker | None, *, part: int | None = None,
             at: float = 0.0) -> bool:
        """Bind run ``run_id`` (or its part ``part``, claimed ``at``) to ``taker`` at ``attempt`` if it is
        still bound to ``was`` (so two collectors cannot both bind it); whether it is bound to ``taker`` now."""
        if part is not None:
            if was is None:
                self.db.execute("INSERT IGNORE INTO run_part_takers (run_id, part_index, taker_user, taker_worker,"
                                " taker_attempt, claimed_at) VALUES (%s,%s,%s,%s,%s,%s)",
                                (run_id, part, taker.user, taker.worker, attempt, at))
            else:
                self.db.execute("UPDATE run_part_takers SET taker_user=%s, taker_worker=%s, taker_attempt=%s,"
                                " claimed_at=%s WHERE run_id=%s AND part_index=%s AND taker_user=%s AND taker_worker=%s",
                                (taker.user, taker.worker, attempt, at, run_id, part, was.user, was.worker))
        else:
            if was is None:
                cond, params = "taker_user IS NULL", []
            else:
                cond, params = "taker_user=%s AND taker_worker=%s", [was.user, was.worker]
            self.db.execute(f"UPDATE runs SET taker_user=%s, taker_worker=%s, taker_attempt=%s WHERE run_id=%s AND {cond}",
                            [taker.user, taker.worker, attempt, run_id, *params])
        now = self.binding(run_id, part)
        return now is not None and now.taker == taker

    def claim(self, event: RunEvent, sender: Taker) -> Claim:
        """A worker's event for a run (or for a part of a split run, each part bound on its own), from
        broker user and worker ``sender``: the first claim binds the run to it, a later attempt's claim
        takes it over, anyone else's is refused (and changes nothing); what was decided (store/takers.py)."""
        binding = self.binding(event.run_id, event.part)
        if binding is None:
            return Claim.REFUSE
        if binding.split:
            # A worker of an earlier version names no part: nothing it sends is taken, but its run is
            # marked running (as every part's claim was then), so the reaper ends it, not left pending.
            self.mark_running(event)
            return Claim.REFUSE
        decision = judge_claim(binding, sender, event.attempt, event.part)
        if event.state == "measuring" and decision is Claim.RETAKE:
            decision = Claim.REFUSE  # only a run's start takes it over
        if decision in (Claim.BIND, Claim.RETAKE):
            if binding.state in FINAL_STATES:
                return Claim.REFUSE  # a run with its final word is taken by no one any more
            if not self.bind(event.run_id, sender, event.attempt, binding.taker, part=event.part, at=event.at):
                return Claim.REFUSE  # another claim bound it first
        elif decision is Claim.TAKER and event.part is not None and event.state == "running":
            # Its taker took the part again (its worker restarted): the takeover rule counts the
            # taker's connections from this claim, as a whole run's from its latest start.
            self.db.execute("UPDATE run_part_takers SET claimed_at=GREATEST(claimed_at, %s),"
                            " taker_attempt=GREATEST(taker_attempt, %s) WHERE run_id=%s AND part_index=%s"
                            " AND taker_user=%s AND taker_worker=%s",
                            (event.at, event.attempt, event.run_id, event.part, sender.user, sender.worker))
        if decision is not Claim.REFUSE:
            self.mark_running(event)
        return decision

    def mark_running(self, event: RunEvent) -> None:
        """Note that a worker started a run, unless the run already has its final state; or, for a
        "measuring" event, when its warm-up began. Both by the worker's clock: updated_at equals
        started_at until the measured part began, then holds that moment (``overdue`` reads it)."""
        if event.state == "measuring":
            self.db.execute(
                "UPDATE runs SET updated_at=GREATEST(%s, started_at + 0.001) WHERE run_id=%s AND state='running'"
                " AND started_at <= %s AND attempts <= %s",
                (event.at, event.run_id, event.at, event.attempt),
            )
            return
        self.db.execute(
            "UPDATE runs SET state='running', worker=%s, started_at=%s, attempts=GREATEST(attempts, %s), updated_at=%s"
            " WHERE run_id=%s AND state NOT IN ('done','failed','cancelled')",
            (event.worker, event.at, event.attempt, event.at, event.run_id),
        )

    def counts(self, campaign_id: str) -> dict[str, int]:
        """How many of the campaign's runs are in each state (every state named)."""
        counts = {s: 0 for s in RUN_STATES}
        for state, n in self.db.rows("SELECT state, COUNT(*) FROM runs WHERE campaign_id=%s GROUP BY state",
                                     (campaign_id,)):
            counts[state] = int(n)
        return counts

    def span(self, campaign_id: str) -> tuple[float | None, float | None]:
        """When the campaign's first run started and its last run ended (None before any did)."""
        (first, last), = self.db.rows("SELECT MIN(started_at), MAX(ended_at) FROM runs WHERE campaign_id=%s",
                                      (campaign_id,))
        return first, last

    def ended_at(self, campaign_id: str) -> float | None:
        """When the campaign's last run reached its final state; None while a run is pending or
        running (or the campaign has no runs)."""
        (open_runs, total, last), = self.db.rows(
            "SELECT COALESCE(SUM(state IN ('pending','running')), 0), COUNT(*), MAX(COALESCE(ended_at, updated_at))"
            " FROM runs WHERE campaign_id=%s", (campaign_id,))
        return float(last) if int(total) and not int(open_runs) and last is not None else None

    def active(self, campaign_id: str) -> list[tuple[str, str, int, int, str | None, float | None]]:
        """Runs in progress: (target, workload, threads, repetition, worker, started_at)."""
        return [
            (r[0], r[1], int(r[2]), int(r[3]), r[4], r[5])
            for r in self.db.rows(
                "SELECT target, workload, threads, repetition, worker, started_at FROM runs"
                " WHERE campaign_id=%s AND state='running' ORDER BY seq",
                (campaign_id,),
            )
        ]

    def finish_campaign_if_done(self, campaign_id: str) -> None:
        """The campaign finished once no run is pending or running, else running once one began."""
        counts = self.counts(campaign_id)
        if counts["pending"] == 0 and counts["running"] == 0 and sum(counts.values()) > 0:
            state = "finished" if counts["failed"] == 0 and counts["cancelled"] == 0 else "finished_with_failures"
            # A late result can turn a reaped run done again: the campaign's state follows it.
            self.db.execute("UPDATE campaigns SET state=%s WHERE campaign_id=%s"
                            " AND state IN ('submitted','running','finished','finished_with_failures')",
                            (state, campaign_id))
        else:
            self.db.execute("UPDATE campaigns SET state='running' WHERE campaign_id=%s AND state='submitted'",
                            (campaign_id,))

    def fail(self, run_id: str, campaign_id: str, reason: str, cell: Cell | None = None,
             now: float | None = None, by: DeadLetterFrom | None = None) -> bool:
        """Mark a run of ``campaign_id`` failed with ``reason`` unless it already has its final state
        (a stored result keeps its own word); with ``cell``, only when the run is of that cell, so a
        forged message cannot fail another run; with ``by`` (who sent a dead letter), only when that
        sender may (store/takers.py may_fail). Finishes the campaign when that was its last run.
        Whether the run was changed."""
        now = now if now is not None else time.time()
        if by is not None:
            binding = self.binding(run_id)
            if binding is None or not may_fail(binding, by):
                log.warning("run_fail_refused", run_id=run_id, campaign_id=campaign_id, sender=by.user,
                            taker=str(binding.taker) if binding and binding.taker else None,
                            state=binding.state if binding else None)
                return False
        sql = ("UPDATE runs SET state='failed', error=%s, ended_at=COALESCE(ended_at, %s), updated_at=%s"
               " WHERE run_id=%s AND campaign_id=%s AND state NOT IN (" + ",".join(["%s"] * len(FINAL_STATES)) + ")")
        params: list[object] = [reason[:MAX_REASON], now, now, run_id, campaign_id, *FINAL_STATES]
        if cell is not None:
            sql += " AND target=%s AND workload=%s AND threads=%s"
            params += [cell.target, cell.workload, cell.threads]
        changed = bool(self.db.execute(sql, params).rowcount)
        # Even when nothing changed: a statement retried after a lost connection reports 0 rows
        # although its first try failed the run, and the campaign must still be finished.
        self.finish_campaign_if_done(campaign_id)
        return changed

    def overdue(self, now: float, grace_s: float) -> list[OverdueRun]:
        """Runs still marked running past their deadline (see finality.deadline). updated_at is
        later than started_at once the worker said the warm-up began (``mark_running``)."""
        rows = self.db.rows(
            "SELECT r.run_id, r.campaign_id, r.worker, r.started_at, r.updated_at, r.target, c.spec_json, r.workload,"
            " r.threads FROM runs r"
            " JOIN campaigns c ON c.campaign_id = r.campaign_id WHERE r.state='running' AND r.started_at IS NOT NULL")
        specs: dict[str, tuple[dict, CampaignSpec | None]] = {}
        out = []
        for run_id, campaign_id, worker, started_at, updated_at, target, spec_json, workload, threads in rows:
            if campaign_id not in specs:
                try:
                    parsed: CampaignSpec | None = read_stored_spec(spec_json, campaign_id)
                except StoreError:  # read leniently below, by the campaign's own lengths
                    parsed = None
                # recorded by the scheduler from a validated spec
                specs[campaign_id] = (json.loads(spec_json), parsed)
            spec, parsed_spec = specs[campaign_id]
            # A cell's own windows (by thread count, by workload): a 15-minute window at 4096
            # clients is not overdue 15 s after the campaign's default window.
            span = run_span(spec, parsed_spec, int(threads), workload)
            started = float(started_at)
            measuring = float(updated_at) if updated_at is not None and float(updated_at) > started else None
            due = deadline(started, measuring, span, start_allowance(spec, str(target)), grace_s)
            if due < now:
                out.append(OverdueRun(run_id, campaign_id, worker, started, due - started, workload))
        return out

    def failed(self, campaign_id: str) -> list[FailedRun]:
        """The failed runs of a campaign with their reasons, in plan order."""
        return [FailedRun(r[0], r[1]) for r in self.db.rows(
            "SELECT run_id, error FROM runs WHERE campaign_id=%s AND state='failed' ORDER BY seq", (campaign_id,))]

    def unstored_failures(self, campaign_id: str, workload: str | None = None,
                          pool: str | None = None) -> dict[tuple[str, str, int], int]:
        """How many runs of each (target, workload, threads) cell failed without a stored result
        (their run spec or result dead-lettered, or reaped): the cell statistics count them as failed.
        With ``pool``, of that pool's runs only (a campaign on several pools: the run id's @POOL)."""
        sql = ("SELECT r.target, r.workload, r.threads, COUNT(*) FROM runs r LEFT JOIN results s ON s.run_id = r.run_id"
               " WHERE r.campaign_id=%s AND r.state IN ('failed', 'cancelled') AND s.run_id IS NULL")
        params: list[object] = [campaign_id]
        if workload is not None:
            sql += " AND r.workload=%s"
            params.append(workload)
        if pool is not None:
            # Not LIKE: a pool name may hold _, which LIKE reads as any character.
            sql += " AND LOCATE('@', r.run_id) > 0 AND SUBSTRING_INDEX(r.run_id, '@', -1)=%s"
            params.append(pool)
        rows = self.db.rows(sql + " GROUP BY r.target, r.workload, r.threads", params)
        return {(t, w, int(n)): int(c) for t, w, n, c in rows}
