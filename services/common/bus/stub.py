"""An in-memory broker for unit tests of the consumers, as dramatiq's StubBroker is for its
RabbitMQ broker: the benchfleet topology, unacked deliveries, requeues counted like a quorum
queue's, delivery limits, dead letters, the control fanout and its log, and lost connections.

It is beside the real-broker integration tests, never instead of them: it models what the
consumers rely on, as measured on the RabbitMQ the tests run against (3.10), and no more.
Quorum queues set ``x-delivery-count`` on every delivery (0 the first time) and count every
return, by nack or by a lost connection; a message returned more often than the delivery limit
is dead-lettered with ``x-first-death-reason: delivery_limit``. Returned messages come first.

    broker = StubBroker()
    worker = Worker(settings, pool="default", connect=broker.bus, ...)
    broker.bus("test").connect().publish(...)
    broker.join(broker.names.runs_queue("default"))   # every message acked or dead
"""

from __future__ import annotations

import collections
import itertools
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping

from services.common.bus.broker import (DELIVERY_COUNT_HEADER, QUEUE_HEADER, REASON_HEADER, SENDER_HEADER, Broker, Delivery,
                                         Names)
from services.common.config import MAX_RUN_ATTEMPTS
from services.common.bus.control import SYNC_HEADER, ControlMessage, read_control, read_log_entry
from services.common.errors import BusError, DecodeError, Unroutable

#: Seconds an idle ``consume`` waits for something to happen before it checks ``should_stop``.
IDLE_WAIT_S = 0.02


@dataclass
class _Message:
    body: bytes
    headers: dict[str, object]
    returns: int = 0
    #: The publishing bus's user, as RabbitMQ validates a message's user_id.
    user_id: str | None = None
    #: The exchange it was published through (a stream keeps it with each message).
    exchange: str = ""


@dataclass
class _Queue:
    name: str
    kind: Literal["quorum", "classic", "stream"]
    dead_letter_exchange: str | None = None
    delivery_limit: int | None = None
    owner: "StubBus | None" = None
    ready: collections.deque[_Message] = field(default_factory=collections.deque)
    #: A stream's messages: read from any offset, never removed.
    log: list[_Message] = field(default_factory=list)


@dataclass
class _Exchange:
    kind: Literal["fanout", "direct"]
    bindings: list[tuple[str, str]] = field(default_factory=list)  # (queue, routing key)


@dataclass
class _Unacked:
    queue: str
    message: _Message


