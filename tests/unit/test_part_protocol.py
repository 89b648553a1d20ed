"""One run from two load hosts, end to end on the in-memory bus: two workers take the two parts
of a run, meet at the barrier on a stub parts exchange, and the collector stores one merged
result; a part lost mid-run fails the whole run (or has it measured again whole), and never
leaves half a run stored."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

from services.collector.consumer import Collector
from services.collector.takeover_check import TakeoverCheck
from services.common.bus.management import BrokerView
from services.collector.part_intake import store_part
from services.common.config import Settings
from services.common.results.histogram import Histogram
from services.common.messages.runs import Cell, RunSpec
from services.common.messages.results import Latency, RunResult, Series, Totals
from services.common.messages.events import RunEvent
from services.common.messages.announcements import WorkerAnnouncement
from services.worker.parts.share import share_of
from services.worker.parts.link import StubPartsHub
from services.common.bus.stub import StubBroker
from services.common.store.takers import Binding, Claim, DeadLetterFrom, Taker, judge_claim
from services.scheduler.submit import split_run
from services.worker.consumer import Worker
from services.worker.runner import WorkerIdentity

from tests.unit.consumer_fixtures import publish_runs, runs, wait_until

POOL = "default"
#: The barrier's timings, shortened: a member silent for a second is lost (half a second was
#: crossed by a busy 2-core machine alone and failed a run that had measured fully).
FAST = {"join_base_s": 3.0, "silence_s": 1.0, "start_lead_s": 0.2}


class FakeLoad:
    """Stands in for the runner of one worker: waits at the barrier, then "measures" its share
    for ``measure_s`` (cancelled when stopped). ``lose_on`` attempts unplug this worker's parts
    link right after the start, until the part has noticed (then it is plugged back)."""

    def __init__(self, hub: StubPartsHub, name: str, *, measure_s: float = 0.6, lose_on: tuple[int, ...] = (),
                 fail_part: int | None = None, linger_s: float = 0.0):
        self.hub, self.name, self.measure_s, self.lose_on = hub, name, measure_s, lose_on
        #: Seconds a stopped load takes to wind down (so its partner has ended first).
        self.linger_s = linger_s
        #: The part this load fails after measuring it (as the verdict does on lost connections).
        self.fail_part = fail_part
        self.starts: list[float] = []
        #: (part index, attempt) of every part this load was given.
        self.taken: list[tuple[int, int]] = []

    def __call__(self, run: RunSpec, who: WorkerIdentity, *, servers, attempt, client_cpus, after_failure, stop,
                 on_progress, start_gate=None, on_measuring=None) -> RunResult:
        share = share_of(run.cell.threads, run.rate, run.seed, run.part)
        self.taken.append((run.part.index if run.part else -1, attempt))
        start = start_gate() if start_gate is not None else time.time()
        self.starts.append(start)
        if attempt in self.lose_on:
            self.hub.cut(self.name)
            stop.wait(10)
            self.hub.restore(self.name)
        else:
            stop.wait(max(0.0, start - time.time()) + self.measure_s)
        status = "cancelled" if stop.is_set() else "ok"
        if stop.is_set():
            time.sleep(self.linger_s)
        failed = status == "ok" and run.part is not None and run.part.index == self.fail_part
        h = Histogram()
        for _ in range(share.threads * 10):
            h.record(1000.0 * share.threads)
        return RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                         status="failed" if failed else status,
                         error="MySQL error 2013: Lost connection" if failed else None, worker=who.worker_id, host=who.host, attempt=attempt, started_at=start,
                         ended_at=start + self.measure_s, measured_s=self.measure_s,
                         totals=Totals(transactions=share.threads * 10, reads=share.threads * 100),
                         series=Series(transactions=[share.threads * 10]),
                         latency=Latency(max_ms=h.max_us / 1000, histogram=h.to_wire()))


class PartsStore:
    """The results DB as the collector sees it, with the parts table (run_parts) in memory; one
    object plays every part of the store (runs, results, parts, workers)."""

    def __init__(self, planned: list[RunSpec]):
        self.planned = {r.run_id: r for r in planned}
        #: The stored results by run id.
        self.stored: dict[str, RunResult] = {}
        #: Run ids in the order results were stored: a run stored twice shows twice.
        self.order: list[str] = []
        #: run_parts: (run id, group, index) -> (result, merged), as migration 19 keys it.
        self.kept: dict[tuple[str, str, int], tuple[RunResult, bool]] = {}
        #: run_part_takers: (run id, part index) -> (taker, attempt), as migration 28 keeps it.
        self.takers: dict[tuple[str, int], tuple[Taker, int]] = {}
        self.lock = threading.Lock()

    @property
    def runs(self) -> "PartsStore":
        return self

    @property
    def results(self) -> "PartsStore":
        return self

    @property
    def parts(self) -> "PartsStore":
        return self

    @property
    def workers(self) -> "PartsStore":
        return self

    def open(self) -> "PartsStore":
        return self

    def store(self, result: RunResult, *, sender: Taker | None = None) -> bool:
        assert result.part is None, "a part is never stored as a run's result"
        self.stored[result.run_id] = result
        self.order.append(result.run_id)
        return True

    def get(self, run_id: str) -> RunResult | None:
        return self.stored.get(run_id)

    def keep(self, result: RunResult) -> list[RunResult]:
        assert result.part is not None
        key = (result.run_id, result.part.group, result.part.index)
        if not self.kept.get(key, (None, False))[1]:
            self.kept[key] = (result, False)
        return [r for (rid, g, _), (r, merged) in sorted(self.kept.items())
                if rid == result.run_id and not merged and g == result.part.group]

    def merged(self, run_id: str, group: str) -> None:
        for key, (r, _) in list(self.kept.items()):
            if key[0] == run_id and r.part is not None and r.part.group == group:
                self.kept[key] = (r, True)

    def claim(self, event: RunEvent, sender: Taker) -> Claim:
        # As store/runs.py: each part bound to its first claim, taken over by a later attempt's.
        binding = self.binding(event.run_id, event.part)
        decision = judge_claim(binding, sender, event.attempt, event.part)
        if event.state == "measuring" and decision is Claim.RETAKE:
            decision = Claim.REFUSE
        if decision in (Claim.BIND, Claim.RETAKE) and event.part is not None:
            self.takers[(event.run_id, event.part)] = (sender, event.attempt)
        return decision

    def binding(self, run_id: str, part: int | None = None) -> Binding:
        # Every run here is split over load hosts: each part is bound to the worker that took it.
        if part is None:
            return Binding(None, 0, True, "running",
                           part_takers=frozenset(t for (r, _), (t, _a) in self.takers.items() if r == run_id))
        taker, attempt = self.takers.get((run_id, part), (None, 0))
        return Binding(taker, attempt, False, "running", part=part)

    def fail(self, run_id: str, campaign_id: str, reason: str, cell: Cell | None = None, *,
             by: DeadLetterFrom | None = None) -> bool:
        return False

    def overdue(self, now: float, grace_s: float) -> list:
        return []

    def recent(self, campaigns: int) -> list:
        return []

    def ended_at(self, campaign_id: str) -> float | None:
        return None

    def record_announcement(self, announcement: WorkerAnnouncement) -> None: ...

    def announcements(self) -> list[WorkerAnnouncement]:
        return []

    def reachable(self) -> bool:
        return True

    def close(self) -> None: ...


@contextlib.contextmanager
def fleet(broker: StubBroker, hub: StubPartsHub, store: PartsStore, loads: dict[str, FakeLoad],
          attempts: int) -> Iterator[list[Worker]]:
    # Each worker host with a broker user of its own, as deploy/ installs them: a part that changes hands
    # goes through the collector's takeover check, here with a broker that shows no consumer.
    workers = [Worker(Settings(run_attempts=attempts), pool=POOL, identity=WorkerIdentity(name, host=f"host-{name}"),
                      connect=lambda n, name=name: broker.bus(n, user=f"user-{name}"), run_executor=load,
                      retry_pause_s=0, backoff_s=0.01,
                      parts_connect=lambda _n, name=name: hub.link(name), part_options=FAST)
               for name, load in loads.items()]
    collector = Collector(connect=broker.bus, open_store=store.open, pools=(POOL,), backoff_s=0.01,
                          takeover=TakeoverCheck(lambda: BrokerView(())))
    threads = [threading.Thread(target=s.run_forever, daemon=True) for s in (*workers, collector)]
    for t in threads:
        t.start()
    try:
        yield workers
    finally:
        for s in (*workers, collector):
            s.stop()
        for t in threads:
            t.join(10)
    assert not any(t.is_alive() for t in threads)


def one_run() -> RunSpec:
    """A 4-thread run of 1 s: a part's join timeout counts one run's length, so a test that waits
    it out takes 4 s, not the 13 s a 10 s run would give."""
    return next(r for r in runs() if r.cell.threads == 4).model_copy(update={"duration": 1.0})


def test_two_workers_measure_the_two_parts_and_one_merged_result_is_stored():
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    loads = {"w1": FakeLoad(hub, "w1"), "w2": FakeLoad(hub, "w2")}
    with fleet(broker, hub, store, loads, attempts=3):
        wait_until(lambda: run.run_id in store.stored, "the merged result", timeout=15)
    r = store.stored[run.run_id]
    assert r.status == "ok" and store.order == [run.run_id]
    assert sorted(p.worker for p in r.parts) == ["w1", "w2"] and [p.threads for p in r.parts] == [2, 2]
    assert r.totals.transactions == 40 and r.totals.reads == 400, "the sum of the two parts"
    assert [p.transactions for p in r.parts] == [20, 20]
    assert Histogram.from_wire(r.latency.histogram).total == 40
    # Both parts started at one agreed instant (same clock here: offsets of about 0).
    assert abs(loads["w1"].starts[0] - loads["w2"].starts[0]) < 0.05
    assert all(abs(p.clock_offset_s) < 0.05 for p in r.parts)


def test_a_part_lost_mid_run_fails_the_whole_run_and_stores_no_half():
    """w2's link is cut after the start: w1 hears nothing from it and gives up too; on the last
    attempt the run is stored failed, once, with no measurement."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    loads = {"w1": FakeLoad(hub, "w1", measure_s=5.0), "w2": FakeLoad(hub, "w2", lose_on=(1,))}
    with fleet(broker, hub, store, loads, attempts=1):
        wait_until(lambda: run.run_id in store.stored, "the run's final result", timeout=15)
        time.sleep(0.3)  # the other part's failed result arrives too, and changes nothing
    r = store.stored[run.run_id]
    assert r.status == "failed" and "load_hosts" in (r.error or "")
    assert r.totals == Totals() and r.series == Series() and r.measured_s == 0
    assert store.order == [run.run_id]


