"""What the services need of the message broker, as an interface: the consumers, the scheduler
and the tests depend on this, never on pika.

Two implementations: ``services.common.bus.rabbitmq.RabbitBus`` (RabbitMQ, the only module that imports
pika) and ``services.common.bus.stub.StubBus`` (in memory, for unit tests of consumer logic; it
sits beside the real-broker integration tests, never instead of them).

One Broker object is one connection and must be used from one thread only, except
``call_threadsafe``; a thread that publishes gets a Broker of its own from a ``BusFactory``.
Every broker failure (unreachable, connection lost, publish refused) raises BusError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from services.common.bus.control import ControlMessage

#: Header of a dead letter: why it was parked (at most 1000 characters).
REASON_HEADER = "x-benchfleet-reason"
#: Header of a dead letter: the queue it was taken from.
QUEUE_HEADER = "x-benchfleet-queue"
#: The broker user that sent a message the collector parks, in the dead letter the collector
#: publishes (its own user_id is the collector's): only read from the collector's dead letters.
SENDER_HEADER = "x-benchfleet-sender"
#: Header a quorum queue sets on each delivery: how often the message was returned before.
DELIVERY_COUNT_HEADER = "x-delivery-count"


@dataclass(frozen=True)
class Names:
    """Exchange and queue names under the settings' namespace (default "benchfleet"; tests use
    their own). Runs are routed by worker pool so a campaign can be sent to the workers of one
    host or rack; results and the dead letters have one queue each."""

    namespace: str = "benchfleet"

    @property
    def runs_exchange(self) -> str:
        return f"{self.namespace}.runs"

    @property
    def results(self) -> str:
        """The results queue (the collector consumes it). Also the name of the results exchange
        of earlier versions, which the collector deletes (services/common/bus/topology.py)."""
        return f"{self.namespace}.results"

    @property
    def results_exchange(self) -> str:
        """Fanout exchange the workers publish results and run events to, bound to the results
        queue. Named apart from the queue: RabbitMQ grants permissions by name, and a worker
        that may publish results must not be able to read (consume, purge) the queue."""
        return f"{self.namespace}.results.x"

    @property
    def dead(self) -> str:
        return f"{self.namespace}.dead"

    @property
    def control(self) -> str:
        """Fanout exchange of control messages (cancel a campaign) that every worker hears."""
        return f"{self.namespace}.control"

    @property
    def control_log(self) -> str:
        """Stream queue bound to the control exchange: every control message, replayed by each
        worker when it connects (see services/common/bus/control.py)."""
        return f"{self.namespace}.control.log"

    @property
    def control_sync(self) -> str:
        """Fanout exchange bound to the control log only: where a worker appends its sync marker."""
        return f"{self.namespace}.control.sync"

    @property
    def definitions(self) -> str:
        """Fanout exchange bound to the control log, where only the scheduler publishes: the
        campaigns' target definitions, which run orders name by digest."""
        return f"{self.namespace}.definitions"

    @property
    def dead_watch(self) -> str:
        """Queue bound to the dead-letter exchange beside the dead queue: the collector reads it
        to give the runs of dead letters their final state; the dead queue keeps them for people."""
        return f"{self.namespace}.dead.watch"

    @property
    def parts(self) -> str:
        """Direct exchange of the barrier signals between the workers of one run's parts (spec
        ``load_hosts``), routed by run id to each part worker's private queue."""
        return f"{self.namespace}.parts"

    def runs_queue(self, pool: str) -> str:
        return f"{self.namespace}.runs.{pool}"


@dataclass(frozen=True)
class Delivery:
    """A received message: its body, headers and the tag to ack it with."""

    body: bytes
    delivery_tag: int
    redelivered: bool
    headers: Mapping[str, object] = field(default_factory=dict)
    routing_key: str = ""
    #: The broker user that published it, as RabbitMQ validated it (every publish of ours sets
    #: ``user_id`` to its connection's user, which the broker checks); None when unset.
    user_id: str | None = None

    @property
    def attempt(self) -> int:
        """Which delivery of this message this is, 1 for the first. The quorum queue counts
        returned deliveries in a header; a delivery returned because its consumer's connection
        died may not be counted by every broker version, but it is flagged redelivered."""
        try:
            attempt = int(self.headers.get(DELIVERY_COUNT_HEADER, 0) or 0) + 1  # type: ignore[call-overload]
        except (TypeError, ValueError):
            attempt = 1
        return max(attempt, 2) if self.redelivered else attempt

    @property
    def dead_letter_reason(self) -> str | None:
        """Why a dead letter was parked (``dead_letter``'s reason), None for other messages."""
        reason = self.headers.get(REASON_HEADER)
        return reason.decode(errors="replace") if isinstance(reason, bytes) else (None if reason is None else str(reason))


