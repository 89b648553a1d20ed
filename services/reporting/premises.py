"""Premise checks for the seed studies: does a campaign test what its seed tested?

A study reproduces a seed only when its premise holds: the small key buffer really misses, the
ranges stay inside the table, the two "builds" are two server binaries, the pool target runs the
pool. Each check returns a ``Premise`` whose detail carries the numbers it rests on, taken from
the campaign; the study runner (examples/studies/run) prints them on the study's page and fails
the study when one does not hold. Spec checks run before anything is submitted; result checks on
the stored results. Pure: campaigns come in as CampaignData with whole results.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

from services.common.messages.builds import SYSTEM_BUILD
from services.common.results.stalls import MIN_COMPLETED_PER_CONNECTION
from services.common.spec.campaign import CampaignSpec
from services.common.spec.targets import ManagedTarget
from services.reporting.analysis import CampaignData

#: Key_reads per transaction below which a key cache "never missed": one miss in a hundred
#: transactions is no test of a cache's behaviour under misses.
MIN_MISSES_PER_TXN = 0.01
#: The seed's range width relative to its table: delta 1,000,000 on 20M rows is 5%. A delta above
#: this fraction of the table makes most ranges run past its end.
MAX_DELTA_FRACTION = 0.10


@dataclass(frozen=True)
class Premise:
    """One premise of a study: whether it holds, and the numbers that say so."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"- [{'x' if self.ok else ' '}] **{self.name}**: {'holds' if self.ok else 'NOT MET'}. {self.detail}"


# ------------------------------------------------------------------------------- spec checks


def ranges_inside_table(spec: CampaignSpec) -> Premise:
    """Every select_random_ranges delta is a small part of the table, as the seed's 5% was."""
    limit = spec.data.table_size * MAX_DELTA_FRACTION
    wide = [(w.key, int(w.option("delta"))) for w in spec.workloads
            if w.name == "select_random_ranges" and w.option("delta") > limit]
    if not wide:
        deltas = ", ".join(f"{w.key}: {w.option('delta'):,}" for w in spec.workloads if w.name == "select_random_ranges")
        return Premise("ranges stay inside the table", True,
                       f"deltas ({deltas}) are at most {MAX_DELTA_FRACTION:.0%} of {spec.data.table_size:,} rows.")
    return Premise("ranges stay inside the table", False, "; ".join(
        f"{key}: delta {d:,} is more than {MAX_DELTA_FRACTION:.0%} of {spec.data.table_size:,} rows, so most ranges "
        "run to the end of the table (the seed's 1,000,000 was 5% of 20M rows)" for key, d in wide) + ".")


def has_shape(spec: CampaignSpec, workloads: Sequence[str], threads: Sequence[int], seed: str) -> Premise:
    """The spec runs the seed's workloads (by name or label) and thread counts."""
    have_w = {w.name for w in spec.workloads} | {w.key for w in spec.workloads}
    missing_w = [w for w in workloads if w not in have_w]
    missing_t = [t for t in threads if t not in spec.threads]
    name = f"{seed}'s workloads and thread counts"
    if not missing_w and not missing_t:
        return Premise(name, True, f"workloads {', '.join(workloads)}; threads {', '.join(map(str, threads)) or 'any'}.")
    parts = ([f"workloads missing: {', '.join(missing_w)}"] if missing_w else []) + (
        [f"thread counts missing: {', '.join(map(str, missing_t))}"] if missing_t else [])
    return Premise(name, False, "; ".join(parts) + ".")


def names_distinct_builds(spec: CampaignSpec) -> Premise:
    """At least two targets name different registered builds (not two settings of one binary)."""
    builds = {t.name: t.build or SYSTEM_BUILD for t in spec.targets if isinstance(t, ManagedTarget)}
    distinct = sorted(set(builds.values()))
    ok = len(distinct) >= 2
    return Premise("two server builds", ok,
                   f"targets name {'the builds' if ok else 'only'} {', '.join(distinct) or 'none'}"
                   + ("." if ok else "; the seeds compared two builds, this compares settings of one."))


