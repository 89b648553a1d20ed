"""The earlier campaigns of a spec's cells, read from the results DB for ``scheduler plan``'s power
line; the arithmetic is reporting/plan_power.py's."""

from __future__ import annotations

from collections import defaultdict

from services.common.config import Settings, with_db_password
from services.common.errors import SettingsError, StoreError
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.reporting.plan_power import CellHistory, PlanPower, plan_power


def earlier_cells(store: Store, spec: CampaignSpec) -> list[CellHistory]:
    """Every earlier campaign's q/s of the spec's cells (targets by name), one entry per campaign and cell."""
    figures: dict[tuple[str, str, int], dict[str, dict[int, float | None]]] = defaultdict(lambda: defaultdict(dict))
    for target in spec.targets:
        for workload in spec.workloads:
            for threads in spec.threads:
                for entry in store.results.history(target.name, workload.key, threads):
                    r = entry.row
                    figures[(r.campaign_id, workload.key, threads)][target.name][r.repetition] = (
                        # Stalled and short runs are left out of every verdict, so of the noise too.
                        r.qps if r.status == "ok" and not r.flags else None)
    return [CellHistory(cid, w, t, {name: dict(by_rep) for name, by_rep in by_target.items()})
            for (cid, w, t), by_target in sorted(figures.items())]


def power_of(spec: CampaignSpec, settings: Settings, detect: float | None) -> PlanPower:
    """The spec's power from the results DB's history; StoreError when the DB cannot be read."""
    try:
        settings = with_db_password(settings)
    except SettingsError as e:
        raise StoreError(str(e)) from None
    store = Store(settings).open(migrate=False)
    try:
        history = earlier_cells(store, spec)
    finally:
        store.close()
    # The page's family: every target but the baseline, in every workload and thread count.
    family = (len(spec.targets) - 1) * len(spec.workloads) * len(spec.threads)
    return plan_power(history, repeat=spec.repeat, family_size=family, detect=detect)
