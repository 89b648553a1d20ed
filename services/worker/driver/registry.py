"""The load drivers by the name a spec gives them (``driver: native`` or ``driver: sysbench``)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from services.common.errors import LoadError
from services.worker.driver.contract import Driver
from services.worker.driver.native.parent import run_load
from services.worker.driver.sysbench.driver import check_target as sysbench_target_check
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
