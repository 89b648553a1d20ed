"""The worker's consumer: one run at a time from its pool's queue, measured off the I/O thread.

The run executes in its own thread while this thread keeps serving the connection, so AMQP
heartbeats flow during 15-minute runs; the ack is handed back with add_callback_threadsafe,
after the result has been published with a confirm (never before: a crash in between means
a redelivery and a replaced result, never a lost one).
"""

from __future__ import annotations

import collections
import secrets
import threading
import time
from typing import Callable

from services.common import logs
from services.common.bus import CONNECTION_ERRORS, Bus, BusError, Delivery
from services.common.config import Settings
from services.common.control import (
    SYNC_HEADER,
    ControlMessage,
    declare_control,
    declare_control_log,
    decode_control,
    read_log_entry,
)
from services.common.messages import DecodeError, RunEvent, RunResult, RunSpec, decode
from services.worker.metrics import WorkerMetrics
from services.worker.runner import WorkerIdentity, execute
from services.worker.target.managed import ServerManager
from services.worker.verdict import judge

log = logs.get(__name__)

#: How many finished run ids to remember, so a run redelivered after a broker hiccup (its
#: result already published) is acked instead of measured again.
RECENT_RUNS = 256
#: Seconds to wait before handing a failed attempt back for another try, per attempt so far
#: (a restarting target gets a moment to come back).
RETRY_PAUSE_S = 2.0
#: Give up (and reconnect) when the control log replay has not reached this worker's marker
#: within this many seconds; no run is taken meanwhile.
CONTROL_REPLAY_TIMEOUT_S = 60.0
#: Unacked control-log messages in flight during the replay (a stream consumer needs a prefetch).
CONTROL_REPLAY_PREFETCH = 500


