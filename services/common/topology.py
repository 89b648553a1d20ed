"""What each service declares on the broker, by role, so each role's broker user needs only its
own permissions (deploy/ensure-services grants them; see the README's security model).

RabbitMQ checks, per resource name: configure to declare (or delete) an exchange or queue;
write on the queue and read on the exchange to bind them; write on an exchange to publish; read
on a queue to consume. Declaring a new queue with a dead-letter exchange also needs write on
that exchange and read on the queue. The results exchange and queue share a name, so whoever
binds the results queue may also publish results: only the worker (who publishes them) binds
it. Whoever binds a runs queue could bind it to an exchange of its own and inject runs: only
the scheduler (who publishes runs) binds them.

A worker declares nothing shared: its user's configure permission covers only its private
control queues, so it can neither delete nor redefine the runs, results or dead-letter queues or
the control log. It checks that they exist (passively: no permission needed) and waits until the
scheduler (at a submit: runs, dead letters, control log) and the collector (results) declared
them. The worker's steps below are what it checks, and the two bindings it makes itself.

Pure: the bus (services/common/bus.py) executes the steps.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from services.common.broker import Names


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


@dataclass(frozen=True)
class Binding:
    queue: str
    exchange: str
    routing_key: str = ""


Step = Union[Exchange, Queue, Binding]


def steps(names: "Names", pools: tuple[str, ...], role: Role, quorum_args: dict[str, object]) -> list[Step]:
    """The declarations of ``role`` for ``pools``, in order (exchanges before their bindings).
    ``quorum_args`` are the arguments of a work queue (quorum, dead-lettered, delivery limit)."""
    n = names
    out: list[Step] = [Exchange(n.dead, "fanout"), Queue(n.dead, {"x-queue-type": "quorum"}),
                       Binding(n.dead, n.dead)]
    if role in (Role.ALL, Role.WORKER):
        out += [Exchange(n.results, "fanout"), Queue(n.results, quorum_args), Binding(n.results, n.results)]
    elif role is Role.COLLECTOR:
        # Declared here (a worker's user may declare nothing shared), bound by the workers.
        out += [Exchange(n.results, "fanout"), Queue(n.results, quorum_args)]
    if role in (Role.ALL, Role.COLLECTOR):
        # The collector's copy of every dead letter (a run or result that will never be
        # stored): it marks the run failed with the reason.
        out += [Queue(n.dead_watch, {"x-queue-type": "quorum"}), Binding(n.dead_watch, n.dead)]
    if role in (Role.ALL, Role.SCHEDULER):
        # The parts' barrier exchange: declared at a submit, like the runs; a worker only binds
        # its private queue to it when it measures a part (services/common/parts_link.py).
        out += [Exchange(n.runs_exchange, "direct"), Exchange(n.parts, "direct")]
    for pool in pools:
        out.append(Queue(n.runs_queue(pool), quorum_args))
        if role in (Role.ALL, Role.SCHEDULER):
            out.append(Binding(n.runs_queue(pool), n.runs_exchange, pool))
    return out
