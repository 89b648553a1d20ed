"""The worker's consumer: one run at a time from its pool's queue, measured off the I/O thread.

The run executes in its own thread while this thread keeps serving the connection, so AMQP
heartbeats flow during 15-minute runs; the ack is handed back with ``call_threadsafe``,
after the result has been published with a confirm (never before: a crash in between means
a redelivery and a replaced result, never a lost one).

The consumer sees the broker only through the Broker interface (services/common/bus/broker.py);
the worker CLI hands it a RabbitMQ factory, the unit tests an in-memory one.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import threading
import time
from typing import Any, Callable, Literal, Mapping, Protocol

from services.common import logs
from services.common.bus.broker import Broker, BusFactory, Delivery
from services.common.config import ANNOUNCE_EVERY_S, Settings
from services.common.bus.control import ControlMessage
from services.common.errors import BusError, DecodeError, TopologyMissing
from services.common.messages.builds import BuildInfo
from services.common.messages.events import RunEvent
from services.common.messages.results import RunResult
from services.common.messages.parts import part_failure
from services.common.messages.runs import RunOrder, RunSpec
from services.common.messages.announcements import WorkerAnnouncement, WorkerBuilds
from services.common.messages.codec import decode
from services.worker.known_targets import KNOWN_TARGETS, KnownTargets
from services.worker.parts.link import PartsFactory
from services.worker.driver.contract import ProgressCallback
from services.worker.metrics import WorkerMetrics
from services.worker.parts.session import PartSession
from services.worker.runner import WorkerIdentity, execute
from services.worker.target.managed import ServerManager
from services.worker.verdict import fit_for_the_bus, judge

log = logs.get(__name__)

#: How many finished run ids to remember, so a run redelivered after a broker hiccup (its
#: result already published) is acked instead of measured again.
RECENT_RUNS = 256
#: Seconds to wait before handing a failed attempt back for another try, per attempt so far
#: (a restarting target gets a moment to come back).
RETRY_PAUSE_S = 2.0
#: First pause before reconnecting or publishing again after a broker error; it doubles up to
#: BACKOFF_CAP_S.
BACKOFF_S = 1.0
BACKOFF_CAP_S = 30.0
#: Seconds between looks for queues nobody has declared yet (before the first submit).
TOPOLOGY_WAIT_S = 5.0
#: Give up (and reconnect) when the control log replay has not reached this worker's marker
#: within this many seconds; no run is taken meanwhile.
CONTROL_REPLAY_TIMEOUT_S = 60.0


class RunExecutor(Protocol):
    """Measures one run and returns its result; failures are a failed result, not an exception
    (services.worker.runner.execute; the unit tests pass fakes)."""

    def __call__(self, run: RunSpec, who: WorkerIdentity, *, servers: ServerManager | None, attempt: int,
                 client_cpus: list[int] | None, after_failure: bool, stop: threading.Event,
                 on_progress: ProgressCallback, on_measuring: Callable[[float], None]) -> RunResult: ...


class AfterRun(enum.Enum):
    """What happens to a run's delivery once the run has ended."""

    #: Shutting down mid-run: back to the queue unmeasured, for another worker.
    HAND_BACK = "hand_back"
    #: A failed attempt with attempts left: back to the queue (the quorum queue counts it).
    RETRY = "retry"
    #: Publish the result (ok, or cancelled with the campaign), then ack.
    PUBLISH = "publish"
    #: The last attempt failed: publish the failed result, dead-letter the run spec, ack.
    GIVE_UP = "give_up"


def after_run(status: str, attempt: int, attempts: int, *, stopping: bool, part: bool = False) -> AfterRun:
    """The decision for a run that ended with ``status`` on delivery ``attempt`` of ``attempts``.
    A failed ``part`` of a run (load_hosts) is given up at once: retried alone it could never
    rejoin the group that started without it, so its failure fails the run whole."""
    if stopping and status == "cancelled":
        return AfterRun.HAND_BACK
    if status == "failed" and part:
        return AfterRun.GIVE_UP
    if status == "failed":
        # Only the last attempt's failure is stored; a worker shutting down stores it at once.
        return AfterRun.RETRY if attempt < attempts and not stopping else AfterRun.GIVE_UP
    return AfterRun.PUBLISH


