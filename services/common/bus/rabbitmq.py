"""RabbitMQ: the topology, confirmed publishing and consuming with bounded reconnects, and the
control log. The one module that imports pika; everything else uses the Broker interface
(services/common/bus/broker.py) that RabbitBus implements.

One RabbitBus owns one pika BlockingConnection and must be used from one thread only; a thread
that publishes gets a RabbitBus of its own (pika connections are not thread-safe). Every pika
failure leaves this module as a BusError.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from typing import Any, Callable, Iterator, Mapping

import pika
import pika.exceptions as px

from services.common import logs
from services.common.bus import topology
from services.common.bus.broker import QUEUE_HEADER, REASON_HEADER, SENDER_HEADER, Broker, BusFactory, Delivery, Names
from services.common.config import MAX_RUN_ATTEMPTS, Settings
from services.common.bus.control import (CONTROL_LOG_ARGS, CONTROL_REPLAY_PREFETCH, DEFINITIONS_BIND_WAIT_S, SYNC_HEADER,
                                        ControlMessage, read_control, read_log_entry)
from services.common.errors import BusError, DecodeError, TopologyMissing, Unroutable
from services.common.bus.topology import Role

#: A message redelivered this many times (a consumer crashing on it) is dead-lettered by the
#: quorum queue itself instead of looping forever.
DELIVERY_LIMIT = MAX_RUN_ATTEMPTS

#: Reconnect attempts and the cap of the exponential backoff between them, in seconds.
CONNECT_ATTEMPTS = 8
BACKOFF_CAP_S = 8.0
#: Seconds ``consume`` serves the connection between two checks of ``should_stop``/``on_tick``.
TICK_S = 0.5

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


@contextlib.contextmanager
def _as_bus_error(what: str) -> Iterator[None]:
    """pika's errors (connection or channel lost, broker refusal) as one BusError saying what
    we were doing; callers reconnect on it."""
    try:
        yield
    except (px.AMQPError, ConnectionError) as e:
        raise BusError(f"{what}: {type(e).__name__} {e}".rstrip()) from None


def _delivery(method: object, props: object, body: bytes) -> Delivery:
    return Delivery(body, method.delivery_tag, method.redelivered,  # type: ignore[attr-defined]
                    dict(props.headers or {}), method.routing_key, user_id=props.user_id)  # type: ignore[attr-defined]


def rabbit_factory(settings: Settings, role: Role = Role.ALL) -> BusFactory:
    """Makes RabbitBus connections to the broker of ``settings``, named for the broker's tools,
    declaring what ``role`` uses (its broker user may do no more: services/common/bus/topology.py)."""
    return lambda name: RabbitBus(settings, name=name, role=role)


class RabbitBus(Broker):
    """A connection to RabbitMQ with the benchfleet topology declared on it."""

    def __init__(self, settings: Settings, *, name: str = "benchfleet", role: Role = Role.ALL):
        self.settings = settings
        self.name = name
        self.role = role
        self.names = Names(settings.namespace)
        #: The broker user of this connection. Every message it publishes names it in ``user_id``,
        #: which RabbitMQ refuses unless it is the connection's user: a consumer knows who sent what.
        self.user: str = connection_parameters(settings).credentials.username
        self.connection: pika.BlockingConnection | None = None
        self.channel: pika.adapters.blocking_connection.BlockingChannel | None = None
        #: Channel of passive declares that may fail (queue_depth, consumer_count).
        self._probe: pika.adapters.blocking_connection.BlockingChannel | None = None

    # -- connection -------------------------------------------------------------------------
    def connect(self, attempts: int | None = None) -> "RabbitBus":
        """Connect with exponential backoff; raise BusError after ``attempts`` failures
        (CONNECT_ATTEMPTS when None)."""
        attempts = CONNECT_ATTEMPTS if attempts is None else attempts
        params = connection_parameters(self.settings)
        params.client_properties = {"connection_name": self.name}
        delay = 0.5
        for attempt in range(1, attempts + 1):
            try:
                self.connection = pika.BlockingConnection(params)
                self.channel = self.connection.channel()
                self.channel.confirm_delivery()
                return self
            except (px.AMQPError, OSError) as e:
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
        self.connection = self.channel = self._probe = None

    def __enter__(self) -> "RabbitBus":
        return self.connect() if self.connection is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _ch(self) -> "pika.adapters.blocking_connection.BlockingChannel":
        if self.channel is None:
            raise BusError("not connected to RabbitMQ")
        return self.channel

    @property
    def _conn(self) -> pika.BlockingConnection:
        if self.connection is None:
            raise BusError("not connected to RabbitMQ")
        return self.connection

    # -- topology ---------------------------------------------------------------------------
    def declare(self, pools: tuple[str, ...] = ("default",)) -> None:
        """What this connection's role uses (services/common/bus/topology.py); safe to repeat. The
        scheduler also declares the control log here, so a worker finds it after the first submit."""
        with _as_bus_error("declaring the queues"):
            for step in topology.steps(self.names, pools, self.role, _quorum_args(self.names.dead)):
                if isinstance(step, topology.Exchange):
                    self._ensure(f"exchange {step.name!r}", lambda ch, passive, step=step: ch.exchange_declare(
                        step.name, exchange_type=step.kind, durable=True, passive=passive))
                elif isinstance(step, topology.Queue):
                    try:
                        self._ensure(f"queue {step.name!r}", lambda ch, passive, step=step: ch.queue_declare(
                            step.name, durable=True, arguments=step.arguments, passive=passive))
                    except TopologyMissing:
                        if not step.optional:
                            raise
                else:
                    self._ch.queue_bind(step.queue, step.exchange, routing_key=step.routing_key or None)
        if self.role is Role.COLLECTOR:
            self.declare_control_log()
        elif self.role is Role.SCHEDULER:
            # The collector declares it; a scheduler that comes first goes on without it (a submit
            # needs no log, and workers wait for it), or creates it where its user may (tests).
            try:
                self.declare_control_log()
            except TopologyMissing:
                pass

    def retire_old_exchanges(self) -> list[str]:
        """Delete the exchanges of earlier versions (topology.retired); the names, gone now."""
        with _as_bus_error("retiring the exchanges of earlier versions"):
            for step in topology.retired(self.names):
                self._ch.exchange_delete(step.name)  # a no-op when it is gone already
        return [step.name for step in topology.retired(self.names)]

    def _ensure(self, what: str, declare: Callable[[Any, bool], object], *, configures: bool | None = None,
                owner: str = "the scheduler declares it at the first submit to this pool, the collector declares "
                             "the results queue") -> bool:
        """Declare ``what``; True when this call created it. A role that does not configure it
        (``configures``; default: every role but the worker) first checks that it exists (a passive
        declare needs no permission): its broker user may not configure it, so it can neither delete
        nor redefine it. Declaring what is missing then works only for a user allowed to (tests,
        tools); otherwise ``owner`` declares it first."""
        if configures is None:
            configures = self.role is not Role.WORKER
        if configures:
            declare(self._ch, False)
            return True
        try:
            declare(self._ch, True)
            return False
        except px.ChannelClosedByBroker as e:
            if e.reply_code != 404:
                raise
        self._reopen_channel()
        try:
            declare(self._ch, False)
            return True
        except px.ChannelClosedByBroker as e:
            self._reopen_channel()
            raise TopologyMissing(f"the broker has no {what} yet, and this {self.role.value}'s broker user may not "
                           f"declare it ({e.reply_code} {e.reply_text}): {owner}") from None

    def _reopen_channel(self) -> None:
        # The broker closes the channel on a failed declare; the connection stays.
        self.channel = self._conn.channel()
        self.channel.confirm_delivery()

    def declare_control_log(self) -> None:
        """Declare the control exchange, the control log (a stream) bound to it, and the sync
        exchange that only the log is bound to. The collector, which alone publishes cancels,
        declares and binds them; the scheduler and the workers check they exist (and bind only what
        they had to create: their users may neither delete them nor bind the log)."""
        n = self.names
        own = self.role in (Role.ALL, Role.COLLECTOR)
        owner = "the collector declares it when it starts"
        with _as_bus_error("declaring the control log"):
            created = [self._ensure(f"exchange {n.control!r}", lambda ch, passive: ch.exchange_declare(
                           n.control, exchange_type="fanout", durable=True, passive=passive), configures=own, owner=owner),
                       self._ensure(f"exchange {n.control_sync!r}", lambda ch, passive: ch.exchange_declare(
                           n.control_sync, exchange_type="fanout", durable=True, passive=passive), configures=own,
                           owner=owner),
                       self._ensure(f"exchange {n.definitions!r}", lambda ch, passive: ch.exchange_declare(
                           n.definitions, exchange_type="fanout", durable=True, passive=passive), configures=own,
                           owner=owner),
                       self._ensure(f"queue {n.control_log!r}", lambda ch, passive: ch.queue_declare(
                           n.control_log, durable=True, arguments=CONTROL_LOG_ARGS, passive=passive), configures=own,
                           owner=owner)]
            if own or any(created):
                self._ch.queue_bind(n.control_log, n.control)
                self._ch.queue_bind(n.control_log, n.control_sync)
                self._ch.queue_bind(n.control_log, n.definitions)

    # -- publishing -------------------------------------------------------------------------
    def publish(self, exchange: str, routing_key: str, body: bytes, headers: Mapping[str, object] | None = None) -> None:
        props = pika.BasicProperties(
            delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json", headers=dict(headers or {}),
            user_id=self.user,
        )
        try:
            self._ch.basic_publish(exchange, routing_key, body, properties=props, mandatory=True)
        except px.UnroutableError:
            raise Unroutable(f"message to {exchange!r} with key {routing_key!r} was unroutable (no queue bound)") from None
        except px.NackError:
            raise BusError(f"broker refused (nacked) a message to {exchange!r}") from None
        except (px.AMQPError, ConnectionError) as e:
            raise BusError(f"publishing to {exchange!r}: {type(e).__name__} {e}".rstrip()) from None

    def publish_runs(self, pool: str, bodies: list[bytes]) -> None:
        """One AMQP transaction on a channel of its own: a failure part-way leaves no run of the
        campaign in the queue."""
        props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json",
                                     user_id=self.user)
        ch = None
        try:
            ch = self._conn.channel()
            ch.tx_select()
            for body in bodies:
                ch.basic_publish(self.names.runs_exchange, pool, body, properties=props)
            ch.tx_commit()
        except Exception as e:
            try:
                if ch is not None:
                    ch.tx_rollback()
            except Exception:  # the channel may be gone with the error; nothing was committed
                pass
            raise BusError(f"publishing {len(bodies)} runs to pool {pool!r} failed, none were published: {e}") from None
        finally:
            try:
                if ch is not None:
                    ch.close()
            except Exception:
                pass

    def publish_result(self, body: bytes) -> None:
        self.publish(self.names.results_exchange, "", body)

    def dead_letter(self, body: bytes, reason: str, queue: str, sender: str | None = None) -> None:
        headers: dict[str, object] = {REASON_HEADER: reason[:1000], QUEUE_HEADER: queue}
        if sender is not None:
            headers[SENDER_HEADER] = sender
        self.publish(self.names.dead, "", body, headers=headers)

    # -- consuming --------------------------------------------------------------------------
    def queue_depth(self, queue: str) -> int:
        ok = self._look_at(queue, "reading the depth of")
        return 0 if ok is None else int(ok.message_count)

    def consumer_count(self, queue: str) -> int:
        ok = self._look_at(queue, "reading the consumers of")
        return 0 if ok is None else int(ok.consumer_count)

    def _look_at(self, queue: str, what: str) -> Any:
        """A passive declare's answer, None when there is no such queue (a collector exports the
        depth of runs queues it may not declare). On a channel of its own: the broker closes the
        channel of a passive declare of a missing queue, and the consuming one must stay open."""
        with _as_bus_error(f"{what} {queue!r}"):
            if self._probe is None or not self._probe.is_open:
                self._probe = self._conn.channel()
            try:
                return self._probe.queue_declare(queue, passive=True).method
            except px.ChannelClosedByBroker as e:
                self._probe = None
                if e.reply_code == 404:
                    return None
                raise

    def get(self, queue: str) -> Delivery | None:
        with _as_bus_error(f"getting from {queue!r}"):
            method, props, body = self._ch.basic_get(queue, auto_ack=False)
        return None if method is None else _delivery(method, props, body)

    def ack(self, tag: int) -> None:
        with _as_bus_error("acking a delivery"):
            self._ch.basic_ack(tag)

    def nack(self, tag: int, requeue: bool) -> None:
        with _as_bus_error("nacking a delivery"):
            self._ch.basic_nack(tag, requeue=requeue)

    def consume(self, queue: str, prefetch: int, on_message: Callable[[Delivery], None],
                should_stop: Callable[[], bool], on_tick: Callable[[], None] | None = None) -> None:
        ch, conn = self._ch, self._conn
        with _as_bus_error(f"consuming from {queue!r}"):
            ch.basic_qos(prefetch_count=prefetch)
            try:
                tag = ch.basic_consume(queue, lambda _c, method, props, body: on_message(_delivery(method, props, body)),
                                       auto_ack=False)
            except px.ChannelClosedByBroker as e:
                if e.reply_code != 404:
                    raise
                # A worker's runs queue before the first submit to its pool: its caller looks again soon.
                raise TopologyMissing(f"the broker has no queue {queue!r} yet: the scheduler declares a pool's "
                                      "runs queue at the first submit to it") from None
        try:
            while not should_stop():
                # Callbacks run inside process_data_events; their exceptions pass through untouched.
                with _as_bus_error(f"consuming from {queue!r}"):
                    conn.process_data_events(time_limit=TICK_S)
                if ch.is_closed:
                    # The broker closed the channel (e.g. a delivery outlived consumer_timeout);
                    # process_data_events does not raise for that, so say it here and let the
                    # caller reconnect instead of waiting on a dead channel forever.
                    raise BusError("the broker closed the consuming channel")
                if on_tick is not None:
                    on_tick()
        finally:
            try:
                if ch.is_open:
                    ch.basic_cancel(tag)
            except Exception:  # the connection may already be gone; the broker requeues unacked
                pass

    def call_threadsafe(self, fn: Callable[[], None]) -> None:
        with _as_bus_error("handing a callback to the connection's thread"):
            self._conn.add_callback_threadsafe(fn)

    # -- control ----------------------------------------------------------------------------
    def publish_control(self, message: ControlMessage) -> None:
        # One publish tells the connected workers (their private queues) and appends the message
        # to the control log (a stream bound to the same exchange). The log is always bound, so
        # the publish is mandatory and confirmed: a cancel the log did not get is an error.
        self.declare_control_log()
        self.publish(self.names.control, "", message.encode())

    def publish_definitions(self, bodies: list[bytes]) -> None:
        # Mandatory and confirmed, as a cancel. A collector starting beside this submit may not have
        # bound the log yet (a stream takes a moment to create): try again a while (duplicates are harmless).
        deadline = time.monotonic() + DEFINITIONS_BIND_WAIT_S
        while True:
            try:
                self.declare_control_log()
                for body in bodies:
                    self.publish(self.names.definitions, "", body)
                return
            except TopologyMissing:
                if time.monotonic() > deadline:
                    raise
            except Unroutable:
                if time.monotonic() > deadline:
                    raise Unroutable(f"no control log is bound to {self.names.definitions!r} after "
                                     f"{DEFINITIONS_BIND_WAIT_S:.0f} s: the collector binds it when it starts; start "
                                     "the collector, then submit again") from None
            time.sleep(0.2)

    def subscribe_control(self, on_control: Callable[[ControlMessage], None],
                          on_definition: Callable[[bytes], None] | None = None) -> None:
        self.declare_control_log()

        def on_body(_c: object, method: object, _p: object, body: bytes) -> None:
            if on_definition is not None and method.exchange == self.names.definitions:  # type: ignore[attr-defined]
                on_definition(body)
                return
            # Only the control exchange speaks for the fleet: the collector alone publishes there
            # (see services/common/bus/control.py).
            if method.exchange != self.names.control:  # type: ignore[attr-defined]
                log.error("control_message_refused", exchange=method.exchange, source="control")  # type: ignore[attr-defined]
                return
            msg = read_control(body, "control")
            if msg is not None:
                on_control(msg)

        ch = self._ch
        with _as_bus_error("subscribing to control messages"):
            # An exclusive, auto-deleted queue of this connection's own, so every worker hears
            # each control message; private, so auto-ack loses nothing another worker needed.
            queue = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
            ch.queue_bind(queue, self.names.control)
            if on_definition is not None:
                # The same queue and channel as the control messages and the runs: a definition,
                # confirmed before its runs were published, is handled before them.
                ch.queue_bind(queue, self.names.definitions)
            ch.basic_consume(queue, on_body, auto_ack=True)

    def replay_control_log(self, reader: str, on_control: Callable[[ControlMessage], None], *,
                           should_stop: Callable[[], bool], timeout_s: float,
                           on_definition: Callable[[bytes], None] | None = None) -> int:
        """Reads the stream from its first message on a channel of its own, after appending this
        reader's marker through the sync exchange (see services/common/bus/control.py for why the
        marker is how the replay knows it is complete)."""
        self.declare_control_log()
        token = f"{reader}-{secrets.token_hex(8)}"
        state = {"end": False, "replayed": 0}

        def on_entry(c: object, method: object, props: object, body: bytes) -> None:
            c.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]
            if state["end"]:
                return  # past the marker: the private queue delivers these
            try:
                kind, msg = read_log_entry(method.exchange, dict(props.headers or {}), body, token,  # type: ignore[attr-defined]
                                           control_exchange=self.names.control, sync_exchange=self.names.control_sync,
                                           definitions_exchange=self.names.definitions)
            except DecodeError as e:
                log.error("control_message_undecodable", reason=str(e), source="control_log")
                return
            if kind == "definition":
                if on_definition is not None:
                    on_definition(body)
            elif kind == "end":
                state["end"] = True
            elif msg is not None:
                state["replayed"] += 1
                on_control(msg)

        conn = self._conn
        ch = None
        try:
            with _as_bus_error("replaying the control log"):
                ch = conn.channel()
                ch.confirm_delivery()
                ch.basic_qos(prefetch_count=CONTROL_REPLAY_PREFETCH)
                ch.basic_consume(self.names.control_log, on_entry, auto_ack=False,
                                 arguments={"x-stream-offset": "first"})
            self.publish(self.names.control_sync, "", b"", headers={SYNC_HEADER: token})
            deadline = time.monotonic() + timeout_s
            while not state["end"] and not should_stop():
                if time.monotonic() > deadline:
                    raise BusError(f"the control log replay did not reach this reader's marker within {timeout_s:.0f} s")
                with _as_bus_error("replaying the control log"):
                    conn.process_data_events(time_limit=0.2)
        finally:
            try:
                if ch is not None and ch.is_open:
                    ch.close()
            except Exception:  # the connection may be gone; the caller handles that
                pass
        return int(state["replayed"])

    # -- tools and tests (RabbitMQ only, not part of the Broker interface) ------------------

    def tap(self, queue: str, exchange: str, routing_key: str = "") -> None:
        """A durable classic queue of ``queue``'s name bound to ``exchange``: a copy of what is
        published there, for tests to read with ``get``."""
        with _as_bus_error(f"tapping {exchange!r}"):
            self._ch.queue_declare(queue, durable=False, auto_delete=False)
            self._ch.queue_bind(queue, exchange, routing_key=routing_key)

    def delete_queue(self, queue: str) -> None:
        with _as_bus_error(f"deleting {queue!r}"):
            self._ch.queue_delete(queue)

    def delete_topology(self, pools: tuple[str, ...]) -> None:
        """Delete every queue and exchange of this namespace (a test fleet's teardown)."""
        n = self.names
        with _as_bus_error("deleting the topology"):
            for q in (*(n.runs_queue(p) for p in pools), n.results, n.dead, n.dead_watch, n.control_log):
                self._ch.queue_delete(q)
            # n.results: the results exchange of earlier versions, if a collector never removed it.
            for ex in (n.runs_exchange, n.results_exchange, n.results, n.dead, n.control, n.control_sync, n.definitions,
                       n.parts):
                self._ch.exchange_delete(ex)
