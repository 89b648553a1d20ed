"""The collector's consumer: results and run events from the bus into the results DB.

A message is acked only after it is stored, so a collector that stops or loses its DB leaves
the rest waiting in RabbitMQ; storing is an upsert by run id, so redeliveries are harmless.
While the results DB is away the collector holds what it was delivered (unacked, so still the
broker's) and takes nothing more, tries the DB again with backoff, and stores the held messages
in order once it answers: an outage costs no message a delivery attempt, and nothing is
dead-lettered for it. A message is dead-lettered, with the reason, only for a fault of its own:
it does not decode, or the DB refuses it (StoreRefused).

The consumer sees the broker through the Broker interface and the results DB through
ResultStore, so its decisions are unit-tested with an in-memory bus and a fake store.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol

from services.collector.finality import Finaliser, FinalityStore, RunFinality
from services.collector.http_sd import WorkerDirectory
from services.collector.prometheus import CollectorMetrics
from services.common import logs
from services.common.bus.broker import Broker, BusFactory, Delivery
from services.common.errors import BusError, DecodeError, StoreError, StoreRefused, StoreUnavailable
from services.common.messages.events import RunEvent
from services.common.messages.results import RunResult
from services.common.messages.announcements import WorkerAnnouncement, WorkerBuilds
from services.common.messages.codec import decode
from services.common.store.takers import Binding, Claim, Taker
from services.collector.part_intake import PartIntake, part_of_a_split_run, spoils_a_merge, store_part
from services.collector.takeover import MAX_CLOCK_SKEW_S
from services.collector.takeover_check import Decided, TakeoverCheck, Waiting
from services.collector.waiting_claims import WaitingClaims

if TYPE_CHECKING:
    from services.common.results.rows import ResultRow

log = logs.get(__name__)

#: Results in flight per collector; they are small and storing is quick.
PREFETCH = 32
#: Seconds between queue-depth exports.
QUEUE_DEPTH_EVERY_S = 5.0
#: Seconds between checks that an idle results DB still answers, so the gauge and the log tell
#: of an outage before a result meets it.
DB_CHECK_EVERY_S = 5.0
#: Seconds between looks at whether the exported campaigns have ended (the collapse alert
#: resolves after a campaign ends, whichever way its last run ended: stored, failed, cancelled).
CAMPAIGN_CHECK_EVERY_S = 10.0
#: First pause before reconnecting after losing the broker or the results DB; doubles up to 30 s.
BACKOFF_S = 1.0
BACKOFF_CAP_S = 30.0


class RunRecords(RunFinality, Protocol):
    """The run states the collector writes (services.common.store's Runs is one)."""

    def claim(self, event: RunEvent, sender: Taker) -> Claim:
        """Note a worker's event for a run if ``sender`` may speak for the run (store/takers.py)."""
        ...

    def binding(self, run_id: str, part: int | None = None) -> Binding | None: ...

    def ended_at(self, campaign_id: str) -> float | None:
        """When the campaign's last run reached its final state; None while any is open."""
        ...


class ResultRecords(Protocol):
    """The results the collector writes and reads back (services.common.store's Results is one)."""

    def store(self, result: RunResult, *, sender: Taker | None = None) -> bool:
        """Store a run's result (from ``sender``: only from the run's taker); False when it was
        not (another worker's, or an ok result already stored is kept instead)."""
        ...

    def get(self, run_id: str) -> RunResult | None: ...

    def recent(self, campaigns: int) -> "list[ResultRow]": ...


class WorkerRecords(Protocol):
    """Workers' announcements (services.common.store's Workers is one)."""

    def record_builds(self, msg: WorkerBuilds) -> None: ...

    def record_announcement(self, announcement: WorkerAnnouncement) -> None: ...

    def announcements(self) -> list[WorkerAnnouncement]: ...


class ResultStore(FinalityStore, PartIntake, Protocol):
    """What the collector needs of the results DB (services.common.store.Store is one): its parts as
    the parts intake reads them, runs and results as below. Writes raise StoreRefused when the message
    is to blame, another StoreError when the DB is."""

    @property
    def runs(self) -> RunRecords: ...

    @property
    def results(self) -> ResultRecords: ...

    @property
    def workers(self) -> WorkerRecords: ...

    def reachable(self) -> bool:
        """Whether the DB answers now."""
        ...

    def close(self) -> None: ...


class Collector:
    """Stores what arrives on the results queue until stopped."""

    def __init__(self, *, connect: BusFactory, open_store: Callable[[], ResultStore], pools: tuple[str, ...] = (),
                 metrics: CollectorMetrics | None = None, backoff_s: float = BACKOFF_S,
                 db_check_every_s: float = DB_CHECK_EVERY_S, reap_grace_s: float = 900.0,
                 directory: WorkerDirectory | None = None,
                 after_store: Callable[[ResultStore, RunResult], None] | None = None,
                 after_fail: Callable[[ResultStore, str, str | None], None] | None = None,
                 after_end: Callable[[ResultStore, str], None] | None = None,
                 cancels: Callable[[Broker, ResultStore], None] | None = None,
                 takeover: TakeoverCheck | None = None):
        self.connect = connect
        #: Opens a connection to the results DB; StoreError when it cannot.
        self.open_store = open_store
        self.pools = pools
        self.metrics = metrics or CollectorMetrics()
        self.backoff_s = backoff_s
        self.db_check_every_s = db_check_every_s
        #: The workers Prometheus scrapes (served as HTTP service discovery by the CLI).
        self.directory = directory or WorkerDirectory()
        #: Runs after each stored result, before the ack (the per-cell statistics of its workload).
        self.after_store = after_store
        #: Runs once a campaign's runs all ended (its spec's change points and regression).
        self.after_end = after_end
        #: Runs on each tick while the DB answers: tells the workers of cancelled campaigns
        #: (services/collector/cancel_relay.py).
        self.cancels = cancels
        #: Asks the broker before a run changes hands (none given: no takeover by another user).
        self.takeover = takeover or TakeoverCheck()
        #: Takeover claims waiting for the broker's answer, and their runs' later deliveries.
        self.waiting = WaitingClaims(self.takeover)
        self._next_depth_check = 0.0
        self._next_db_check = 0.0
        self._next_campaign_check = 0.0
        self.stopping = threading.Event()
        self.stored = 0
        #: Gives the runs of dead letters, and runs whose worker vanished, their final state.
        #: after_fail runs after it failed a run (campaign id, workload), as after_store after a result.
        self.finaliser = Finaliser(grace_s=reap_grace_s, after_fail=after_fail)
        self._restored = False
        self._store: ResultStore | None = None
        #: Deliveries taken while the results DB was away, oldest first; unacked, so a lost
        #: broker connection gives them back to the queue.
        self._held: list[Delivery] = []
        #: The builds last logged of each (host, pool).
        self._builds_said: dict[tuple[str, str], list[str]] = {}
        #: When the current outage of the results DB began (None: the DB answers).
        self._down_since: float | None = None
        self._db_delay = backoff_s
        self._db_retry_at = 0.0

    def stop(self) -> None:
        self.stopping.set()

    def run_forever(self) -> None:
        delay = self.backoff_s
        try:
            while not self.stopping.is_set():
                bus = self.connect("benchfleet collector")
                try:
                    if self._store is None:
                        self._open_store()
                        self._db_back()
                    bus.connect()
                    bus.declare(self.pools)
                    delay = self.backoff_s
                    log.info("collector_consuming", queue=bus.names.results)
                    bus.consume(bus.names.results, PREFETCH, lambda d: self._on_message(bus, d), self.stopping.is_set,
                                on_tick=lambda: self._tick(bus))
                except StoreError as e:
                    # The DB is away before anything was taken: wait, then try it again.
                    self._db_away(e)
                    self.stopping.wait(self._db_delay)
                except BusError as e:
                    # Unacked (and held) results go back to the queue when the bus closes.
                    log.warning("collector_connection_lost", error=f"{type(e).__name__}: {e}", retry_in_s=delay)
                    self._held.clear()
                    self.waiting.clear()
                    self.stopping.wait(delay)
                    delay = min(delay * 2, BACKOFF_CAP_S)
                finally:
                    bus.close()
                    self._held.clear()
                    self.waiting.clear()
        finally:
            self.waiting.close()
            self._close_store()

    # -- the results DB's state -------------------------------------------------------------
    def _open_store(self) -> None:
        store = self.open_store()
        try:
            if not self._restored:
                self.metrics.restore(store.results.recent(self.metrics.max_campaigns))
                self._campaign_ends(store)  # restored campaigns that ended long ago do not page again
                for a in store.workers.announcements():
                    self.directory.update(a)
                self._restored = True
        except BaseException:
            store.close()
            raise
        self._store = store
        self._next_db_check = time.monotonic() + self.db_check_every_s

    def _db_back(self) -> None:
        """The results DB took a write again (or answers with nothing to write): logged once."""
        if self._down_since is not None:
            log.info("results_db_available", down_s=round(time.time() - self._down_since, 1), held=len(self._held))
            self._down_since = None
        self._db_delay = self.backoff_s
        self.metrics.results_db_up(True)

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _db_away(self, e: Exception) -> None:
        """The results DB went away (or is still away): logged once per outage, retried with backoff."""
        self._close_store()
        if self._down_since is None:
            self._down_since = time.time()
            self._db_delay = self.backoff_s
            log.warning("results_db_unavailable", error=f"{type(e).__name__}: {e}", held=len(self._held),
                        retry_in_s=self._db_delay)
        else:
            self._db_delay = min(self._db_delay * 2, BACKOFF_CAP_S)
            log.debug("results_db_still_unavailable", error=str(e), retry_in_s=self._db_delay)
        self._db_retry_at = time.monotonic() + self._db_delay
        self.metrics.results_db_up(False)

    def _after_store(self, result: RunResult) -> None:
        """The hook after a stored result (cell statistics). What it derives can be computed again
        (`collector stats`), so any error of its own is logged and the stored result still acked
        (never dead-lettered: it is stored); only a DB that went away stops consuming."""
        assert self.after_store is not None and self._store is not None
        try:
            self.after_store(self._store, result)
        except StoreUnavailable:
            raise
        except Exception as e:  # a refusal, an unknown campaign, a bug: the result is stored all the same
            log.warning("after_store_failed", campaign_id=result.campaign_id, run_id=result.run_id,
                        error=f"{type(e).__name__}: {e}")

    def _tick(self, bus: Broker) -> None:
        now = time.monotonic()
        if self._down_since is not None:
            if now >= self._db_retry_at:
                self._retry_held(bus)
        elif now >= self._next_db_check and self._store is not None:
            self._next_db_check = now + self.db_check_every_s
            if not self._store.reachable():
                self._db_away(StoreUnavailable("the results DB does not answer"))
        self._queue_depths(bus)
        if self._down_since is None and not self._held:
            self._decide_waiting(bus)
        if self._down_since is None and self._store is not None:
            try:
                self.finaliser.tick(bus, self._store, results_held=len(self.waiting) > 0)
                if self.cancels is not None:
                    self.cancels(bus, self._store)
                if now >= self._next_campaign_check:
                    self._next_campaign_check = now + CAMPAIGN_CHECK_EVERY_S
                    self._campaign_ends(self._store)
            except StoreError as e:  # the dead letter stays unacked: it comes back with the DB
                self._db_away(e)

    def _campaign_ends(self, store: ResultStore) -> None:
        """Tell the metrics which exported campaigns have ended, and when."""
        for campaign_id in self.metrics.running_campaigns():
            at = store.runs.ended_at(campaign_id)
            if at is not None:
                self.metrics.campaign_ended(campaign_id, at)
                if self.after_end is not None:
                    self._after_end(store, campaign_id)

    def _after_end(self, store: ResultStore, campaign_id: str) -> None:
        """The hook after a campaign ended: what it derives is computed again by `collector history
        --changes`, so its own errors are logged, never fatal; only a DB that went away counts."""
        assert self.after_end is not None
        try:
            self.after_end(store, campaign_id)
        except StoreUnavailable:
            raise
        except Exception as e:  # a refusal, a bug: the campaign's results are stored all the same
            log.warning("after_end_failed", campaign_id=campaign_id, error=f"{type(e).__name__}: {e}")

    def _retry_held(self, bus: Broker) -> None:
        """Try the DB again; once it answers, store the held deliveries in the order they came."""
        try:
            self._open_store()
        except StoreError as e:
            self._db_away(e)
            return
        if not self._held:
            self._db_back()
        while self._held:
            if not self._handle(bus, self._held[0]):
                return  # away again (_handle said so); the rest stay held
            self._db_back()  # logs how many were held, this one included
            self._held.pop(0)

    def _decide_waiting(self, bus: Broker) -> None:
        """Handle the takeover claims whose answer came, each with that answer, then what came for their
        runs after them, in order. Called while the DB answers and nothing is held for it (a run's later
        messages that came during an outage are held behind its claim by _retry_held); when the DB goes
        away meanwhile, the rest is held for it in order (and the claim asked about again)."""
        for ready in self.waiting.ready():
            rest = [ready.claim, *ready.after]
            if not self._held and self._handle(bus, ready.claim, answer=ready.answer):
                rest.pop(0)
            for d in rest:
                if self._held or not self._handle(bus, d):
                    self._held.append(d)

    # -- messages ---------------------------------------------------------------------------
    def _on_message(self, bus: Broker, d: Delivery) -> None:
        if self._down_since is not None or self._held:
            self._held.append(d)  # the DB is away: keep it, in order, until the DB is back
            return
        if not self._handle(bus, d):
            self._held.append(d)

    def _handle(self, bus: Broker, d: Delivery, answer: Decided | None = None) -> bool:
        """Store one delivery and ack it, or dead-letter it for a fault of its own, or hold it while a
        takeover claim of its run waits (``answer``: the check's, once it came); False (and nothing
        acked) when the results DB is away."""
        try:
            msg = decode(d.body, expect=(RunResult, RunEvent, WorkerBuilds, WorkerAnnouncement))
        except DecodeError as e:
            self._park(bus, d, "result_message_undecodable", f"undecodable result message: {e}")
            return True
        #: The run's result this message completed (a part's completes it with the last part).
        stored: RunResult | None = None
        if d.user_id is None:
            # Every publish of ours names its broker user, which RabbitMQ checks: without one, the
            # sender cannot be told apart from any other worker (a forged or an outdated publisher).
            log.error("message_refused", reason="no user_id: its sender is not known", schema=type(msg).__name__,
                      run_id=getattr(msg, "run_id", None), worker=getattr(msg, "worker", None))
            bus.ack(d.delivery_tag)
            return True
        sender = Taker.of(d.user_id, msg.worker)
        part = _part_about(msg)
        if answer is None and isinstance(msg, (RunEvent, RunResult)) and self.waiting.holds(msg.run_id, part):
            # After the claim before it, whatever that decides; a sender holding too many is not kept.
            if not self.waiting.hold(msg.run_id, d, part):
                log.warning("message_refused", run_id=msg.run_id, sender=str(sender), schema=type(msg).__name__,
                            reason="its sender has too many messages held behind takeover claims")
                bus.ack(d.delivery_tag)
            return True
        try:
            if self._store is None:
                raise StoreUnavailable("not connected to the results DB")
            if isinstance(msg, RunEvent):
                step = answer or self.takeover.begin(self._store.runs, msg, sender)
                if isinstance(step, Waiting):
                    step = self.waiting.wait(step, d)
                    if step is None:
                        log.info("run_takeover_waiting", run_id=msg.run_id, sender=str(sender), attempt=msg.attempt)
                        return True  # unacked until the broker's answer (_tick)
                refusal = step.refusal
                claim = Claim.REFUSE if refusal else self._store.runs.claim(msg, sender)
                if claim in (Claim.BIND, Claim.RETAKE):
                    self.takeover.claimed(msg.run_id, msg.part)
                if claim is Claim.REFUSE:
                    log.warning("run_claim_refused", run_id=msg.run_id, campaign_id=msg.campaign_id, state=msg.state,
                                sender=str(sender), attempt=msg.attempt, part=msg.part,
                                **({"reason": refusal} if refusal else {}))
                elif claim is Claim.RETAKE:
                    log.warning("run_taken_over", run_id=msg.run_id, campaign_id=msg.campaign_id, taker=str(sender),
                                attempt=msg.attempt, part=msg.part)
            elif isinstance(msg, (WorkerAnnouncement, WorkerBuilds)) and msg.at > time.time() + MAX_CLOCK_SKEW_S:
                log.warning("announcement_refused", worker=msg.worker, sender=str(sender), at=msg.at,
                            reason=f"dated more than {MAX_CLOCK_SKEW_S:g} s after the collector's clock")
            elif isinstance(msg, WorkerAnnouncement):
                self._store.workers.record_announcement(msg)
                if self.directory.update(msg):
                    log.info("worker_announced", worker=msg.worker, pool=msg.pool, state=msg.state,
                             address=msg.address)
            elif isinstance(msg, WorkerBuilds):
                self._store.workers.record_builds(msg)
                # Workers announce every minute: said once per change, not per refresh.
                if self._builds_said.get((msg.host, msg.pool)) != msg.names():
                    self._builds_said[(msg.host, msg.pool)] = msg.names()
                    log.info("worker_builds_recorded", host=msg.host, pool=msg.pool, builds=msg.names())
            elif msg.part is None:
                # Another worker's result is refused by the store (logged, acked, not dead-lettered:
                # that would fail the run).
                if not spoils_a_merge(self._store, msg) and self._store.results.store(msg, sender=sender):
                    stored = msg
            elif part_of_a_split_run(self._store, msg, sender):
                stored = store_part(self._store, msg)
            if stored is not None and self.after_store is not None:
                self._after_store(stored)
        except StoreRefused as e:
            # The DB is up but refuses this message: retrying forever would wedge every result
            # behind it, so park it with the reason.
            self._park(bus, d, "result_not_storable", f"cannot store message: {e}")
            return True
        except StoreError as e:
            self._db_away(e)
            return False
        except Exception as e:  # a bug met on this message must neither stop the collector nor loop on it
            log.exception("result_handling_failed", run_id=getattr(msg, "run_id", None))
            self._park(bus, d, "result_handling_failed", f"cannot handle message: {type(e).__name__}: {e}")
            return True
        bus.ack(d.delivery_tag)
        if stored is not None:
            self.stored += 1
            try:
                self.metrics.observe_result(stored)  # counts it as stored too
            except Exception:  # stored and acked: a metrics bug must not stop the collector
                log.exception("result_metrics_failed", run_id=stored.run_id)
            log.info("result_stored", campaign_id=stored.campaign_id, run_id=stored.run_id, status=stored.status,
                     qps=round(stored.qps, 1), parts=len(stored.parts or ()) or None)
        return True

    @staticmethod
    def _park(bus: Broker, d: Delivery, event: str, reason: str) -> None:
        log.error(event, reason=reason)
        # The dead letter is the collector's publish: it names who sent the message it parks, so
        # the finaliser fails the message's run only for that run's taker.
        bus.dead_letter(d.body, reason, bus.names.results, sender=d.user_id)
        bus.ack(d.delivery_tag)

    def _queue_depths(self, bus: Broker) -> None:
        """Export queue depths every few seconds (a passive declare per queue)."""
        now = time.time()
        if now < self._next_depth_check:
            return
        self._next_depth_check = now + QUEUE_DEPTH_EVERY_S
        for queue in (bus.names.results, bus.names.dead, *(bus.names.runs_queue(p) for p in self.pools)):
            self.metrics.queue_depth(queue, bus.queue_depth(queue))


def _part_about(msg: object) -> int | None:
    """The part of a split run a run's event or result is about (None: the whole run, or no run's message)."""
    if isinstance(msg, RunEvent):
        return msg.part
    if isinstance(msg, RunResult) and msg.part is not None:
        return msg.part.index
    return None
