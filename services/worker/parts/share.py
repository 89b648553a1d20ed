"""How one run is split over its load hosts (spec ``load_hosts``): each part's connections, rate,
seed and place among the run's threads. Pure: no broker, no clock."""

from __future__ import annotations

from dataclasses import dataclass

from services.common.messages.parts import PartOf

#: Seeds of parts follow from the run seed by steps of this size modulo the seed range (the
#: prime 2^31-1), so the N parts' seeds are distinct and part 0 keeps the run's seed.
_SEED_STEP = 0x9E3779B1
_SEED_RANGE = 2**31 - 1

@dataclass(frozen=True)
class Share:
    """One part's share of a run: its connections, its open-loop rate, its seed, and where its
    connections sit among the run's (global thread ids ``first_thread`` onwards of
    ``run_threads``), so a split run reads the table as the unsplit run does (per-thread slices)."""

    threads: int
    rate: float | None
    seed: int
    first_thread: int = 0
    run_threads: int = 0

    @property
    def thread_ids(self) -> range:
        """The run's thread ids this share drives."""
        return range(self.first_thread, self.first_thread + self.threads)


def split_threads(threads: int, count: int) -> list[int]:
    """``threads`` over ``count`` parts as evenly as possible, the larger shares first."""
    if not 1 <= count <= threads:
        raise ValueError(f"load_hosts: {count} parts need at least {count} threads, the run has {threads}")
    base, extra = divmod(threads, count)
    return [base + (i < extra) for i in range(count)]


def part_seed(seed: int, index: int) -> int:
    """The seed of part ``index``: part 0 keeps the run's seed; the others are distinct and
    follow from it, so the union of the parts' query streams is reproducible. Within 1..2^31-1."""
    if index == 0:
        return seed
    return 1 + (max(seed, 1) - 1 + index * _SEED_STEP) % _SEED_RANGE


def share_of(threads: int, rate: float | None, seed: int, part: PartOf | None) -> Share:
    """The share of a run a part drives; the whole run when it is not split. The rate is split
    in proportion to the threads, as the native driver splits it over its load processes."""
    if part is None:
        return Share(threads, rate, seed, 0, threads)
    shares = split_threads(threads, part.count)
    mine = shares[part.index]
    return Share(mine, None if not rate else rate * mine / threads, part_seed(seed, part.index),
                 first_thread=sum(shares[:part.index]), run_threads=threads)
