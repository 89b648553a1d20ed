"""Progress of a campaign as one line: a bar, runs done/total, the current cell, an ETA."""

from __future__ import annotations

from dataclasses import dataclass

from services.common.durations import format_duration


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


def render(p: Progress, width: int = 30) -> str:
    """``[#####.....]  12/48 runs  1 failed  now a oltp_point_select t=4 r1  ETA 3m20s``."""
    frac = p.finished / p.total if p.total else 1.0
    filled = int(round(frac * width))
    parts = [f"[{'#' * filled}{'.' * (width - filled)}]", f"{p.finished}/{p.total} runs"]
    if p.failed:
        parts.append(f"{p.failed} failed")
    if p.cancelled:
        parts.append(f"{p.cancelled} cancelled")
    if p.current:
        parts.append(f"now {p.current}")
    eta = p.eta_s()
    if eta is not None and p.finished < p.total:
        parts.append(f"ETA {format_duration(round(eta))}")
    return "  ".join(parts)