class StubBroker:
    """The in-memory broker shared by every StubBus made from it (one per 'connection')."""

    def __init__(self, namespace: str = "benchfleet", *, delivery_limit: int = MAX_RUN_ATTEMPTS):
        self.names = Names(namespace)
        self.delivery_limit = delivery_limit
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._queues: dict[str, _Queue] = {}
        self._exchanges: dict[str, _Exchange] = {}
        self._connections: list[StubBus] = []
        self._lose_after: int | None = None
        self._refuse = 0
        self._private = itertools.count(1)
        #: Connections made so far (a reconnect makes a new one).
        self.connects = 0
        #: Consumers now on each queue (what a passive declare reports).
        self._consumers: collections.Counter[str] = collections.Counter()

    def bus(self, name: str = "stub", user: str = "guest") -> "StubBus":
        """An unconnected bus on this broker, publishing as ``user``: a ``BusFactory`` for the services."""
        return StubBus(self, name, user)

    # -- faults -----------------------------------------------------------------------------
    def lose_connections(self, *, after_publishes: int = 0, refuse: int = 0) -> None:
        """Drop every connection now, or at the publish ``after_publishes`` from now (that
        publish fails; a transaction in flight is rolled back); then refuse the next ``refuse``
        connection attempts, as a restarting broker does. Unacked deliveries go back to their
        queues, counted as returns."""
        with self._lock:
            self._refuse = refuse
            if after_publishes > 0:
                self._lose_after = after_publishes
                return
            self._drop_all()

    def _drop_all(self) -> None:
        self._lose_after = None
        for conn in list(self._connections):
            conn._drop(lost=True)

    def _count_publish(self) -> None:
        """Called for each message published; trips a loss planned by ``lose_connections``."""
        if self._lose_after is None:
            return
        self._lose_after -= 1
        if self._lose_after <= 0:
            self._drop_all()
            raise BusError("connection lost (stub broker)")

    # -- what a test looks at ---------------------------------------------------------------
    def messages(self, queue: str) -> list[Delivery]:
        """The messages ready in ``queue``, oldest first, as a consumer would receive them
        (without taking them; the tag is 0)."""
        with self._lock:
            q = self._queue(queue)
            return [self._delivery(q, m, 0) for m in (q.log if q.kind == "stream" else q.ready)]

    def unacked(self, queue: str | None = None) -> int:
        """Deliveries taken but neither acked nor nacked, of ``queue`` or of every queue."""
        with self._lock:
            return sum(1 for c in self._connections for u in c._unacked.values() if queue in (None, u.queue))

    def join(self, queue: str, timeout: float = 5.0) -> None:
        """Wait until ``queue`` has no message ready and none unacked; TimeoutError if not."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._queue(queue).ready or self.unacked(queue):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{queue}: {len(self._queue(queue).ready)} ready, "
                                       f"{self.unacked(queue)} unacked after {timeout} s")
                self._changed.wait(min(left, 0.05))

    # -- the broker's own work (called under the lock) --------------------------------------
    def _queue(self, name: str) -> _Queue:
        q = self._queues.get(name)
        if q is None:
            raise BusError(f"NOT_FOUND - no queue {name!r} (stub broker)")
        return q

    def _declare_queue(self, name: str, kind: Literal["quorum", "classic", "stream"], dead_letter_exchange: str | None = None,
                       delivery_limit: int | None = None, owner: "StubBus | None" = None) -> None:
        if name not in self._queues:
            self._queues[name] = _Queue(name, kind, dead_letter_exchange, delivery_limit, owner)

    def _declare_exchange(self, name: str, kind: Literal["fanout", "direct"]) -> None:
        self._exchanges.setdefault(name, _Exchange(kind))

    def _bind(self, queue: str, exchange: str, key: str = "") -> None:
        ex = self._exchanges[exchange]
        if (queue, key) not in ex.bindings:
            ex.bindings.append((queue, key))

    def _route(self, exchange: str, key: str) -> list[_Queue]:
        ex = self._exchanges.get(exchange)
        if ex is None:
            raise BusError(f"NOT_FOUND - no exchange {exchange!r} (stub broker)")
        return [self._queues[q] for q, k in ex.bindings if q in self._queues and (ex.kind == "fanout" or k == key)]

    def _enqueue(self, q: _Queue, message: _Message, *, first: bool = False) -> None:
        if q.kind == "stream":
            q.log.append(message)
        elif first:
            q.ready.appendleft(message)
        else:
            q.ready.append(message)
        self._changed.notify_all()

    def _give_back(self, queue: str, message: _Message) -> None:
        """A delivery returned (nack with requeue, or its connection lost): counted, and
        dead-lettered once returned more often than the queue's delivery limit."""
        q = self._queues.get(queue)
        if q is None:
            return
        message.returns += 1
        if q.delivery_limit is not None and message.returns > q.delivery_limit:
            self._dead_letter_by_queue(q, message, "delivery_limit")
        else:
            self._enqueue(q, message, first=True)

    def _dead_letter_by_queue(self, q: _Queue, message: _Message, reason: str) -> None:
        if q.dead_letter_exchange is None:
            return  # dropped, as RabbitMQ does without a dead-letter exchange
        headers = {**message.headers, "x-first-death-reason": reason, "x-first-death-queue": q.name}
        for target in self._route(q.dead_letter_exchange, ""):
            self._enqueue(target, _Message(message.body, headers, user_id=message.user_id))

    @staticmethod
    def _delivery(q: _Queue, m: _Message, tag: int) -> Delivery:
        headers = dict(m.headers)
        if q.kind == "quorum":
            headers[DELIVERY_COUNT_HEADER] = m.returns
        return Delivery(m.body, tag, m.returns > 0, headers, "", user_id=m.user_id)


