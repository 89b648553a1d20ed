"""RabbitMQ: the topology, confirmed publishing and consuming, with bounded reconnects.

One Bus owns one pika BlockingConnection and must be used from one thread only; a worker
thread that publishes gets a Bus of its own (pika connections are not thread-safe).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import pika
import pika.exceptions as px

from services.common import logs
from services.common.config import MAX_RUN_ATTEMPTS, Settings
from services.common.errors import BusError


#: Exchange and queue names, under the settings' namespace (default "benchfleet"; tests use
#: their own). Runs are routed by worker pool so a campaign can be sent to the workers of one
#: host or rack; results and the dead letters have one queue each.
@dataclass(frozen=True)
class Names:
    namespace: str = "benchfleet"

    @property
    def runs_exchange(self) -> str:
        return f"{self.namespace}.runs"

    @property
    def results(self) -> str:
        return f"{self.namespace}.results"

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
        worker when it connects (see services/common/control.py)."""
        return f"{self.namespace}.control.log"

    @property
    def control_sync(self) -> str:
        """Fanout exchange bound to the control log only: where a worker appends its sync marker."""
        return f"{self.namespace}.control.sync"

    def runs_queue(self, pool: str) -> str:
        return f"{self.namespace}.runs.{pool}"

#: A message redelivered this many times (a consumer crashing on it) is dead-lettered by the
#: quorum queue itself instead of looping forever.
DELIVERY_LIMIT = MAX_RUN_ATTEMPTS

#: Reconnect attempts and the cap of the exponential backoff between them, in seconds.
CONNECT_ATTEMPTS = 8
BACKOFF_CAP_S = 8.0

log = logs.get(__name__)


def connection_parameters(settings: Settings) -> pika.URLParameters:
    """pika parameters from the settings: heartbeat, and TLS when the URL is amqps:// or a CA
    (and optionally a client certificate) is configured."""
    params = pika.URLParameters(settings.amqp_url)
    params.heartbeat = settings.heartbeat
    params.blocked_connection_timeout = 60
    if settings.amqp_tls_ca or settings.amqp_tls_cert or settings.amqp_url.startswith("amqps://"):
        import ssl

        ctx = ssl.create_default_context(cafile=settings.amqp_tls_ca or None)
        if settings.amqp_tls_cert:
            ctx.load_cert_chain(settings.amqp_tls_cert, settings.amqp_tls_key or None)
        params.ssl_options = pika.SSLOptions(ctx, params.host)
    return params



def _quorum_args(dead_exchange: str) -> dict[str, object]:
    return {"x-queue-type": "quorum", "x-dead-letter-exchange": dead_exchange, "x-delivery-limit": DELIVERY_LIMIT}


@dataclass(frozen=True)
class Delivery:
    """A received message: its body, headers and the tag to ack it with."""

    body: bytes
    delivery_tag: int
    redelivered: bool
    headers: dict[str, object]
    routing_key: str


