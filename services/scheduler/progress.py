"""Progress of a campaign as one line: a bar, runs done/total, the current cell, an ETA."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TextIO

from services.common.spec.durations import format_duration
from services.common.terminal import escape_controls


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    failed: int
    cancelled: int
    running: int
    current: str | None
    elapsed_s: float
    planned_run_s: float

    @property
    def finished(self) -> int:
        return self.done + self.failed + self.cancelled

    def eta_s(self) -> float | None:
        """Remaining time from the pace so far, or the plan's estimate before any run ends."""
        remaining = self.total - self.finished
        if remaining <= 0:
            return 0.0
        if self.finished:
            return remaining * self.elapsed_s / self.finished
        return remaining * self.planned_run_s / max(1, self.running)


def render(p: Progress, columns: int = 80) -> str:
    """``[#####.....]  12/48 runs  1 failed  now a oltp_point_select t=4 r1  ETA 3m20s``, in fewer
    than ``columns`` characters (a line as wide as the terminal wraps on many terminals): the
    current cell is shortened first, then dropped."""
    limit = max(20, columns - 1)
    width = max(10, min(30, limit // 6))
    frac = p.finished / p.total if p.total else 1.0
    filled = int(round(frac * width))
    head = [f"[{'#' * filled}{'.' * (width - filled)}]", f"{p.finished}/{p.total} runs"]
    if p.failed:
        head.append(f"{p.failed} failed")
    if p.cancelled:
        head.append(f"{p.cancelled} cancelled")
    eta = p.eta_s()
    tail = [f"ETA {format_duration(round(eta))}"] if eta is not None and p.finished < p.total else []
    line = "  ".join(head + tail)
    if p.current:
        room = limit - len(line) - 2
        now = f"now {escape_controls(p.current)}"
        if len(now) > room:
            now = now[:room - 1] + "~" if room >= 12 else ""
        if now:
            line = "  ".join(head + [now] + tail)
    return line[:limit]


class ProgressLine:
    """Writes progress to a terminal as one line redrawn in place (cleared to the end, so a
    shorter line leaves nothing of a longer one), or, to a file or pipe, a line now and then."""

    def __init__(self, stream: TextIO, *, tty: bool, columns: int = 80, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream, self.tty, self.columns, self.every_s, self.clock = stream, tty, columns, every_s, clock
        self._last = ""
        self._last_at: float | None = None

    def show(self, p: Progress) -> None:
        line = render(p, self.columns)
        if self.tty:
            self.stream.write("\r" + line + CLEAR_TO_END)
        elif line != self._last and (self._last_at is None or p.finished >= p.total
                                     or self.clock() - self._last_at >= self.every_s):
            self.stream.write(line + "\n")
            self._last_at = self.clock()
        else:
            return
        self._last = line
        self.stream.flush()

    def note(self, text: str) -> None:
        """A line of its own above the progress line (which is drawn again below it)."""
        text = escape_controls(text)  # a results DB's error text is shown, never obeyed
        if self.tty:
            self.stream.write("\r" + CLEAR_TO_END + text + "\n" + self._last + CLEAR_TO_END)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._last:
            self.stream.write("\n")
            self.stream.flush()


#: ANSI "erase to end of line": what remains of a longer earlier line goes.
CLEAR_TO_END = "\x1b[K"


@dataclass
class ConsumerWatch:
    """Says when a pool's runs queue has had no consumer (no worker) for a while, and when one
    comes back; fed with the queue's consumer count at each poll."""

    pool: str
    #: Seconds without a consumer before the first notice, then between reminders.
    grace_s: float = 5.0
    remind_s: float = 300.0
    #: Workers each run needs at once (spec load_hosts): fewer connected is as good as none.
    needed: int = 1
    _since: float | None = None
    _told_at: float | None = None

    def update(self, consumers: int, now: float) -> str | None:
        """The notice to print now, if any."""
        if consumers >= self.needed:
            told, self._since, self._told_at = self._told_at, None, None
            if told is None:
                return None
            if self.needed > 1:
                return f"note: {consumers} workers of pool {self.pool} are connected, enough for load_hosts: {self.needed}"
            return f"note: a worker of pool {self.pool} is connected again"
        if self._since is None:
            self._since = now
        waited = now - self._since
        due = self.grace_s if self._told_at is None else (self._told_at - self._since) + self.remind_s
        if waited < due:
            return None
        self._told_at = now
        if consumers > 0:
            return (f"note: only {consumers} worker(s) on pool {self.pool} for {format_duration(round(waited))}, and "
                    f"each run needs {self.needed} at once (load_hosts: {self.needed}); start more: worker --pool {self.pool}")
        return f"note: no worker on pool {self.pool} for {format_duration(round(waited))}; start one: worker --pool {self.pool}"
