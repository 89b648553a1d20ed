"""Whether a campaign may spread its runs over several load hosts (spec ``load_hosts``)."""

from __future__ import annotations

#: The most load hosts one run may be spread over (the spec's bound).
MAX_LOAD_HOSTS = 16

def check_load_hosts(n: int, fewest_threads: int, driver: str, managed_targets: list[str],
                     fresh_workloads: list[str] = ()) -> None:  # type: ignore[assignment]
    """ValueError naming ``load_hosts`` unless a campaign can split its runs over ``n`` hosts: a
    connection per part, the native driver (it starts at a barrier), one server all parts
    reach (a managed target is started by, and lives on, one worker), and tables prepared once
    (a workload whose table is built afresh before every run would be rebuilt by every part)."""
    if n <= 1:
        return
    if fewest_threads < n:
        raise ValueError(f"load_hosts: {n} parts need at least {n} threads per run; threads has {fewest_threads}")
    if driver != "native":
        raise ValueError(f"load_hosts: {n} needs driver: native (the sysbench driver cannot start at a barrier)")
    if managed_targets:
        raise ValueError(f"load_hosts: {n} needs dsn targets (every load host must reach the same server); "
                         f"managed: {', '.join(managed_targets)}")
    if fresh_workloads:
        raise ValueError(f"load_hosts: {n} cannot split {', '.join(fresh_workloads)}: its table is built afresh "
                         "before every run, which one worker must do alone")