class Bus:
    """A connection to RabbitMQ with the benchfleet topology declared on it."""

    def __init__(self, settings: Settings, *, name: str = "benchfleet"):
        self.settings = settings
        self.name = name
        self.names = Names(settings.namespace)
        self.connection: pika.BlockingConnection | None = None
        self.channel: pika.adapters.blocking_connection.BlockingChannel | None = None

    # -- connection -------------------------------------------------------------------------
    def connect(self, attempts: int = CONNECT_ATTEMPTS) -> "Bus":
        """Connect with exponential backoff; raise BusError after ``attempts`` failures."""
        params = connection_parameters(self.settings)
        params.client_properties = {"connection_name": self.name}
        delay = 0.5
        for attempt in range(1, attempts + 1):
            try:
                self.connection = pika.BlockingConnection(params)
                self.channel = self.connection.channel()
                self.channel.confirm_delivery()
                return self
            except (px.AMQPConnectionError, OSError) as e:
                if attempt == attempts:
                    raise BusError(
                        f"cannot connect to RabbitMQ at {self.settings.redacted_amqp_url()} after "
                        f"{attempts} attempts: {type(e).__name__} {e}"
                    ) from None
                log.warning("bus_connect_retry", attempt=attempt, delay_s=delay, error=type(e).__name__)
                time.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP_S)
        raise AssertionError("unreachable")

    def close(self) -> None:
        try:
            if self.connection is not None and self.connection.is_open:
                self.connection.close()
        except Exception:  # closing a broken connection must never mask the real error
            pass
        self.connection = self.channel = None

    def __enter__(self) -> "Bus":
        return self.connect() if self.connection is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ch(self) -> "pika.adapters.blocking_connection.BlockingChannel":
        if self.channel is None:
            raise BusError("not connected")
        return self.channel

    # -- topology ---------------------------------------------------------------------------
    def declare(self, pools: tuple[str, ...] = ("default",)) -> None:
        """Declare exchanges and durable quorum queues; safe to repeat from every service."""
        ch, n = self.ch, self.names
        ch.exchange_declare(n.dead, exchange_type="fanout", durable=True)
        ch.queue_declare(n.dead, durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_bind(n.dead, n.dead)
        ch.exchange_declare(n.results, exchange_type="fanout", durable=True)
        ch.queue_declare(n.results, durable=True, arguments=_quorum_args(n.dead))
        ch.queue_bind(n.results, n.results)
        ch.exchange_declare(n.runs_exchange, exchange_type="direct", durable=True)
        for pool in pools:
            ch.queue_declare(n.runs_queue(pool), durable=True, arguments=_quorum_args(n.dead))
            ch.queue_bind(n.runs_queue(pool), n.runs_exchange, routing_key=pool)

    # -- publishing -------------------------------------------------------------------------
    def publish(self, exchange: str, routing_key: str, body: bytes, headers: dict[str, object] | None = None) -> None:
        """Publish persistently and wait for the broker's confirm; raise BusError if it is
        unroutable or nacked, so the caller never believes a lost message was sent."""
        props = pika.BasicProperties(
            delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json", headers=headers or {}
        )
        try:
            self.ch.basic_publish(exchange, routing_key, body, properties=props, mandatory=True)
        except px.UnroutableError:
            raise BusError(f"message to {exchange!r} with key {routing_key!r} was unroutable (no queue bound)") from None
        except px.NackError:
            raise BusError(f"broker refused (nacked) a message to {exchange!r}") from None

    def publish_runs(self, pool: str, bodies: list[bytes]) -> None:
        """Publish a campaign's runs all-or-nothing, in one AMQP transaction on a channel of
        its own: a failure part-way leaves no run of the campaign in the queue."""
        assert self.connection is not None
        ch = self.connection.channel()
        props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json")
        try:
            ch.tx_select()
            for body in bodies:
                ch.basic_publish(self.names.runs_exchange, pool, body, properties=props)
            ch.tx_commit()
        except Exception as e:
            try:
                ch.tx_rollback()
            except Exception:  # the channel may be gone with the error; nothing was committed
                pass
            raise BusError(f"publishing {len(bodies)} runs to pool {pool!r} failed, none were published: {e}") from None
        finally:
            try:
                ch.close()
            except Exception:
                pass

    def publish_result(self, body: bytes) -> None:
        self.publish(self.names.results, "", body)

    def dead_letter(self, body: bytes, reason: str, queue: str) -> None:
        """Park a message we cannot handle in the dead-letter queue, with the reason."""
        self.publish(self.names.dead, "", body, headers={"x-benchfleet-reason": reason[:1000], "x-benchfleet-queue": queue})

    # -- consuming --------------------------------------------------------------------------
    def queue_depth(self, queue: str) -> int:
        return int(self.ch.queue_declare(queue, passive=True).method.message_count)

    def get(self, queue: str) -> Delivery | None:
        """Fetch one message without a consumer (tests, tools); None when the queue is empty."""
        method, props, body = self.ch.basic_get(queue, auto_ack=False)
        if method is None:
            return None
        return Delivery(body, method.delivery_tag, method.redelivered, dict(props.headers or {}), method.routing_key)

    def ack(self, tag: int) -> None:
        self.ch.basic_ack(tag)

    def consume(self, queue: str, prefetch: int, on_message: Callable[[Delivery], None],
                should_stop: Callable[[], bool], tick_s: float = 0.5,
                on_tick: Callable[["Bus"], None] | None = None) -> None:
        """Deliver messages to ``on_message`` until ``should_stop()``; the callback acks.
        ``on_tick`` runs on this thread between deliveries (queue depths, housekeeping)."""
        ch = self.ch
        ch.basic_qos(prefetch_count=prefetch)

        def _cb(_ch: object, method: object, props: object, body: bytes) -> None:
            on_message(Delivery(body, method.delivery_tag, method.redelivered,  # type: ignore[attr-defined]
                                dict(props.headers or {}), method.routing_key))  # type: ignore[attr-defined]

        tag = ch.basic_consume(queue, _cb, auto_ack=False)
        try:
            while not should_stop():
                assert self.connection is not None
                self.connection.process_data_events(time_limit=tick_s)
                if ch.is_closed:
                    # The broker closed the channel (e.g. a delivery outlived consumer_timeout);
                    # process_data_events does not raise for that, so say it here and let the
                    # caller reconnect instead of waiting on a dead channel forever.
                    raise BusError("the broker closed the consuming channel")
                if on_tick is not None:
                    on_tick(self)
        finally:
            try:
                if ch.is_open:
                    ch.basic_cancel(tag)
            except Exception:  # the connection may already be gone; the broker requeues unacked
                pass

    def call_threadsafe(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on this connection's thread (acks from a worker thread)."""
        assert self.connection is not None
        self.connection.add_callback_threadsafe(fn)


def reconnecting(settings: Settings, name: str, pools: tuple[str, ...] = ("default",),
                 should_stop: Callable[[], bool] = lambda: False) -> Iterator[Bus]:
    """Yield connected, declared Buses forever: when the caller's loop breaks on a connection
    error, the next iteration reconnects with backoff (long campaigns survive broker restarts)."""
    while not should_stop():
        bus = Bus(settings, name=name)
        bus.connect()
        bus.declare(pools)
        try:
            yield bus
        finally:
            bus.close()


CONNECTION_ERRORS = (px.AMQPConnectionError, px.ChannelClosed, px.ConnectionClosed, px.StreamLostError, px.ChannelWrongStateError)
