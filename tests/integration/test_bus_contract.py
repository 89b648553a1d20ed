"""The Broker interface, the same checks against RabbitMQ and against the in-memory stub bus:
what the consumers' unit tests assume of the stub is what the real broker does."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import replace
from typing import Iterator

import pytest

from services.common.bus.broker import BusFactory
from services.common.bus.rabbitmq import DELIVERY_LIMIT, RabbitBus, rabbit_factory
from services.common.bus.control import ControlMessage
from services.common.errors import BusError
from services.common.bus.stub import StubBroker

pytestmark = pytest.mark.integration

POOL = "default"


@pytest.fixture(params=["rabbitmq", "stub"])
def connect(request, settings) -> Iterator[BusFactory]:
    namespace = f"bftest-{secrets.token_hex(3)}"
    if request.param == "stub":
        yield StubBroker(namespace).bus
        return
    request.getfixturevalue("rabbitmq")
    s = replace(settings, namespace=namespace)
    yield rabbit_factory(s)
    with RabbitBus(s) as bus:
        bus.delete_topology((POOL,))


def wait_for(predicate, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def depth(bus, queue: str) -> int:
    return bus.queue_depth(queue)


def test_publish_get_ack_and_depth(connect):
    """Published runs wait in their pool's queue; a first delivery is attempt 1; an ack removes it."""
    with connect("t") as bus:
        bus.declare((POOL,))
        q = bus.names.runs_queue(POOL)
        bus.publish(bus.names.runs_exchange, POOL, b"one")
        bus.publish_runs(POOL, [b"two", b"three"])
        # RabbitMQ may count a confirmed message in the queue a moment later.
        wait_for(lambda: depth(bus, q) == 3, "three runs queued")
        d = bus.get(q)
        assert (d.body, d.redelivered, d.attempt) == (b"one", False, 1)
        bus.ack(d.delivery_tag)
        wait_for(lambda: depth(bus, q) == 2, "two runs left")


def test_unroutable_publish_is_an_error(connect):
    """A run for a pool nobody declared is refused, never silently dropped."""
    with connect("t") as bus:
        bus.declare((POOL,))
        with pytest.raises(BusError, match="unroutable"):
            bus.publish(bus.names.runs_exchange, "nobody", b"x")


def test_requeues_are_counted_up_to_the_delivery_limit_then_dead_lettered(connect):
    """Each nack with requeue comes back redelivered with the next attempt number; past the
    delivery limit the queue itself dead-letters the message."""
    with connect("t") as bus:
        bus.declare((POOL,))
        q = bus.names.runs_queue(POOL)
        bus.publish(bus.names.runs_exchange, POOL, b"poison")
        attempts = []
        for _ in range(DELIVERY_LIMIT + 1):
            wait_for(lambda: depth(bus, q) == 1, "the message back in its queue")
            d = bus.get(q)
            attempts.append((d.attempt, d.redelivered))
            bus.nack(d.delivery_tag, requeue=True)
        assert attempts == [(1, False)] + [(n, True) for n in range(2, DELIVERY_LIMIT + 2)]
        wait_for(lambda: depth(bus, bus.names.dead) == 1, "the dead letter")
        dead = bus.get(bus.names.dead)
        assert dead.body == b"poison" and dead.headers["x-first-death-reason"] in ("delivery_limit", b"delivery_limit")
        assert depth(bus, q) == 0


def test_closing_returns_unacked_deliveries_as_redelivered(connect):
    """A consumer's connection that ends with a delivery unacked gives it back, flagged."""
    first = connect("a").connect()
    first.declare((POOL,))
    q = first.names.runs_queue(POOL)
    first.publish(first.names.runs_exchange, POOL, b"run")
    wait_for(lambda: depth(first, q) == 1, "the run queued")
    assert first.get(q).attempt == 1
    first.close()
    with connect("b") as second:
        wait_for(lambda: depth(second, q) == 1, "the run back")
        d = second.get(q)
        assert d.body == b"run" and d.redelivered and d.attempt == 2


def test_dead_letters_carry_the_reason_and_the_queue(connect):
    """dead_letter parks the body with the reason and the queue it came from."""
    with connect("t") as bus:
        bus.declare((POOL,))
        bus.dead_letter(b"bad", "undecodable run message: not JSON", "q.runs")
        wait_for(lambda: depth(bus, bus.names.dead) == 1, "the dead letter")
        d = bus.get(bus.names.dead)
        assert d.body == b"bad" and d.dead_letter_reason == "undecodable run message: not JSON"
        assert d.headers["x-benchfleet-queue"] in ("q.runs", b"q.runs")


def test_consume_and_an_ack_handed_over_from_another_thread(connect):
    """A delivery consumed on one thread and acked through call_threadsafe from another is gone
    for good: nothing comes back after the connection closes."""
    acked = threading.Event()
    with connect("t") as bus:
        bus.declare((POOL,))
        q = bus.names.runs_queue(POOL)
        bus.publish(bus.names.runs_exchange, POOL, b"run")

        def on_message(d):
            def later():
                bus.call_threadsafe(lambda: (bus.ack(d.delivery_tag), acked.set()))
            threading.Thread(target=later).start()

        deadline = time.monotonic() + 10
        bus.consume(q, 1, on_message, lambda: acked.is_set() or time.monotonic() > deadline)
        assert acked.is_set()
    with connect("t2") as bus:
        time.sleep(0.2)  # a delivery wrongly left unacked would be back by now
        assert depth(bus, q) == 0


def test_control_messages_reach_listeners_and_the_log_replays_them(connect):
    """A cancel reaches a connected listener; a reader connecting later replays it from the log
    (garbage in between is skipped), up to its own marker."""
    heard: list[ControlMessage] = []
    cancel = ControlMessage(action="cancel", campaign_id="c9", at=1.0)
    with connect("listener") as listener, connect("scheduler") as scheduler:
        listener.declare((POOL,))
        listener.subscribe_control(heard.append)
        scheduler.publish_control(cancel)
        scheduler.publish(scheduler.names.control, "", b"garbage")
        deadline = time.monotonic() + 10
        listener.consume(listener.names.runs_queue(POOL), 1, lambda d: None,
                         lambda: bool(heard) or time.monotonic() > deadline)
    assert heard == [cancel]
    replayed: list[ControlMessage] = []
    with connect("late") as late:
        n = late.replay_control_log("late", replayed.append, should_stop=lambda: False, timeout_s=10)
    assert n == 1 and replayed == [cancel]
