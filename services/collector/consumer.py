"""The collector's consumer: results and run events from the bus into the results DB.

A message is acked only after it is stored, so a collector that stops or loses its DB leaves
the rest waiting in the durable queue; storing is an upsert by run id, so redeliveries are
harmless.
"""

from __future__ import annotations

import threading
import time

from services.collector.prometheus import CollectorMetrics
from services.common import logs
from services.common.bus import CONNECTION_ERRORS, Bus, BusError, Delivery
from services.common.config import Settings
from services.common.messages import DecodeError, RunEvent, RunResult, decode
from services.common.store import Store, StoreError

log = logs.get(__name__)

#: Results in flight per collector; they are small and storing is quick.
PREFETCH = 32
#: Seconds between queue-depth exports.
QUEUE_DEPTH_EVERY_S = 5.0


class Collector:
    """Stores what arrives on the results queue until stopped."""

    def __init__(self, settings: Settings, *, pools: tuple[str, ...] = (), metrics: CollectorMetrics | None = None):
        self.settings = settings
        self.pools = pools
        self.metrics = metrics or CollectorMetrics()
        self._next_depth_check = 0.0
        self.stopping = threading.Event()
        self.stored = 0
        self._restored = False

    def stop(self) -> None:
        self.stopping.set()

    def run_forever(self) -> None:
        delay = 1.0
        while not self.stopping.is_set():
            bus = Bus(self.settings, name="benchfleet collector")
            store = Store(self.settings)
            try:
                store.open()
                if not self._restored:
                    self.metrics.restore(store.recent_results(self.metrics.max_campaigns))
                    self._restored = True
                bus.connect()
                bus.declare(self.pools)
                delay = 1.0
                log.info("collector_consuming", queue=bus.names.results)
                bus.consume(bus.names.results, PREFETCH, lambda d: self._on_message(bus, store, d), self.stopping.is_set,
                            on_tick=self._queue_depths)
            except (BusError, StoreError, *CONNECTION_ERRORS) as e:
                log.warning("collector_connection_lost", error=f"{type(e).__name__}: {e}", retry_in_s=delay)
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
            finally:
                bus.close()
                store.close()

    def _on_message(self, bus: Bus, store: Store, d: Delivery) -> None:
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
            if not store.reachable():
                raise  # the DB is away: reconnect, the message waits in the queue
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

    def _queue_depths(self, bus: Bus) -> None:
        """Export queue depths every few seconds (a passive declare per queue)."""
        now = time.time()
        if now < self._next_depth_check:
            return
        self._next_depth_check = now + QUEUE_DEPTH_EVERY_S
        for queue in (bus.names.results, bus.names.dead, *(bus.names.runs_queue(p) for p in self.pools)):
            self.metrics.queue_depth(queue, bus.queue_depth(queue))
