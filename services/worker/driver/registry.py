"""The load drivers by the name a spec gives them (``driver: native`` or ``driver: sysbench``)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from services.common.errors import LoadError
from services.worker.driver.contract import Driver
from services.worker.driver.native.parent import run_load
from services.worker.driver.sysbench.driver import check_target as sysbench_target_check
from services.worker.driver.sysbench.driver import check_workload as sysbench_workload_check
from services.worker.driver.sysbench.driver import run_sysbench

#: native: benchfleet's own pinned load processes; sysbench: the sysbench 1.0 binary on the worker.
DRIVERS: Mapping[str, Driver] = MappingProxyType({"native": run_load, "sysbench": run_sysbench})


def driver_for(name: str) -> Driver:
    """The driver a run spec names; LoadError (the run fails) for a name this worker does not know."""
    try:
        return DRIVERS[name]
    except KeyError:
        raise LoadError(f"driver {name!r}: this worker knows {', '.join(sorted(DRIVERS))}") from None


def check_target(name: str, target: object) -> None:
    """TargetError, before anything connects, for a target the driver ``name`` cannot reach as
    the spec asks (sysbench: verified TLS)."""
    if name == "sysbench":
        sysbench_target_check(target)


def check_workload(name: str, workload: object) -> None:
    """LoadError, before anything runs, for a workload the driver ``name`` cannot run here: a
    script this worker does not have (sysbench), any script (native, which runs none)."""
    script = getattr(workload, "script", None)
    if script is None:
        return
    if name == "sysbench":
        sysbench_workload_check(workload)  # type: ignore[arg-type]
    else:
        raise LoadError(f"workloads.{getattr(workload, 'key', script)}.script: driver {name} runs no Lua script "
                        "(driver: sysbench does)")