def engine_is(spec: CampaignSpec, engine: str, seed: str) -> Premise:
    return Premise(f"{engine} like {seed}", spec.data.engine == engine, f"data.engine is {spec.data.engine}.")


# ------------------------------------------------------------------------------- result checks


def _per_cell(data: CampaignData, name: str) -> dict[tuple[str, str, int], list[float]]:
    """Status counter ``name`` per transaction, by (target, workload, threads), over ok runs."""
    out: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for row in data.runs:
        r = row.result
        if row.status != "ok" or r is None or not r.totals.transactions or name not in r.server.status_deltas:
            continue
        out[(row.target, row.workload, row.threads)].append(r.server.status_deltas[name] / r.totals.transactions)
    return out


def _hit_ratio(data: CampaignData) -> float | None:
    reads = requests = 0
    for row in data.runs:
        if row.status == "ok" and row.result is not None:
            reads += row.result.server.status_deltas.get("Key_reads", 0)
            requests += row.result.server.status_deltas.get("Key_read_requests", 0)
    return 1 - reads / requests if requests else None


def key_cache_misses(data: CampaignData, *, min_per_txn: float = MIN_MISSES_PER_TXN) -> Premise:
    """The key cache misses in every cell: mean Key_reads per transaction at least ``min_per_txn``
    (the small-buffer half of the key cache study, and random points/ranges' "index does not fit")."""
    cells = {k: statistics.fmean(v) for k, v in _per_cell(data, "Key_reads").items()}
    name = "the key cache misses"
    if not cells:
        return Premise(name, False, "no result recorded Key_reads (a dsn target without status, or no ok run).")
    low = sorted((v, k) for k, v in cells.items() if v < min_per_txn)
    lo_v, (lo_t, lo_w, lo_n) = min((v, k) for k, v in cells.items())
    hi_v, (hi_t, hi_w, hi_n) = max((v, k) for k, v in cells.items())
    hit = _hit_ratio(data)
    detail = (f"Key_reads per transaction from {lo_v:.2f} ({lo_t} {lo_w} t={lo_n}) to {hi_v:.2f} ({hi_t} {hi_w} "
              f"t={hi_n}) over {len(cells)} cells" + (f"; key cache hit ratio {hit:.4f}" if hit is not None else ""))
    if not low:
        return Premise(name, True, detail + ".")
    return Premise(name, False, detail + f"; {len(low)} of {len(cells)} cells below {min_per_txn} misses per "
                   "transaction: there the cache never missed, so segments are not tested under misses.")


def key_cache_fits(data: CampaignData) -> Premise:
    """The large-buffer half: the index fits, so nothing is ever evicted: the key cache still had
    unused blocks (Key_blocks_unused > 0) at the end of every run. Key_reads alone would not tell,
    as a server started for the run reads every block once."""
    ends = [(row.target, row.workload, row.threads, row.result.server.status_end.get("Key_blocks_unused"))
            for row in data.runs if row.status == "ok" and row.result is not None]
    known = [e for e in ends if e[3] is not None]
    if not known:
        return Premise("the index fits the key cache", False, "no result recorded Key_blocks_unused.")
    full = [e for e in known if e[3] == 0]
    least = min(known, key=lambda e: e[3])
    detail = (f"Key_blocks_unused at the end of {len(known)} runs: at least {least[3]:,} ({least[0]} {least[1]} "
              f"t={least[2]})")
    if not full:
        return Premise("the index fits the key cache", True, detail + ".")
    return Premise("the index fits the key cache", False,
                   detail + f"; {len(full)} runs ended with a full key cache, so it evicted blocks.")


