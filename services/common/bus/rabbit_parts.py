"""The parts link of a run split over load hosts, on RabbitMQ: the barrier signals of its parts go
through the parts exchange to an exclusive queue of each part's own (services/worker/parts/link.py).
It drives a RabbitBus's channel, so it lives beside it in the bus package."""

from __future__ import annotations

from typing import Callable

from services.common.bus.rabbitmq import RabbitBus, _as_bus_error
from services.common.bus.topology import Role
from services.common.config import Settings


class RabbitPartsLink:
    """A PartsLink (services/worker/parts/link.py) on a RabbitBus of its own: an exclusive,
    auto-deleted queue bound to the parts exchange under one run id, consumed with auto-ack
    (the signals are worth nothing once the barrier is over)."""

    def __init__(self, bus: RabbitBus):
        self.bus = bus
        self._got: list[bytes] = []

    def open(self, run_id: str) -> None:
        b = self.bus
        b.connect(attempts=3)
        n = b.names
        with _as_bus_error("joining the parts exchange"):
            b._ensure(f"exchange {n.parts!r}", lambda ch, passive: ch.exchange_declare(
                n.parts, exchange_type="direct", durable=True, passive=passive))
            ch = b._ch
            queue = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
            ch.queue_bind(queue, n.parts, routing_key=run_id)
            ch.basic_consume(queue, lambda _c, _m, _p, body: self._got.append(body), auto_ack=True)

    def send(self, run_id: str, body: bytes) -> None:
        self.bus.publish(self.bus.names.parts, run_id, body)

    def receive(self, timeout_s: float) -> list[bytes]:
        if not self._got:
            with _as_bus_error("hearing the parts"):
                self.bus._conn.process_data_events(time_limit=timeout_s)
        out, self._got = self._got, []
        return out

    def close(self) -> None:
        self.bus.close()


def rabbit_parts_factory(settings: Settings) -> Callable[[str], RabbitPartsLink]:
    """Makes the parts links of a worker (its broker user binds only private queues)."""
    return lambda name: RabbitPartsLink(RabbitBus(settings, name=name, role=Role.WORKER))
