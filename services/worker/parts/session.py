"""One part's side of a run spread over several load hosts (spec ``load_hosts``): the barrier on
the parts exchange, the clock offset to the coordinator, and the watch over the other parts
while measuring.

Part 0's worker coordinates: it collects the others' "ready", answers their pings, and
publishes "start at T" (T a couple of seconds ahead, on its clock) once every part is ready. The
coordinator is a worker, not the collector, because the collector may be down or behind a
backlog of results while runs go on (results wait in their queue for it), and a barrier must
answer within milliseconds: part 0's worker is there by construction, measuring the same run.

The session runs on a thread of its own, which owns the parts link (one connection, one
thread); the run's thread only waits in ``gate`` (called by the driver once its connections
are open) and calls ``finish`` at the end.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any, Callable

from services.common import logs
from services.worker.parts.barrier import Joined, best_sample, clock_sample, join_timeout_s, local_instant, silent
from services.common.errors import BusError, DecodeError, LoadError
from services.common.messages.runs import RunSpec
from services.common.messages.codec import decode
from services.common.messages.parts import PartReport, PartSignal
from services.worker.parts.share import share_of
from services.worker.parts.link import PartsLink

log = logs.get(__name__)

#: Seconds a part waits for the others beyond one run's length (services.worker.parts.barrier).
JOIN_BASE_S = 60.0
#: How far ahead of "now" the coordinator sets the start, so every part hears it in time.
START_LEAD_S = 2.0
#: A part not heard from for this long while measuring is lost: the run is given up whole. Longer
#: than a broker's hiccup, shorter than the broker noticing a dead worker (two heartbeats).
SILENCE_S = 10.0
#: Seconds between "ready" repeats (and how fresh a "ready" must be: three of them).
READY_EVERY_S = 1.0
#: Seconds between pings before the start, and between "alive" signals while measuring.
PING_EVERY_S = 0.25
ALIVE_EVERY_S = 1.0
TICK_S = 0.05


class PartSession:
    """The barrier of one part of ``run``: ``begin``, then ``gate`` from the driver, then ``finish``."""

    def __init__(self, link: PartsLink, run: RunSpec, *, worker: str, host: str, pool: str,
                 stop: threading.Event, join_base_s: float = JOIN_BASE_S, silence_s: float = SILENCE_S,
                 start_lead_s: float = START_LEAD_S, clock: Callable[[], float] = time.time):
        assert run.part is not None
        self.link, self.run, self.part = link, run, run.part
        self.worker, self.host, self.pool = worker, host, pool
        self.stop = stop
        self.join_timeout = join_timeout_s(join_base_s, run.warmup, run.duration)
        self.silence_s, self.start_lead_s, self.clock = silence_s, start_lead_s, clock
        # Several heartbeats per silence limit, so one late signal is not a lost part.
        self.alive_every_s = min(ALIVE_EVERY_S, silence_s / 4)
        self.token = secrets.token_hex(8)
        self.share = share_of(run.cell.threads, run.rate, run.seed, run.part)
        self.coordinator = self.part.index == 0
        #: Why this part gave up (barrier not met, a member lost); None while all is well.
        self.failure: str | None = None
        self.start_at: float | None = None
        self.group: dict[int, str] | None = None
        self._local_start = 0.0
        self._samples: list[Any] = []
        self._ready = threading.Event()
        self._decided = threading.Event()
        self._finished = threading.Event()
        self._finish_reason: str | None = None
        self._requeued = False
        #: When gate() was first called (this part ready to measure): the join deadline counts
        #: from here, not from before prepare, which may take long under the named lock.
        self._ready_at: float | None = None
        self._joined = Joined(self.part.count, fresh_s=3 * READY_EVERY_S)
        self._names: dict[int, str] = {}
        self._heard: dict[int, float] = {}
        self._done: set[int] = set()
        self._pending_start: PartSignal | None = None
        self._thread = threading.Thread(target=self._main, name=f"part-{run.run_id}-{self.part.index}", daemon=True)

    # -- the run's thread ---------------------------------------------------------------------
    def begin(self) -> "PartSession":
        self._thread.start()
        return self

    def gate(self) -> float:
        """Say this part is ready (its connections are open) and wait for the agreed start; the
        start instant on this host's clock. LoadError when the barrier is not met."""
        if self._ready_at is None:
            self._ready_at = self.clock()
        self._ready.set()
        while not self._decided.wait(0.2):
            if not self._thread.is_alive():
                break
        if self.failure is not None:
            raise LoadError(self.failure)
        if self.start_at is None and not self.stop.is_set():
            # Never measure without an agreed start: this part alone would pass for the whole run.
            raise LoadError("load_hosts: the barrier ended without a start")
        return self._local_start if self.start_at is not None else self.clock()

    def finish(self, reason: str | None = None, *, requeued: bool = False) -> None:
        """The part ended: tell the others it is done (or, with ``reason``, that it gave up: for
        good, which makes every part give up, or ``requeued`` for another worker before the start)."""
        self._finish_reason = reason
        self._requeued = requeued
        self._finished.set()
        self._thread.join(10.0)

    def report(self) -> PartReport | None:
        """What this part was, for its result; None when no start was agreed."""
        if self.start_at is None or self.group is None:
            return None
        best = best_sample(self._samples)
        return PartReport(index=self.part.index, count=self.part.count, group=self.group[0], worker=self.worker,
                          host=self.host, threads=self.share.threads, rate=self.share.rate, seed=self.share.seed,
                          warmup=self.run.warmup, duration=self.run.duration, start_at=self.start_at,
                          clock_offset_s=0.0 if best is None else best.offset_s,
                          rtt_s=None if best is None else best.rtt_s)

    # -- the session's thread -----------------------------------------------------------------
    def _signal(self, kind: str, **fields: Any) -> PartSignal:
        return PartSignal(run_id=self.run.run_id, kind=kind, index=self.part.index, count=self.part.count,  # type: ignore[arg-type]
                          token=self.token, worker=self.worker, host=self.host, at=self.clock(), **fields)

    def _send(self, kind: str, **fields: Any) -> None:
        self.link.send(self.run.run_id, self._signal(kind, **fields).encode())

    def _fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
            log.warning("part_gave_up", run_id=self.run.run_id, part=self.part.index, reason=why)
        self._decided.set()

    def _main(self) -> None:
        try:
            self.link.open(self.run.run_id)
        except BusError as e:
            self._fail(f"load_hosts: cannot join the other parts on the bus: {e}")
            return
        except Exception as e:  # a bug must fail the part, never let it measure alone as the whole run
            log.exception("part_barrier_crashed", run_id=self.run.run_id, part=self.part.index)
            self._fail(f"load_hosts: barrier error: {e!r}")
            return
        try:
            self._loop()
        except Exception as e:
            if isinstance(e, BusError):
                self._fail(f"load_hosts: lost the bus to the other parts: {e}")
            else:
                log.exception("part_barrier_crashed", run_id=self.run.run_id, part=self.part.index)
                self._fail(f"load_hosts: barrier error: {e!r}")
            if self.start_at is not None:
                self.stop.set()
        finally:
            try:
                if self.failure is not None or self._finish_reason is not None:
                    self._send("abort", reason=(self._finish_reason or self.failure or "")[:1000],
                               requeued=self._requeued)
                elif self.start_at is not None:
                    self._send("done")
            except BusError:
                pass  # the others notice the silence
            self.link.close()
            self._decided.set()

    def _loop(self) -> None:
        last_ready = last_ping = last_alive = 0.0
        while not self._finished.is_set():
            bodies = self.link.receive(TICK_S)
            got = self.clock()
            for body in bodies:
                try:
                    msg = decode(body, expect=(PartSignal,))
                except DecodeError as e:
                    log.error("part_signal_undecodable", reason=str(e))
                    continue
                self._on_signal(msg, got)
            now = self.clock()
            if self.failure is not None:
                if self.start_at is None:
                    return
                continue  # measuring stops; wait for finish()
            if self.start_at is None:
                if self.stop.is_set():
                    self._decided.set()  # cancelled or stopping before the start: nothing measured
                    return
                if self._ready_at is not None and now > self._ready_at + self.join_timeout:
                    self._fail(self._timed_out(now))
                    return
                if self._ready.is_set() and now - last_ready >= READY_EVERY_S:
                    last_ready = now
                    self._send("ready")
                    if self.coordinator:
                        self._joined.ready(0, self.token, now)
                if not self.coordinator and self._ready.is_set() and now - last_ping >= PING_EVERY_S:
                    last_ping = now
                    self._send("ping", t0=now)
                if self.coordinator and self._ready.is_set():
                    group = self._joined.group(now)
                    if group is not None:
                        at = now + self.start_lead_s
                        self._send("start", start_at=at, group=group)
                        self._agree(at, group, 0.0, now)
                if self._pending_start is not None and (self._samples or now >= self._pending_start.start_at - 0.5):
                    s, best = self._pending_start, best_sample(self._samples)
                    assert s.start_at is not None and s.group is not None
                    self._agree(s.start_at, s.group, 0.0 if best is None else best.offset_s, now)
                continue
            if now - last_alive >= self.alive_every_s:
                last_alive = now
                self._send("alive")
            lost = silent({i: t for i, t in self._heard.items() if i not in self._done}, now, self.silence_s)
            if lost:
                i = lost[0]
                self._fail(f"load_hosts: part {i} ({self._names.get(i, '?')}) went silent for {self.silence_s:g} s "
                           "while measuring; the run is given up whole")
                self.stop.set()

    def _timed_out(self, now: float) -> str:
        n = self.part.count
        if self.coordinator:
            joined = self._joined.joined(now)
            return (f"load_hosts: {n} but only {joined} worker(s) of pool {self.pool} joined within "
                    f"{self.join_timeout:.0f} s")
        return (f"load_hosts: {n} but part 0's worker (the coordinator) did not start the run within "
                f"{self.join_timeout:.0f} s (fewer than {n} workers of pool {self.pool} free?)")

    def _agree(self, start_at: float, group: dict[int, str], offset_s: float, now: float) -> None:
        self.start_at, self.group = start_at, dict(group)
        self._local_start = local_instant(start_at, offset_s)
        self._heard = {i: now for i in group if i != self.part.index}
        self._pending_start = None
        log.info("part_start_agreed", run_id=self.run.run_id, part=self.part.index, group=group[0],
                 start_in_s=round(self._local_start - now, 3), clock_offset_s=round(offset_s, 6))
        self._decided.set()

    def _on_signal(self, msg: PartSignal, got: float) -> None:
        if msg.token == self.token or msg.run_id != self.run.run_id or msg.count != self.part.count:
            return
        self._names.setdefault(msg.index, msg.worker)
        kind = msg.kind
        if self.start_at is not None:
            # Measuring: only the group's members count.
            if self.group is None or self.group.get(msg.index) != msg.token:
                return
            self._names[msg.index] = msg.worker
            if kind in ("ready", "ping"):
                # Not started yet (it missed the one-shot start, or waits for a clock sample):
                # never proof that it measures. The coordinator repeats the start while it is
                # ahead, and answers pings; a member still not measuring goes silent and is lost.
                if self.coordinator and self.start_at is not None and got < self.start_at and self.group:
                    self._send("start", start_at=self.start_at, group=self.group)
                if kind == "ping" and self.coordinator:
                    self._send("pong", t0=msg.t0, t1=got, t2=self.clock(), reply_to=msg.token)
                return
            self._heard[msg.index] = got
            if kind == "done":
                self._done.add(msg.index)
            elif kind == "abort" and msg.index not in self._done:
                self._fail(f"load_hosts: part {msg.index} ({msg.worker}) gave up: {msg.reason}")
                self.stop.set()
            return
        if kind == "abort" and not msg.requeued:
            # Given up for good: it will not come back, so no group can form on this take.
            self._fail(f"load_hosts: part {msg.index} ({msg.worker}) gave up: {msg.reason}")
            return
        if self.coordinator:
            if kind == "ready":
                self._names[msg.index] = msg.worker
                self._joined.ready(msg.index, msg.token, got)
            elif kind == "abort":
                self._joined.leave(msg.index, msg.token)
            elif kind == "ping":
                self._send("pong", t0=msg.t0, t1=got, t2=self.clock(), reply_to=msg.token)
            return
        if kind == "pong" and msg.reply_to == self.token:
            assert msg.t0 is not None and msg.t1 is not None and msg.t2 is not None
            self._samples.append(clock_sample(msg.t0, msg.t1, msg.t2, got))
            self._samples = [best_sample(self._samples)]
        elif kind == "start" and msg.group is not None and msg.group.get(self.part.index) == self.token:
            self._pending_start = msg