def key_cache_full(data: CampaignData) -> Premise:
    """The small-buffer half, beyond Key_reads: the key cache was full (Key_blocks_unused 0) at the
    end of every run, so its misses were evictions. A server started for a run reads every block
    it touches once, so a cache that never filled misses too, as the large buffer shows."""
    ends = [(row.target, row.workload, row.threads, row.result.server.status_end.get("Key_blocks_unused"))
            for row in data.runs if row.status == "ok" and row.result is not None]
    known = [e for e in ends if e[3] is not None]
    name = "the small key cache fills (its misses are evictions)"
    if not known:
        return Premise(name, False, "no result recorded Key_blocks_unused.")
    free = [e for e in known if e[3] > 0]
    detail = f"{len(known) - len(free)} of {len(known)} runs ended with Key_blocks_unused 0"
    if not free:
        return Premise(name, True, detail + ".")
    cells = sorted({f"{t} {w} t={n}" for t, w, n, _ in free})
    threads = sorted({n for _, _, n, _ in free})
    return Premise(name, False, detail + f"; {len(free)} ended with free blocks (at most {max(e[3] for e in free):,}), "
                   f"all at {', '.join(map(str, threads))} thread(s): {', '.join(cells)}; there part of the misses "
                   "were a started server's first reads, not evictions.")


def windows_long_enough(data: CampaignData) -> Premise:
    """Every successful run's window held at least ``MIN_COMPLETED_PER_CONNECTION`` completed
    transactions per connection (no "short" quality flag): a shorter window measured its ends."""
    runs = [row for row in data.runs if row.status == "ok"]
    short = sorted((row for row in runs if "short" in row.flags), key=lambda r: (r.workload, r.target, r.threads))
    name = "windows long enough to measure"
    if not short:
        return Premise(name, True, f"none of {len(runs)} successful runs completed fewer than "
                                   f"{MIN_COMPLETED_PER_CONNECTION:g} transactions per connection.")
    cells = sorted({f"{r.target} {r.workload} t={r.threads} "
                    f"({r.tps * r.measured_s / r.threads:.1f} per connection)" for r in short})
    return Premise(name, False, f"{len(short)} of {len(runs)} successful runs completed fewer than "
                   f"{MIN_COMPLETED_PER_CONNECTION:g} transactions per connection (a window shorter than that many "
                   f"mean response times): {', '.join(cells)}; give them a longer duration (duration_by_threads).")


def ran_distinct_builds(data: CampaignData) -> Premise:
    """The targets ran different server binaries (sha256 as recorded in their results)."""
    by_target: dict[str, set[str]] = defaultdict(set)
    for row in data.runs:
        if row.status == "ok" and row.result is not None and row.result.server.server_sha256:
            by_target[row.target].add(f"{row.result.server.build_version} sha256:{row.result.server.server_sha256[:12]}")
    described = "; ".join(f"{t}: {', '.join(sorted(v))}" for t, v in sorted(by_target.items()))
    distinct = {d for v in by_target.values() for d in v}
    return Premise("two server builds ran", len(distinct) >= 2,
                   (described or "no result recorded a server digest") + ".")


def ran_allocators(data: CampaignData, expected: dict[str, str]) -> Premise:
    """Each target ran with the allocator its spec asked for, as found in the server's memory map."""
    seen: dict[str, set[str]] = defaultdict(set)
    for row in data.runs:
        if row.status == "ok" and row.result is not None:
            seen[row.target].add(row.result.server.malloc or "not recorded")
    wrong = {t: sorted(seen.get(t, {"no ok run"})) for t, m in expected.items() if seen.get(t) != {m}}
    detail = "; ".join(f"{t}: {', '.join(sorted(seen.get(t, {'no ok run'})))}" for t in expected)
    return Premise("each allocator was loaded", not wrong, detail + ".")


def ran_thread_handling(data: CampaignData, expected: dict[str, str]) -> Premise:
    """Each target's server ran the thread_handling it was meant to (its effective value)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for row in data.runs:
        if row.status == "ok" and row.result is not None:
            seen[row.target].add(str(row.result.server.variables.get("thread_handling")))
    ok = all(seen.get(t) == {v} for t, v in expected.items())
    return Premise("thread_handling as intended", ok,
                   "; ".join(f"{t}: {', '.join(sorted(seen.get(t, {'no ok run'})))}" for t in expected) + ".")