def test_a_part_lost_mid_run_fails_the_whole_run_at_once_even_with_attempts_left():
    """A part never retries alone (it could never rejoin the group): with attempts left, both
    parts are still given up at once, and the run is stored failed whole, once."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    loads = {"w1": FakeLoad(hub, "w1", measure_s=5.0), "w2": FakeLoad(hub, "w2", lose_on=(1,))}
    queue = broker.names.runs_queue(POOL)
    with fleet(broker, hub, store, loads, attempts=3):
        wait_until(lambda: run.run_id in store.stored, "the run's final result", timeout=20)
        wait_until(lambda: not broker.messages(queue) and not broker.unacked(queue), "both parts acked", timeout=10)
    r = store.stored[run.run_id]
    assert r.status == "failed" and "load_hosts" in (r.error or "") and r.totals == Totals()
    assert store.order == [run.run_id]
    assert sorted(loads["w1"].taken + loads["w2"].taken) == [(0, 1), (1, 1)], "no part was taken twice"


def test_a_part_failed_after_its_partner_finished_fails_the_run_at_once_naming_it():
    """Part 1 is judged failed after part 0 sent "done" and published ok: with attempts left it
    is not retried alone (it would wait for a partner that is gone); the run is stored failed at
    once, naming part 1 and its worker, and no part is left waiting in run_parts."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    loads = {"w1": FakeLoad(hub, "w1", fail_part=1), "w2": FakeLoad(hub, "w2", fail_part=1)}
    queue = broker.names.runs_queue(POOL)
    with fleet(broker, hub, store, loads, attempts=2):
        wait_until(lambda: run.run_id in store.stored, "the run's final result", timeout=20)
        wait_until(lambda: not broker.messages(queue) and not broker.unacked(queue), "both parts acked", timeout=10)
        wait_until(lambda: not broker.messages(broker.names.results) and not broker.unacked(broker.names.results),
                   "every result handled", timeout=10)
    taken = {i: name for name, load in loads.items() for (i, _a) in load.taken}
    assert sorted(a for load in loads.values() for (_i, a) in load.taken) == [1, 1], "no part retried alone"
    r = store.stored[run.run_id]
    assert r.status == "failed" and store.order == [run.run_id]
    assert r.error == f"load_hosts part 1 ({taken[1]}): MySQL error 2013: Lost connection", r.error
    assert 1 in [p.index for p in r.parts]
    assert all(merged for (_r, merged) in store.kept.values()), "no part left waiting in run_parts"


