"""The barrier of one part (services/worker/parts/session.py) on the stub parts exchange: when the
join deadline starts, and what counts as a member measuring."""

from __future__ import annotations

import threading
import time

from services.common.messages.parts import PartSignal
from services.worker.parts.link import StubPartsHub
from services.scheduler.submit import split_run
from services.worker.parts.session import PartSession

from tests.unit.consumer_fixtures import runs


def parts_of_one_run():
    return split_run(next(r for r in runs() if r.cell.threads == 4), 2)


def test_the_join_deadline_counts_from_when_the_part_is_ready_not_from_before_prepare():
    """Both parts prepare for longer than the join timeout (the clock jumps 1000 s before either
    is ready): they still meet and agree a start once they are ready."""
    hub, now = StubPartsHub(), [1000.0]
    clock = lambda: now[0]  # noqa: E731
    p0, p1 = parts_of_one_run()
    sessions = [PartSession(hub.link(f"w{i}"), p, worker=f"w{i}", host=f"h{i}", pool="default",
                            stop=threading.Event(), join_base_s=1.0, start_lead_s=0.0, clock=clock).begin()
                for i, p in enumerate((p0, p1))]
    time.sleep(0.3)
    now[0] += 1000.0 + sessions[0].join_timeout  # a long prepare, under the target's named lock
    time.sleep(0.3)
    assert [s.failure for s in sessions] == [None, None]
    starts: list[float] = []
    gates = [threading.Thread(target=lambda s=s: starts.append(s.gate())) for s in sessions]
    for g in gates:
        g.start()
    for g in gates:
        g.join(10)
    for s in sessions:
        s.finish()
    assert [s.failure for s in sessions] == [None, None]
    assert len(starts) == 2 and sessions[0].group == sessions[1].group is not None


def test_a_member_that_only_says_ready_while_the_coordinator_measures_is_lost():
    """A member that missed the start keeps saying "ready" and pinging: that is no heartbeat;
    the coordinator gives the run up after the silence limit, naming the part."""
    hub, now = StubPartsHub(), [1000.0]
    p0, p1 = parts_of_one_run()
    stop = threading.Event()
    coord = PartSession(hub.link("w0"), p0, worker="w0", host="h0", pool="default", stop=stop, join_base_s=5.0,
                        silence_s=1.0, start_lead_s=0.1, clock=lambda: now[0]).begin()
    member = hub.link("w1")
    member.open(p1.run_id)
    gate = threading.Thread(target=lambda: _gate_quietly(coord), daemon=True)
    gate.start()
    for _ in range(100):  # 10 s on the session's clock, a signal of each kind every 0.1 s
        if coord.failure is not None:
            break
        for kind, extra in (("ready", {}), ("ping", {"t0": now[0]})):
            member.send(p1.run_id, PartSignal(run_id=p1.run_id, kind=kind, index=1, count=2, token="m1", worker="w1",
                                              host="h1", at=now[0], **extra).encode())
        time.sleep(0.05)
        now[0] += 0.1
        member.receive(0.0)
    coord.finish("gave up")
    member.close()
    assert coord.start_at is not None, "the coordinator started: the member had said ready"
    assert coord.failure is not None and "part 1 (w1) went silent" in coord.failure, coord.failure
    assert stop.is_set()


def _gate_quietly(session: PartSession) -> None:
    try:
        session.gate()
    except Exception:
        pass