class Worker:
    """Consumes run specs of one pool until stopped."""

    def __init__(self, settings: Settings, *, pool: str, identity: WorkerIdentity, connect: BusFactory,
                 client_cpus: list[int] | None = None, max_runs: int | None = None,
                 run_executor: RunExecutor = execute, metrics: WorkerMetrics | None = None,
                 servers: ServerManager | None = None, retry_pause_s: float = RETRY_PAUSE_S,
                 backoff_s: float = BACKOFF_S, scrape_address: str | None = None,
                 announce_every_s: float = ANNOUNCE_EVERY_S,
                 parts_connect: PartsFactory | None = None, part_options: Mapping[str, float] | None = None,
                 known_targets: int = KNOWN_TARGETS):
        self.settings = settings
        self.pool = pool
        self.identity = identity
        self.connect = connect
        self.client_cpus = client_cpus
        self.max_runs = max_runs
        self.execute = run_executor
        #: The managed servers this worker starts (owned by whoever made the worker).
        self.servers = servers
        self.metrics = metrics or WorkerMetrics(identity.worker_id)
        self.retry_pause_s = retry_pause_s
        self.backoff_s = backoff_s
        #: Where Prometheus scrapes this worker (host:port), announced to the collector at every
        #: connect and withdrawn at a clean stop; None: not announced.
        self.scrape_address = scrape_address
        #: Seconds between announcements while connected (see config.ANNOUNCE_EVERY_S).
        self.announce_every_s = announce_every_s
        #: Links to the other parts of a run split over load hosts (spec ``load_hosts``), and the
        #: barrier's timings (PartSession's keywords; tests shorten them).
        self.parts_connect = parts_connect
        self.part_options = dict(part_options or {})
        self.stopping = threading.Event()
        self.runs_done = 0
        self._active: threading.Thread | None = None
        self._run_stop = threading.Event()
        self._recent: collections.OrderedDict[str, None] = collections.OrderedDict()
        #: Cancelled campaigns (heard on the control exchange, or replayed from the control log
        #: at connect): their runs are acked unmeasured.
        self._cancelled: set[str] = set()
        self._targets = KnownTargets(known_targets)
        #: A run order whose target is not known yet, and its delivery (unacked).
        self._held: tuple[Delivery, RunOrder] | None = None
        self._active_campaign: str | None = None
        #: Targets (as their spec JSON) whose last run here failed or was cancelled: the next run
        #: on one ends the statements it may have left running before it waits for the target.
        self._unclean: set[str] = set()
        #: The builds last announced on the bus (None: not yet on this connection).
        self._announced: list[BuildInfo] | None = None
        #: When (monotonic) to announce again; the first comes ANNOUNCE_EVERY_S after connecting.
        self._next_announce = 0.0

    def stop(self) -> None:
        """Stop taking runs; an active run is cancelled and handed back to the queue."""
        self.stopping.set()
        self._run_stop.set()

    def _should_stop(self) -> bool:
        idle = self._active is None or not self._active.is_alive()
        if self.max_runs is not None and self.runs_done >= self.max_runs and idle:
            return True
        return self.stopping.is_set() and idle

    def run_forever(self) -> None:
        """Consume until stopped, reconnecting with backoff when the broker goes away."""
        delay = self.backoff_s
        while not self._should_stop():
            bus = self.connect(f"benchfleet worker {self.identity.worker_id}")
            try:
                bus.connect()
                self._listen(bus)
                self._announced = None
                self._announce(bus)
                self._next_announce = time.monotonic() + self.announce_every_s
                delay = self.backoff_s
                log.info("worker_consuming", pool=self.pool, worker=self.identity.worker_id)
                bus.consume(bus.names.runs_queue(self.pool), 1, lambda d: self._on_message(bus, d), self._should_stop,
                            on_tick=lambda: self._tick(bus))
            except BusError as e:
                log.warning("worker_bus_lost", error=f"{type(e).__name__}: {e}", retry_in_s=delay)
                if isinstance(e, TopologyMissing):
                    self._announce_while_waiting(bus)
                # Never take a new run while the previous one is still measuring.
                if self._active is not None:
                    self._active.join()
                self.stopping.wait(delay)
                # Waiting for the first submit (or the collector) to declare the queues: look
                # again soon, so the first runs are taken within seconds of the submit.
                delay = TOPOLOGY_WAIT_S if isinstance(e, TopologyMissing) else min(delay * 2, BACKOFF_CAP_S)
            finally:
                bus.close()
        self._withdraw()

    def _tick(self, bus: Broker) -> None:
        """Outside the broker's callbacks: find a held run's target, announce when it is time."""
        if self._held is not None:
            self._find_held_target(bus)
        self._announce_again(bus)

    def _announce_again(self, bus: Broker) -> None:
        """Every ANNOUNCE_EVERY_S (on the consumer's I/O thread, during runs too): announce the
        endpoint and builds again, so they stay fresh under the fleet's announce_ttl_s."""
        now = time.monotonic()
        if now < self._next_announce:
            return
        self._next_announce = now + self.announce_every_s
        if self.scrape_address is not None:
            bus.publish_result(self._announcement("up", self.scrape_address))
        self._announced = None  # builds too, even unchanged
        self._announce(bus)

    def _announce_while_waiting(self, bus: Broker) -> None:
        """Announce the builds (once a minute) while the pool's queues are not declared yet: the
        scheduler declares them at the first submit, whose build check needs this announcement, so
        without it a fresh fleet's first spec naming a build would be refused for good."""
        now = time.monotonic()
        if now < self._next_announce:
            return
        self._next_announce = now + self.announce_every_s
        self._announced = None
        try:
            self._announce(bus)
        except BusError as e:  # no collector has declared the results exchange yet: try again later
            log.info("builds_not_announced", error=f"{type(e).__name__}: {e}")

    def _announcement(self, state: Literal["up", "down"], address: str) -> bytes:
        return WorkerAnnouncement(worker=self.identity.worker_id, pool=self.pool, state=state, address=address,
                                  at=time.time()).encode()

    def _withdraw(self) -> None:
        """Tell the collector this worker stopped on purpose, so Prometheus stops scraping it
        instead of paging it as down. One try: a worker that cannot say so is listed as down."""
        if self.scrape_address is None:
            return
        pub = self.connect(f"benchfleet worker {self.identity.worker_id} stop")
        try:
            # One attempt: a stopping worker must not wait out the reconnect backoff.
            pub.connect(attempts=1)
            pub.declare((self.pool,))
            pub.publish_result(self._announcement("down", self.scrape_address))
        except BusError as e:
            log.warning("worker_withdraw_failed", error=str(e))
        finally:
            pub.close()

    def _listen(self, bus: Broker) -> None:
        """Declare, announce this worker's /metrics, hear control messages, and catch up on the
        ones sent while away."""
        bus.declare((self.pool,))
        if self.scrape_address is not None:
            # Every connect: a broker or collector that lost track of the fleet learns it again.
            bus.publish_result(self._announcement("up", self.scrape_address))
        # Listen first, then replay: a cancel or target definition published from now on reaches
        # this connection, and every earlier one is in the log before this worker's marker.
        self._held = None  # a held delivery is the broker's again once the connection is gone
        bus.subscribe_control(self._apply_control, self._targets.learn)
        n = bus.replay_control_log(self.identity.worker_id, self._apply_control, on_definition=self._targets.learn,
                                   should_stop=self.stopping.is_set, timeout_s=CONTROL_REPLAY_TIMEOUT_S)
        log.info("control_log_replayed", cancels=n, cancelled_campaigns=len(self._cancelled), targets=len(self._targets))

    def _announce(self, bus: Broker) -> None:
        """Tell the fleet which builds this host has (the collector keeps the last announcement
        per host and pool; the scheduler checks specs' ``build:`` against them), when they
        changed since the last announcement on this connection."""
        if self.servers is None:
            return
        try:
            builds = self.servers.builds.infos()
        except Exception as e:  # a broken registry must not stop the worker; runs naming builds fail
            log.error("builds_unreadable", error=f"{type(e).__name__}: {e}")
            return
        if builds == self._announced:
            return
        bus.publish_result(WorkerBuilds(worker=self.identity.worker_id, host=self.identity.host, pool=self.pool,
                                        builds=builds, at=time.time()).encode())
        self._announced = builds
        log.info("builds_announced", builds=[b.name for b in builds])

    def _apply_control(self, msg: ControlMessage) -> None:
        """A control message: cancelling a campaign stops its active run here within seconds."""
        self._cancelled.add(msg.campaign_id)
        if self._active_campaign == msg.campaign_id and self._active is not None and self._active.is_alive():
            log.info("run_cancel_requested", campaign_id=msg.campaign_id)
            self._run_stop.set()

    def _on_message(self, bus: Broker, d: Delivery) -> None:
        try:
            msg = decode(d.body, expect=(RunSpec, RunOrder))
        except DecodeError as e:
            self._refuse(bus, d, f"undecodable run message: {e}")
            return
        if isinstance(msg, RunOrder) and not self._targets.knows(msg):
            # Not from a callback: the control log is read in the consumer's next tick, the
            # delivery held (unacked) meanwhile.
            self._held = (d, msg)
            return
        self._take_run(bus, d, msg)

    def _find_held_target(self, bus: Broker) -> None:
        """Run the held order with its target from the control log, or dead-letter it (not there)."""
        assert self._held is not None
        (d, order), self._held = self._held, None
        self._targets.recall(order, bus, self.identity.worker_id, self._apply_control,
                             should_stop=self.stopping.is_set, timeout_s=CONTROL_REPLAY_TIMEOUT_S)
        self._take_run(bus, d, order)

    def _take_run(self, bus: Broker, d: Delivery, msg: RunSpec | RunOrder) -> None:
        run = self._targets.run_of(msg) if isinstance(msg, RunOrder) else msg
        if isinstance(run, str):
            self._refuse(bus, d, run, event="run_target_unknown")
        else:
            self._take(bus, d, run)

    def _refuse(self, bus: Broker, d: Delivery, reason: str, event: str = "run_message_undecodable") -> None:
        log.error(event, reason=reason)
        bus.dead_letter(d.body, reason, bus.names.runs_queue(self.pool))
        bus.ack(d.delivery_tag)

    def _take(self, bus: Broker, d: Delivery, run: RunSpec) -> None:
        if _done_key(run) in self._recent:
            log.info("run_already_done", run_id=run.run_id)
            bus.ack(d.delivery_tag)
            return
        if run.campaign_id in self._cancelled:
            # The scheduler marked it cancelled in the results DB already; drop it unmeasured.
            log.info("run_dropped_cancelled", campaign_id=run.campaign_id, run_id=run.run_id)
            bus.ack(d.delivery_tag)
            return
        attempt = d.attempt
        # A build registered (or removed) while the worker runs is announced before the next run.
        self._announce(bus)
        # A part names itself: each part of a split run is bound to the worker that took it.
        bus.publish_result(RunEvent(run_id=run.run_id, campaign_id=run.campaign_id, state="running",
                                    worker=self.identity.worker_id, attempt=attempt, at=time.time(),
                                    part=run.part.index if run.part is not None else None).encode())
        self._run_stop = threading.Event()
        self._active_campaign = run.campaign_id
        self._active = threading.Thread(target=self._run, args=(bus, d, run, attempt),
                                        name=f"run-{run.run_id}", daemon=True)
        self._active.start()

    def _run(self, bus: Broker, d: Delivery, run: RunSpec, attempt: int) -> None:
        tag = d.delivery_tag
        rlog = log.bind(campaign_id=run.campaign_id, run_id=run.run_id, target=run.cell.target)
        rlog.info("run_started", workload=run.cell.workload, threads=run.cell.threads, attempt=attempt)
        self.metrics.run_started(run)
        target_key = run.target.model_dump_json()
        session: PartSession | None = None
        try:
            session = self._part_session(run)
            if run.part is not None and session is None:
                raise RuntimeError("this worker has no link to the other parts of a run (load_hosts)")
            gate: dict[str, Any] = {} if session is None else {"start_gate": session.gate}
            result = self.execute(run, self.identity, servers=self.servers, attempt=attempt, client_cpus=self.client_cpus,
                                  after_failure=attempt > 1 or target_key in self._unclean, stop=self._run_stop,
                                  on_progress=lambda p: self.metrics.observe_progress(run, p),
                                  on_measuring=lambda at: self._note_measuring(bus, run, attempt, at), **gate)
        except Exception as e:  # a bug must fail this run loudly, never wedge the worker unacked
            rlog.exception("run_crashed")
            result = self._crashed(run, attempt, e)
        result = judge(result, run.ignored_errors)
        if session is not None:
            try:
                result = self._end_part(session, result)
            except Exception as e:  # as above: the part fails (and so the run), its delivery is acked
                rlog.exception("part_end_crashed")
                with contextlib.suppress(Exception):
                    session.finish(f"worker error: {type(e).__name__}: {e}")
                result = self._crashed(run, attempt, e, part_index=session.part.index)
        if result.status == "ok":
            self._unclean.discard(target_key)
        else:
            self._unclean.add(target_key)
        decision = after_run(result.status, attempt, self.settings.run_attempts, stopping=self.stopping.is_set(),
                             part=run.part is not None)
        if decision is AfterRun.HAND_BACK:
            rlog.info("run_requeued_on_shutdown")
            self.metrics.run_finished(run, None)
            self._hand_back(bus, lambda: bus.nack(tag, requeue=True))
            return
        if decision is AfterRun.RETRY:
            rlog.warning("run_attempt_failed", attempt=attempt, of=self.settings.run_attempts, error=result.error,
                         error_code=result.error_code)
            self.metrics.run_finished(run, None)
            self._run_stop.wait(self.retry_pause_s * attempt)
            self._hand_back(bus, lambda: bus.nack(tag, requeue=True))
            return
        # Measuring again would make as big a result: a too-big one is published failed at once.
        result = fit_for_the_bus(result)
        self._on_own_bus(lambda pub: pub.publish_result(result.encode()), run.run_id)
        if decision is AfterRun.GIVE_UP:
            # Out of attempts: park the run spec with the reason, next to the failed result.
            reason = f"run failed after {attempt} attempt(s): {result.error}"
            self._on_own_bus(lambda pub: pub.dead_letter(d.body, reason, pub.names.runs_queue(self.pool)), run.run_id)
        self.metrics.run_finished(run, result)
        self._recent[_done_key(run)] = None
        while len(self._recent) > RECENT_RUNS:
            self._recent.popitem(last=False)
        rlog.info("run_finished", status=result.status, qps=round(result.qps, 1), error=result.error)
        q = result.quality
        if q is not None and q.flags:
            rlog.warning("run_stalled", flags=q.flags, stalled_s=q.stalled_s, longest_stall_s=q.longest_stall_s,
                         overrun_s=round(q.overrun_s, 1), max_ms=result.latency.max_ms)
        self.runs_done += 1
        self._hand_back(bus, lambda: bus.ack(tag))

    def _crashed(self, run: RunSpec, attempt: int, e: Exception, *, part_index: int | None = None) -> RunResult:
        """The failed result of a run (or of part ``part_index``, as a failure of the split run as
        a whole) whose worker code raised ``e``."""
        now = time.time()
        error = f"worker error: {type(e).__name__}: {e}"
        if part_index is not None:
            error = part_failure(part_index, self.identity.worker_id, error)
        return RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                         status="failed", error=error, worker=self.identity.worker_id, host=self.identity.host,
                         attempt=attempt, started_at=now, ended_at=now, **({} if part_index is None else {"parts": []}))

    def _part_session(self, run: RunSpec) -> PartSession | None:
        """The barrier of a part of a run (None for a whole run), begun before the target is
        prepared, so part 0's worker answers the others' pings while it prepares."""
        if run.part is None or self.parts_connect is None:
            return None
        link = self.parts_connect(f"benchfleet worker {self.identity.worker_id} parts")
        return PartSession(link, run, worker=self.identity.worker_id, host=self.identity.host, pool=self.pool,
                           stop=self._run_stop, **self.part_options).begin()

    def _end_part(self, session: PartSession, result: RunResult) -> RunResult:
        """A part's result: failed when the barrier gave up (a part lost while measuring stops
        every part, and the run fails whole), with what the part was. Only a part stopped before
        its start goes back to the queue (the others keep waiting for it); one stopped after the
        start fails, since the group measured without it."""
        stopping = self.stopping.is_set()
        started = session.start_at is not None
        # A part cancelled with its campaign stays cancelled, even when a partner's cancel reached
        # its barrier first (as an abort): failed, it would be dead-lettered and could fail the run.
        if result.status == "cancelled" and result.campaign_id in self._cancelled:
            pass
        elif session.failure is not None and result.status != "failed" and (not stopping or started):
            result = result.model_copy(update={"status": "failed", "error": session.failure, "quality": None})
        elif stopping and started and result.status == "cancelled":
            result = result.model_copy(update={"status": "failed", "quality": None,
                                               "error": "load_hosts: the worker stopped while the parts measured"})
        elif result.status == "ok" and session.report() is None:
            # The driver measured without an agreed start: only a share of the connections ran,
            # so the result is no measurement of the run (never stored as the whole run).
            result = result.model_copy(update={"status": "failed", "quality": None,
                                               "error": "load_hosts: the part measured without an agreed start"})
        requeued = stopping and not started and result.status == "cancelled"
        session.finish(None if result.status == "ok" else (result.error or result.status), requeued=requeued)
        report = session.report()
        if report is not None:
            return result.model_copy(update={"part": report.model_copy(update={
                "transactions": result.totals.transactions, "queries": result.totals.queries})})
        # No start was agreed (so the result is not ok, see above): a failure of the split run as a
        # whole (``parts`` empty, no part), naming this part and its worker; the collector keeps it
        # only while the run has no result.
        error = result.error
        if result.status == "failed":
            error = part_failure(session.part.index, self.identity.worker_id, error or result.status)
        return result.model_copy(update={"part": None, "parts": [], "error": error})

    def _on_own_bus(self, fn: Callable[[Broker], None], run_id: str) -> None:
        """Run ``fn`` on a connection of this thread's own, retrying until it succeeds."""
        delay = self.backoff_s
        while True:
            try:
                with self.connect(f"benchfleet worker {self.identity.worker_id} results") as pub:
                    pub.declare((self.pool,))
                    fn(pub)
                return
            except BusError as e:
                log.warning("result_publish_retry", run_id=run_id, error=str(e), retry_in_s=delay)
                time.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP_S)

    def _note_measuring(self, bus: Broker, run: RunSpec, attempt: int, at: float) -> None:
        """Tell the collector the run's warm-up begins (its reaper counts warm-up + duration from
        then), on the consuming connection's thread; a lost note only makes the reaper wait longer."""
        event = RunEvent(run_id=run.run_id, campaign_id=run.campaign_id, state="measuring",
                         worker=self.identity.worker_id, attempt=attempt, at=at,
                         part=run.part.index if run.part is not None else None).encode()
        self._hand_back(bus, lambda: bus.publish_result(event))

    @staticmethod
    def _hand_back(bus: Broker, fn: Callable[[], None]) -> None:
        """Run ``fn`` (an ack or a nack) on the consuming connection's thread."""
        def safe() -> None:
            try:
                fn()
            except BusError:
                # The delivery died with its connection; the broker redelivers it and the
                # recent-runs memory acks it without measuring again.
                pass

        try:
            bus.call_threadsafe(safe)
        except BusError:
            pass


def _done_key(run: RunSpec) -> str:
    """What the recent-runs memory remembers: a run, or one part of it (a worker may measure
    another part of a run later, after a retry)."""
    return run.run_id if run.part is None else f"{run.run_id}#part{run.part.index}"