def test_a_part_nobody_takes_gives_up_at_the_join_timeout_naming_the_pool():
    """One worker for two parts: the part it holds waits for the other, then fails, saying why."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    with fleet(broker, hub, store, {"w1": FakeLoad(hub, "w1")}, attempts=1):
        wait_until(lambda: run.run_id in store.stored, "the failed run", timeout=30)
    r = store.stored[run.run_id]
    assert r.status == "failed"
    assert "load_hosts: 2 but" in (r.error or "") and "pool default" in (r.error or ""), r.error
    assert r.totals == Totals()


def test_a_part_taken_again_after_its_run_was_merged_cannot_spoil_the_stored_result():
    """Part 1 comes back (its worker died before the ack) to a worker that never measured it and,
    alone, gives up at the barrier: its failure is dropped; the run keeps its merged ok result."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    parts = split_run(run, 2)
    publish_runs(broker, [p.encode() for p in parts])
    with fleet(broker, hub, store, {"w1": FakeLoad(hub, "w1"), "w2": FakeLoad(hub, "w2")}, attempts=1):
        wait_until(lambda: run.run_id in store.stored, "the merged result", timeout=15)
    publish_runs(broker, [parts[1].encode()])
    lone = FakeLoad(hub, "w3")
    queue = broker.names.runs_queue(POOL)
    with fleet(broker, hub, store, {"w3": lone}, attempts=1):
        wait_until(lambda: not broker.messages(queue) and not broker.unacked(queue), "the lone part to end",
                   timeout=30)
        wait_until(lambda: not broker.messages(broker.names.results) and not broker.unacked(broker.names.results),
                   "its result handled", timeout=10)
    assert lone.starts == [], "it never started: nobody joined"
    r = store.stored[run.run_id]
    assert r.status == "ok" and store.order == [run.run_id]