class StubBus(Broker):
    """One connection to a StubBroker, with the Broker interface the services use."""

    def __init__(self, broker: StubBroker, name: str = "stub", user: str = "guest"):
        self.broker = broker
        self.name = name
        #: The broker user it connects as: every message it publishes carries it (user_id).
        self.user = user
        self.names = broker.names
        self._open = False
        self._lost = False
        self._tags = itertools.count(1)
        self._unacked: dict[int, _Unacked] = {}
        self._callbacks: collections.deque[Callable[[], None]] = collections.deque()
        self._control: tuple[str, Callable[[ControlMessage], None], Callable[[bytes], None] | None] | None = None

    # -- connection -------------------------------------------------------------------------
    def connect(self, attempts: int | None = None) -> "StubBus":
        b = self.broker
        with b._lock:
            if b._refuse > 0:
                b._refuse -= 1
                raise BusError("cannot connect to the stub broker: connection refused")
            self._open, self._lost = True, False
            b._connections.append(self)
            b.connects += 1
        return self

    def close(self) -> None:
        with self.broker._lock:
            self._drop(lost=False)

    def _drop(self, *, lost: bool) -> None:
        """The connection ends: its unacked deliveries go back, its private queues go away."""
        b = self.broker
        if self in b._connections:
            b._connections.remove(self)
        for u in self._unacked.values():
            b._give_back(u.queue, u.message)
        self._unacked.clear()
        self._callbacks.clear()
        for name in [n for n, q in b._queues.items() if q.owner is self]:
            del b._queues[name]
        self._control = None
        self._lost = self._lost or (lost and self._open)
        self._open = False
        b._changed.notify_all()

    def __enter__(self) -> "StubBus":
        return self.connect() if not self._open else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self) -> None:
        if not self._open:
            raise BusError("connection lost (stub broker)" if self._lost else "not connected to the stub broker")

    # -- topology ---------------------------------------------------------------------------
    def declare(self, pools: tuple[str, ...] = ("default",)) -> None:
        b, n = self.broker, self.names
        with b._lock:
            self._check()
            b._declare_exchange(n.dead, "fanout")
            b._declare_queue(n.dead, "quorum")
            b._bind(n.dead, n.dead)
            b._declare_queue(n.dead_watch, "quorum")
            b._bind(n.dead_watch, n.dead)
            b._declare_exchange(n.results_exchange, "fanout")
            b._declare_queue(n.results, "quorum", n.dead, b.delivery_limit)
            b._bind(n.results, n.results_exchange)
            b._declare_exchange(n.runs_exchange, "direct")
            for pool in pools:
                b._declare_queue(n.runs_queue(pool), "quorum", n.dead, b.delivery_limit)
                b._bind(n.runs_queue(pool), n.runs_exchange, pool)

    def _declare_control_log(self) -> None:
        b, n = self.broker, self.names
        b._declare_exchange(n.control, "fanout")
        b._declare_exchange(n.control_sync, "fanout")
        b._declare_exchange(n.definitions, "fanout")
        b._declare_queue(n.control_log, "stream")
        b._bind(n.control_log, n.control)
        b._bind(n.control_log, n.control_sync)
        b._bind(n.control_log, n.definitions)

    # -- publishing -------------------------------------------------------------------------
    def publish(self, exchange: str, routing_key: str, body: bytes, headers: Mapping[str, object] | None = None) -> None:
        b = self.broker
        with b._lock:
            self._check()
            queues = b._route(exchange, routing_key)
            b._count_publish()
            if not queues:
                raise Unroutable(f"message to {exchange!r} with key {routing_key!r} was unroutable (no queue bound)")
            for q in queues:
                b._enqueue(q, _Message(body, dict(headers or {}), exchange=exchange, user_id=self.user))

    def publish_runs(self, pool: str, bodies: list[bytes]) -> None:
        b = self.broker
        with b._lock:
            try:
                self._check()
                staged = []
                for body in bodies:
                    # Like the AMQP transaction: unroutable runs are dropped, not refused.
                    staged += [(q, body) for q in b._route(self.names.runs_exchange, pool)]
                    b._count_publish()
            except BusError as e:
                raise BusError(f"publishing {len(bodies)} runs to pool {pool!r} failed, none were published: {e}") from None
            for q, body in staged:
                b._enqueue(q, _Message(body, {}, user_id=self.user))

    def publish_result(self, body: bytes) -> None:
        self.publish(self.names.results_exchange, "", body)

    def dead_letter(self, body: bytes, reason: str, queue: str, sender: str | None = None) -> None:
        headers: dict[str, object] = {REASON_HEADER: reason[:1000], QUEUE_HEADER: queue}
        if sender is not None:
            headers[SENDER_HEADER] = sender
        self.publish(self.names.dead, "", body, headers=headers)

    # -- consuming --------------------------------------------------------------------------
    def queue_depth(self, queue: str) -> int:
        with self.broker._lock:
            self._check()
            q = self.broker._queues.get(queue)  # like RabbitMQ's: 0 for a queue not declared
            return 0 if q is None or q.kind == "stream" else len(q.ready)

    def consumer_count(self, queue: str) -> int:
        with self.broker._lock:
            self._check()
            return self.broker._consumers[queue] if queue in self.broker._queues else 0

    def _take(self, queue: str) -> Delivery | None:
        b = self.broker
        with b._lock:
            self._check()
            q = b._queue(queue)
            if not q.ready:
                return None
            message = q.ready.popleft()
            tag = next(self._tags)
            self._unacked[tag] = _Unacked(queue, message)
            return b._delivery(q, message, tag)

    def get(self, queue: str) -> Delivery | None:
        return self._take(queue)

    def ack(self, tag: int) -> None:
        with self.broker._lock:
            self._settle(tag)
            self.broker._changed.notify_all()

    def nack(self, tag: int, requeue: bool) -> None:
        b = self.broker
        with b._lock:
            u = self._settle(tag)
            if requeue:
                b._give_back(u.queue, u.message)
            elif (q := b._queues.get(u.queue)) is not None:
                b._dead_letter_by_queue(q, u.message, "rejected")
            b._changed.notify_all()

    def _settle(self, tag: int) -> _Unacked:
        self._check()
        u = self._unacked.pop(tag, None)
        if u is None:
            raise BusError(f"PRECONDITION_FAILED - unknown delivery tag {tag} (stub broker)")
        return u

    def consume(self, queue: str, prefetch: int, on_message: Callable[[Delivery], None],
                should_stop: Callable[[], bool], on_tick: Callable[[], None] | None = None) -> None:
        with self.broker._lock:
            self._check()
            self.broker._queue(queue)
            self.broker._consumers[queue] += 1
        try:
            while not should_stop():
                busy = self._serve()
                with self.broker._lock:
                    self._check()
                    mine = sum(1 for u in self._unacked.values() if u.queue == queue)
                delivery = self._take(queue) if mine < prefetch else None
                if delivery is not None:
                    on_message(delivery)
                    busy = True
                if on_tick is not None:
                    on_tick()
                if not busy:
                    with self.broker._changed:
                        self.broker._changed.wait(IDLE_WAIT_S)
        finally:
            with self.broker._lock:
                self.broker._consumers[queue] -= 1

    def _serve(self) -> bool:
        """Run what other threads handed over and deliver control messages, on this thread (as
        pika's process_data_events does); whether there was anything to do."""
        with self.broker._lock:
            self._check()
            callbacks = list(self._callbacks)
            self._callbacks.clear()
            controls: list[tuple[str, bytes]] = []
            on_control: Callable[[ControlMessage], None] | None = None
            on_definition: Callable[[bytes], None] | None = None
            if self._control is not None:
                queue, on_control, on_definition = self._control
                ready = self.broker._queue(queue).ready
                # Only the control exchange speaks for the scheduler, as in the real bus; the
                # definitions exchange carries the scheduler's target definitions.
                controls = [(m.exchange, m.body) for m in ready
                            if m.exchange == self.names.control or m.exchange == self.names.definitions]  # auto-acked
                ready.clear()
        for fn in callbacks:
            fn()
        for exchange, body in controls:
            if exchange == self.names.definitions:
                if on_definition is not None:
                    on_definition(body)
            elif (msg := read_control(body, "control")) is not None and on_control is not None:
                on_control(msg)
        return bool(callbacks or controls)

    def call_threadsafe(self, fn: Callable[[], None]) -> None:
        with self.broker._lock:
            self._check()
            self._callbacks.append(fn)
            self.broker._changed.notify_all()

    # -- control ----------------------------------------------------------------------------
    def publish_control(self, message: ControlMessage) -> None:
        with self.broker._lock:
            self._check()
            self._declare_control_log()
        self.publish(self.names.control, "", message.encode())

    def publish_definitions(self, bodies: list[bytes]) -> None:
        with self.broker._lock:
            self._check()
            self._declare_control_log()
        for body in bodies:
            self.publish(self.names.definitions, "", body)

    def subscribe_control(self, on_control: Callable[[ControlMessage], None],
                          on_definition: Callable[[bytes], None] | None = None) -> None:
        b = self.broker
        with b._lock:
            self._check()
            self._declare_control_log()
            queue = f"amq.gen-stub-{next(b._private)}"
            b._declare_queue(queue, "classic", owner=self)
            b._bind(queue, self.names.control)
            if on_definition is not None:
                b._bind(queue, self.names.definitions)
            self._control = (queue, on_control, on_definition)

    def replay_control_log(self, reader: str, on_control: Callable[[ControlMessage], None], *,
                           should_stop: Callable[[], bool], timeout_s: float,
                           on_definition: Callable[[bytes], None] | None = None) -> int:
        b = self.broker
        token = f"{reader}-{secrets.token_hex(8)}"
        with b._lock:
            self._check()
            self._declare_control_log()
        self.publish(self.names.control_sync, "", b"", headers={SYNC_HEADER: token})
        with b._lock:
            entries = list(b._queue(self.names.control_log).log)
        replayed = 0
        for m in entries:
            if should_stop():
                break
            try:
                kind, msg = read_log_entry(m.exchange, m.headers, m.body, token, control_exchange=self.names.control,
                                           sync_exchange=self.names.control_sync,
                                           definitions_exchange=self.names.definitions)
            except DecodeError:
                read_control(m.body, "control_log")  # logs it, as the real replay does
                continue
            if kind == "definition":
                if on_definition is not None:
                    on_definition(m.body)
            elif kind == "end":
                break
            if msg is not None:
                replayed += 1
                on_control(msg)
        return replayed