class Worker:
    """Consumes run specs of one pool until stopped."""

    def __init__(self, settings: Settings, *, pool: str, identity: WorkerIdentity,
                 client_cpus: list[int] | None = None, max_runs: int | None = None,
                 run_executor: Callable[..., RunResult] = execute, metrics: WorkerMetrics | None = None,
                 servers: ServerManager | None = None):
        self.settings = settings
        self.pool = pool
        self.identity = identity
        self.client_cpus = client_cpus
        self.max_runs = max_runs
        self.execute = run_executor
        #: The managed servers this worker starts (owned by whoever made the worker).
        self.servers = servers
        self.metrics = metrics or WorkerMetrics(identity.worker_id)
        self.stopping = threading.Event()
        self.runs_done = 0
        self._active: threading.Thread | None = None
        self._run_stop = threading.Event()
        self._recent: collections.OrderedDict[str, None] = collections.OrderedDict()
        #: Cancelled campaigns (heard on the control exchange, or replayed from the control log
        #: at connect): their runs are acked unmeasured.
        self._cancelled: set[str] = set()
        self._active_campaign: str | None = None

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
        delay = 1.0
        while not self._should_stop():
            bus = Bus(self.settings, name=f"benchfleet worker {self.identity.worker_id}")
            try:
                bus.connect()
                bus.declare((self.pool,))
                declare_control_log(bus.ch, bus.names)
                # Listen first, then replay: a cancel published from now on reaches the private
                # queue, and every earlier one is in the log before this worker's marker.
                bus.ch.basic_consume(declare_control(bus.ch, bus.names.control),
                                     lambda _c, _m, _p, body: self._on_control(body), auto_ack=True)
                self._replay_control_log(bus)
                delay = 1.0
                log.info("worker_consuming", pool=self.pool, worker=self.identity.worker_id)
                bus.consume(bus.names.runs_queue(self.pool), 1, lambda d: self._on_message(bus, d), self._should_stop)
            except (BusError, *CONNECTION_ERRORS) as e:
                log.warning("worker_bus_lost", error=f"{type(e).__name__}: {e}", retry_in_s=delay)
                # Never take a new run while the previous one is still measuring.
                if self._active is not None:
                    self._active.join()
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
            finally:
                bus.close()

    def _replay_control_log(self, bus: Bus) -> None:
        """Read the control log from its first message up to a sync marker this worker appends
        now, before the first run is taken: cancels published while the worker was away (not
        started yet, or reconnecting) land in ``_cancelled``. BusError when the marker does not
        come back in time (the caller reconnects)."""
        assert bus.connection is not None
        token = f"{self.identity.worker_id}-{secrets.token_hex(8)}"
        ch = bus.connection.channel()
        replayed = {"end": False, "cancels": 0}

        def on_entry(c: object, method: object, props: object, body: bytes) -> None:
            c.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]
            if replayed["end"]:
                return  # past the marker: the private queue delivers these
            try:
                kind, msg = read_log_entry(dict(props.headers or {}), body, token)  # type: ignore[attr-defined]
            except DecodeError as e:
                log.error("control_message_undecodable", reason=str(e), source="control_log")
                return
            if kind == "end":
                replayed["end"] = True
            elif msg is not None:
                replayed["cancels"] += 1
                self._apply_control(msg)

        try:
            ch.confirm_delivery()
            ch.basic_qos(prefetch_count=CONTROL_REPLAY_PREFETCH)
            ch.basic_consume(bus.names.control_log, on_entry, auto_ack=False, arguments={"x-stream-offset": "first"})
            bus.publish(bus.names.control_sync, "", b"", headers={SYNC_HEADER: token})
            deadline = time.monotonic() + CONTROL_REPLAY_TIMEOUT_S
            while not replayed["end"] and not self.stopping.is_set():
                if time.monotonic() > deadline:
                    raise BusError(f"the control log replay did not reach this worker's marker within "
                                   f"{CONTROL_REPLAY_TIMEOUT_S:.0f} s")
                bus.connection.process_data_events(time_limit=0.2)
        finally:
            try:
                if ch.is_open:
                    ch.close()
            except Exception:  # the connection may be gone; the caller handles that
                pass
        log.info("control_log_replayed", cancels=replayed["cancels"], cancelled_campaigns=len(self._cancelled))

    def _on_control(self, body: bytes) -> None:
        """A control message: cancelling a campaign stops its active run here within seconds."""
        try:
            msg = decode_control(body)
        except DecodeError as e:
            # auto-acked and private to this worker: log it; there is nothing to redeliver.
            log.error("control_message_undecodable", reason=str(e))
            return
        self._apply_control(msg)

    def _apply_control(self, msg: ControlMessage) -> None:
        self._cancelled.add(msg.campaign_id)
        if self._active_campaign == msg.campaign_id and self._active is not None and self._active.is_alive():
            log.info("run_cancel_requested", campaign_id=msg.campaign_id)
            self._run_stop.set()

    def _on_message(self, bus: Bus, d: Delivery) -> None:
        try:
            run = decode(d.body, expect=(RunSpec,))
        except DecodeError as e:
            log.error("run_message_undecodable", reason=str(e))
            bus.dead_letter(d.body, f"undecodable run message: {e}", bus.names.runs_queue(self.pool))
            bus.ack(d.delivery_tag)
            return
        if run.run_id in self._recent:
            log.info("run_already_done", run_id=run.run_id)
            bus.ack(d.delivery_tag)
            return
        if run.campaign_id in self._cancelled:
            # The scheduler marked it cancelled in the results DB already; drop it unmeasured.
            log.info("run_dropped_cancelled", campaign_id=run.campaign_id, run_id=run.run_id)
            bus.ack(d.delivery_tag)
            return
        # Quorum queues count returned deliveries; a delivery returned because its consumer's
        # connection died may not be counted, but it is flagged redelivered.
        attempt = int(d.headers.get("x-delivery-count", 0) or 0) + 1
        if d.redelivered:
            attempt = max(attempt, 2)
        bus.publish_result(RunEvent(run_id=run.run_id, campaign_id=run.campaign_id, state="running",
                                    worker=self.identity.worker_id, attempt=attempt, at=time.time()).encode())
        self._run_stop = threading.Event()
        self._active_campaign = run.campaign_id
        self._active = threading.Thread(target=self._run, args=(bus, d, run, attempt),
                                        name=f"run-{run.run_id}", daemon=True)
        self._active.start()

    def _run(self, bus: Bus, d: Delivery, run: RunSpec, attempt: int) -> None:
        tag = d.delivery_tag
        rlog = log.bind(campaign_id=run.campaign_id, run_id=run.run_id, target=run.cell.target)
        rlog.info("run_started", workload=run.cell.workload, threads=run.cell.threads, attempt=attempt)
        self.metrics.run_started(run)
        try:
            result = self.execute(run, self.identity, servers=self.servers, attempt=attempt, client_cpus=self.client_cpus, stop=self._run_stop,
                                  on_second=lambda snap: self.metrics.observe_second(run, snap))
        except Exception as e:  # a bug must fail this run loudly, never wedge the worker unacked
            rlog.exception("run_crashed")
            now = time.time()
            result = RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                               status="failed", error=f"worker error: {type(e).__name__}: {e}", worker=self.identity.worker_id,
                               host=self.identity.host, attempt=attempt, started_at=now, ended_at=now)
        result = judge(result)
        if self.stopping.is_set() and result.status == "cancelled":
            # Shutting down: give the run back to the queue for another worker, unmeasured.
            rlog.info("run_requeued_on_shutdown")
            self.metrics.run_finished(run, None)
            self._hand_back(bus, lambda: bus.ch.basic_nack(tag, requeue=True))
            return
        if result.status == "failed" and attempt < self.settings.run_attempts and not self.stopping.is_set():
            # Hand it back for another try (the quorum queue counts the delivery); only the
            # last attempt's failure is stored.
            rlog.warning("run_attempt_failed", attempt=attempt, of=self.settings.run_attempts, error=result.error,
                         error_code=result.error_code)
            self.metrics.run_finished(run, None)
            self._run_stop.wait(RETRY_PAUSE_S * attempt)
            self._hand_back(bus, lambda: bus.ch.basic_nack(tag, requeue=True))
            return
        self._publish(result, rlog)
        if result.status == "failed":
            # Out of attempts: park the run spec with the reason, next to the failed result.
            reason = f"run failed after {attempt} attempt(s): {result.error}"
            self._on_own_bus(lambda pub: pub.dead_letter(d.body, reason, pub.names.runs_queue(self.pool)),
                             run.run_id)
        self.metrics.run_finished(run, result)
        self._recent[run.run_id] = None
        while len(self._recent) > RECENT_RUNS:
            self._recent.popitem(last=False)
        rlog.info("run_finished", status=result.status, qps=round(result.qps, 1), error=result.error)
        self.runs_done += 1
        self._hand_back(bus, lambda: bus.ack(tag))

    def _publish(self, result: RunResult, rlog: object) -> None:
        """Publish with confirms on a connection of this thread's own, retrying until it lands."""
        self._on_own_bus(lambda pub: pub.publish_result(result.encode()), result.run_id)

    def _on_own_bus(self, fn: Callable[[Bus], None], run_id: str) -> None:
        """Run ``fn`` on a connection of this thread's own, retrying until it succeeds."""
        delay = 1.0
        while True:
            try:
                with Bus(self.settings, name=f"benchfleet worker {self.identity.worker_id} results") as pub:
                    pub.declare((self.pool,))
                    fn(pub)
                return
            except (BusError, *CONNECTION_ERRORS) as e:
                log.warning("result_publish_retry", run_id=run_id, error=str(e), retry_in_s=delay)
                time.sleep(delay)
                delay = min(delay * 2, 30.0)

    @staticmethod
    def _hand_back(bus: Bus, fn: Callable[[], None]) -> None:
        def safe() -> None:
            try:
                fn()
            except CONNECTION_ERRORS:
                # The delivery died with its connection; the broker redelivers it and the
                # recent-runs memory acks it without measuring again.
                pass

        try:
            bus.call_threadsafe(safe)
        except Exception:
            pass