class Broker(Protocol):
    """One connection to the broker with the benchfleet topology on it."""

    names: Names
    #: The broker user it connects as; what it publishes carries it as ``user_id``.
    user: str

    def connect(self, attempts: int | None = None) -> "Broker":
        """Connect, trying up to ``attempts`` times (None: the implementation's bounded retries
        with backoff); BusError when the broker stays away."""
        ...

    def close(self) -> None:
        """Close; unacked deliveries go back to their queue. Never raises."""
        ...

    def __enter__(self) -> "Broker": ...

    def __exit__(self, *exc: object) -> None: ...

    def declare(self, pools: tuple[str, ...] = ("default",)) -> None:
        """Declare the exchanges and durable queues (runs of ``pools``, results, dead letters);
        safe to repeat from every service."""
        ...

    def publish(self, exchange: str, routing_key: str, body: bytes, headers: Mapping[str, object] | None = None) -> None:
        """Publish persistently and wait for the broker's confirm; BusError when it is
        unroutable or refused, so the caller never believes a lost message was sent."""
        ...

    def publish_runs(self, pool: str, bodies: list[bytes]) -> None:
        """Publish a campaign's runs all-or-nothing: on BusError none of them is queued."""
        ...

    def publish_result(self, body: bytes) -> None:
        """Publish a result or run event for the collector (confirmed)."""
        ...

    def dead_letter(self, body: bytes, reason: str, queue: str, sender: str | None = None) -> None:
        """Park a message we cannot handle in the dead-letter queue, with the reason and the
        queue it came from in its headers (REASON_HEADER, QUEUE_HEADER), and the broker user
        that sent it when it is someone else's (SENDER_HEADER)."""
        ...

    def consume(self, queue: str, prefetch: int, on_message: Callable[[Delivery], None],
                should_stop: Callable[[], bool], on_tick: Callable[[], None] | None = None) -> None:
        """Deliver messages to ``on_message`` on this thread until ``should_stop()``; the
        callback acks or nacks. ``on_tick`` runs between deliveries (about twice a second).
        An exception from a callback ends the consuming and propagates; the unacked
        deliveries go back to the queue when the caller closes the connection."""
        ...

    def ack(self, tag: int) -> None: ...

    def nack(self, tag: int, requeue: bool) -> None:
        """Refuse a delivery: back to the queue (counted by its delivery limit), or dropped."""
        ...

    def call_threadsafe(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on this connection's thread, from any thread (acks after a run)."""
        ...

    def queue_depth(self, queue: str) -> int:
        """Messages ready in ``queue`` (not counting unacked deliveries); 0 when it is not declared."""
        ...

    def consumer_count(self, queue: str) -> int:
        """Consumers now attached to ``queue`` (workers of a pool on its runs queue); 0 when it
        is not declared."""
        ...

    def get(self, queue: str) -> Delivery | None:
        """Take one message without a consumer (tests, tools); ack it. None when empty."""
        ...

    def publish_control(self, message: ControlMessage) -> None:
        """Tell every worker (connected now, or replaying the control log later), confirmed."""
        ...

    def publish_definitions(self, bodies: list[bytes]) -> None:
        """Append target definitions to the control log through the definitions exchange,
        confirmed, before the runs that name them are published."""
        ...

    def subscribe_control(self, on_control: Callable[[ControlMessage], None],
                          on_definition: Callable[[bytes], None] | None = None) -> None:
        """From now on, control messages published to every worker reach ``on_control`` on
        this thread while it consumes (undecodable ones are logged and dropped), and the bodies
        published to the definitions exchange reach ``on_definition``, in the order they came."""
        ...

    def replay_control_log(self, reader: str, on_control: Callable[[ControlMessage], None], *,
                           should_stop: Callable[[], bool], timeout_s: float,
                           on_definition: Callable[[bytes], None] | None = None) -> int:
        """Feed every control message of the control log, oldest first, to ``on_control`` (and
        the definitions' bodies to ``on_definition``), up to a marker this reader appends now;
        returns how many control messages. BusError when the marker does not come back within
        ``timeout_s`` (the caller reconnects)."""
        ...


#: Makes an unconnected Broker whose connection carries ``name`` (shown by the broker's tools).
BusFactory = Callable[[str], Broker]