def test_a_part_handed_back_before_the_start_changes_hands_and_its_run_completes():
    """w2 takes a part alone and stops while it waits for its partner: the part goes back to the
    queue and, at its next attempt, to another worker, which takes that part over from w2 (each part
    is bound to its own taker); w1 and w3 measure the run, and the merged result names them."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    first = FakeLoad(hub, "w2")
    with fleet(broker, hub, store, {"w2": first}, attempts=3):
        wait_until(lambda: first.taken, "w2 to take a part")
        handed = first.taken[0][0]
        wait_until(lambda: (run.run_id, handed) in store.takers, "w2's claim of the part")
    loads = {"w1": FakeLoad(hub, "w1"), "w3": FakeLoad(hub, "w3")}
    with fleet(broker, hub, store, loads, attempts=3):
        wait_until(lambda: run.run_id in store.stored, "the merged result", timeout=15)
    r = store.stored[run.run_id]
    assert r.status == "ok" and sorted(p.worker for p in r.parts) == ["w1", "w3"]
    taker, attempt = store.takers[(run.run_id, handed)]
    assert taker.worker in ("w1", "w3") and attempt == 2, "the part changed hands at its second attempt"
    assert taker.user == f"user-{taker.worker}", "from w2's broker user to another's"
    assert (handed, 2) in loads[taker.worker].taken


def test_a_failed_part_records_every_part_of_its_group_known_so_far():
    """Part 0 arrived ok and waits; part 1 arrives failed: the run is stored failed with both
    parts recorded (part 0's transactions too), and part 0 is no longer waiting."""
    from tests.unit.test_parts import part_result

    run = runs()[0]
    store = PartsStore(runs())
    ok, bad = part_result(0, 2, [1000.0]), part_result(1, 2, [1000.0], status="failed")
    assert store_part(store, ok) is None
    r = store_part(store, bad)
    assert r is not None and r.status == "failed" and store.stored[run.run_id] == r
    assert [(p.index, p.transactions) for p in r.parts] == [(0, 100), (1, 100)]
    assert all(merged for (_r, merged) in store.kept.values())
