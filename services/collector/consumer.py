"""The collector's consumer: results and run events from the bus into the results DB.

A message is acked only after it is stored, so a collector that stops or loses its DB leaves
the rest waiting in the durable queue; storing is an upsert by run id, so redeliveries are
harmless. The consumer sees the broker through the Broker interface and the results DB through
ResultStore, so its decisions are unit-tested with an in-memory bus and a fake store.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol

from services.collector.finality import Finaliser, FinalityStore
from services.collector.prometheus import CollectorMetrics
from services.common import logs
from services.common.broker import Broker, BusFactory, Delivery
from services.common.errors import BusError, DecodeError, StoreError, StoreUnavailable
from services.common.messages import RunEvent, RunResult, decode

if TYPE_CHECKING:
    from services.common.store import ResultRow

log = logs.get(__name__)

#: Results in flight per collector; they are small and storing is quick.
PREFETCH = 32
#: Seconds between queue-depth exports.
QUEUE_DEPTH_EVERY_S = 5.0
#: First pause before reconnecting after losing the broker or the results DB; doubles up to 30 s.
BACKOFF_S = 1.0


class ResultStore(FinalityStore, Protocol):
    """What the collector needs of the results DB (services.common.store.Store is one)."""

    def mark_running(self, event: RunEvent) -> None: ...

    def store_result(self, result: RunResult) -> None: ...

    def reachable(self) -> bool:
        """Whether the DB answers now (tells "DB away" from "DB refused this write")."""
        ...

    def recent_results(self, campaigns: int) -> "list[tuple[str, ResultRow]]": ...

    def close(self) -> None: ...


class Collector:
    """Stores what arrives on the results queue until stopped."""

    def __init__(self, *, connect: BusFactory, open_store: Callable[[], ResultStore], pools: tuple[str, ...] = (),
                 metrics: CollectorMetrics | None = None, backoff_s: float = BACKOFF_S,
                 reap_grace_s: float = 900.0):
        self.connect = connect
        #: Opens a connection to the results DB; StoreError when it cannot.
        self.open_store = open_store
        self.pools = pools
        self.metrics = metrics or CollectorMetrics()
        self.backoff_s = backoff_s
        self._next_depth_check = 0.0
        self.stopping = threading.Event()
        self.stored = 0
        #: Gives the runs of dead letters, and runs whose worker vanished, their final state.
        self.finaliser = Finaliser(grace_s=reap_grace_s)
        self._restored = False

    def stop(self) -> None:
        self.stopping.set()

    def run_forever(self) -> None:
        delay = self.backoff_s
        while not self.stopping.is_set():
            bus = self.connect("benchfleet collector")
            store: ResultStore | None = None
            try:
                store = self.open_store()
                if not self._restored:
                    self.metrics.restore(store.recent_results(self.metrics.max_campaigns))
                    self._restored = True
                bus.connect()
                bus.declare(self.pools)
                delay = self.backoff_s
                log.info("collector_consuming", queue=bus.names.results)
                opened = store
                bus.consume(bus.names.results, PREFETCH, lambda d: self._on_message(bus, opened, d), self.stopping.is_set,
                            on_tick=lambda: self._tick(bus, opened))
            except (BusError, StoreError) as e:
                # The unacked results go back to the queue when the bus closes; they wait there.
                log.warning("collector_connection_lost", error=f"{type(e).__name__}: {e}", retry_in_s=delay)
                self.stopping.wait(delay)
                delay = min(delay * 2, 30.0)
            finally:
                bus.close()
                if store is not None:
                    store.close()

    def _on_message(self, bus: Broker, store: ResultStore, d: Delivery) -> None:
        try:
            msg = decode(d.body, expect=(RunResult, RunEvent))
        except DecodeError as e:
            log.error("result_message_undecodable", reason=str(e))
            bus.dead_letter(d.body, f"undecodable result message: {e}", bus.names.results)
            bus.ack(d.delivery_tag)
            return
        try:
            if isinstance(msg, RunEvent):
                store.mark_running(msg)
            else:
                store.store_result(msg)
        except StoreError as e:
            if isinstance(e, StoreUnavailable) or not store.reachable():
                raise  # the DB is away: stop consuming and reconnect; the message waits in the queue
            # The DB is up but refuses this message (a value too long ...): retrying forever
            # would wedge every result behind it, so park it with the reason.
            log.error("result_not_storable", reason=str(e))
            bus.dead_letter(d.body, f"cannot store message: {e}", bus.names.results)
            bus.ack(d.delivery_tag)
            return
        if not isinstance(msg, RunEvent):
            self.stored += 1
            self.metrics.observe_result(msg)  # counts it as stored too
            log.info("result_stored", campaign_id=msg.campaign_id, run_id=msg.run_id, status=msg.status,
                     qps=round(msg.qps, 1))
        bus.ack(d.delivery_tag)

    def _tick(self, bus: Broker, store: ResultStore) -> None:
        self._queue_depths(bus)
        self.finaliser.tick(bus, store)

    def _queue_depths(self, bus: Broker) -> None:
        """Export queue depths every few seconds (a passive declare per queue)."""
        now = time.time()
        if now < self._next_depth_check:
            return
        self._next_depth_check = now + QUEUE_DEPTH_EVERY_S
        for queue in (bus.names.results, bus.names.dead, *(bus.names.runs_queue(p) for p in self.pools)):
            self.metrics.queue_depth(queue, bus.queue_depth(queue))
