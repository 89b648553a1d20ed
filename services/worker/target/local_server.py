"""The target's server where it runs on this worker's host beside the load."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalServer:
    """The target's server running on this host where it may share the client CPUs: its process
    and the CPUs it may run on."""

    pid: int
    cpus: tuple[int, ...]

    def share_on(self, cpus: tuple[int, ...]) -> float:
        """The part of the server's CPU time taken to fall on ``cpus``: its CPUs among them, of
        all its CPUs (the kernel spreads its threads; /proc tells no CPU of past ticks)."""
        mine = set(self.cpus)
        return len(mine & set(cpus)) / len(mine) if mine else 0.0
