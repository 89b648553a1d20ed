"""What each service declares on the broker, by role, so each role's broker user needs only its
own permissions (deploy/ensure-services grants them; see docs/security.md).

RabbitMQ checks, per resource name: configure to declare (or delete) an exchange or queue;
write on the queue and read on the exchange to bind them; write on an exchange to publish; read
on a queue to consume, get or purge it. Declaring a new queue with a dead-letter exchange also
needs write on that exchange and read on the queue. Permissions are regexes over names, so an
exchange and a queue of one name share them: the results exchange is named apart from the
results queue, so the workers, who publish results, need no permission on the queue. The
collector binds the results queue (writing a queue is what binding it needs); whoever binds a
runs queue could bind it to an exchange of its own and inject runs, so only the scheduler (who
publishes runs) binds them.

A worker declares and binds nothing shared: its user may configure only its private control
queues and read no exchange but the control exchange, so it can neither delete nor redefine the
fleet's queues, nor bind them, nor take results or dead letters. It checks that what it uses
exists (passively: no permission needed) and waits until the scheduler (at a submit: runs, dead
letters, control log) and the collector (results) declared it. The worker's steps below are
only what it checks; its runs queue it may also find only when it consumes.

Upgrading: the results exchange of earlier versions had the results queue's name, and workers not
yet upgraded still publish to it. No declare deletes it: it stays bound to the results queue (as
the earlier collector bound it), so their results keep arriving while the new exchange is bound
too. Binding it to the new exchange instead would need write on that exchange, i.e. a collector
that may publish results. Once every worker is upgraded, `collector retire-old-exchange` deletes
it (``retired``), and ensure-services, run again, takes back the workers' grant on its name.

Pure: the bus (services/common/bus/rabbitmq.py) executes the steps.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from services.common.bus.broker import Names


class Role(enum.Enum):
    """Who connects: each declares what it uses. ALL declares everything (tests, tools)."""

    ALL = "all"
    SCHEDULER = "scheduler"
    WORKER = "worker"
    COLLECTOR = "collector"


@dataclass(frozen=True)
class Exchange:
    name: str
    kind: str


@dataclass(frozen=True)
class Queue:
    name: str
    arguments: dict[str, object] = field(default_factory=dict, hash=False)
    #: A worker goes on without it when its user may not declare it, and finds it when it consumes.
    optional: bool = False


@dataclass(frozen=True)
class Binding:
    queue: str
    exchange: str
    routing_key: str = ""


@dataclass(frozen=True)
class RetiredExchange:
    """An exchange of an earlier version, deleted (with its bindings) if it is still there."""

    name: str


Step = Union[Exchange, Queue, Binding]


def retired(names: "Names") -> list[RetiredExchange]:
    """The exchanges of earlier versions, deleted by an explicit step once no process of those
    versions publishes to them (`collector retire-old-exchange`), never by a declare."""
    return [RetiredExchange(names.results)]


def steps(names: "Names", pools: tuple[str, ...], role: Role, quorum_args: dict[str, object]) -> list[Step]:
    """The declarations of ``role`` for ``pools``, in order (exchanges before their bindings).
    ``quorum_args`` are the arguments of a work queue (quorum, dead-lettered, delivery limit)."""
    n = names
    binds = role is not Role.WORKER  # a worker's user may bind nothing shared
    out: list[Step] = [Exchange(n.dead, "fanout"), Queue(n.dead, {"x-queue-type": "quorum"})]
    if binds:
        # The scheduler binds it too: dead letters of its runs are kept before any collector ran.
        out.append(Binding(n.dead, n.dead))
    if role in (Role.ALL, Role.WORKER, Role.COLLECTOR):
        out += [Exchange(n.results_exchange, "fanout"), Queue(n.results, quorum_args)]
    if role in (Role.ALL, Role.COLLECTOR):
        # The old results exchange (the queue's name), if any, is left bound: see Upgrading.
        out += [Binding(n.results, n.results_exchange)]
        # The collector's copy of every dead letter (a run or result that will never be
        # stored): it marks the run failed with the reason.
        out += [Queue(n.dead_watch, {"x-queue-type": "quorum"}), Binding(n.dead_watch, n.dead)]
    if role in (Role.ALL, Role.SCHEDULER):
        # The parts' barrier exchange: declared at a submit, like the runs; a worker only binds
        # its private queue to it when it measures a part (services/worker/parts/link.py).
        out += [Exchange(n.runs_exchange, "direct"), Exchange(n.parts, "direct")]
    # The collector only reports the runs queues' depth (a passive look): its user may neither
    # declare nor read them, so it can neither take, purge nor delete runs. A worker whose runs
    # queue is not declared yet (the scheduler declares it at a submit to the pool) goes on, so
    # it announces itself, and finds the queue when it consumes.
    for pool in pools if role is not Role.COLLECTOR else ():
        out.append(Queue(n.runs_queue(pool), quorum_args, optional=role is Role.WORKER))
        if role in (Role.ALL, Role.SCHEDULER):
            out.append(Binding(n.runs_queue(pool), n.runs_exchange, pool))
    return out
