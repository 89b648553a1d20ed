"""Read a campaign from the results DB into ``analysis.CampaignData`` (the reports' only I/O)."""

from __future__ import annotations

from typing import Any, Sequence

from services.common.results import TargetBuild
from services.common.store import Store
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.report import Report, analyse


def load(store: Store, ref: str, *, with_results: bool = True) -> CampaignData:
    """The campaign ``ref`` (id, or name for the latest) with its result rows.

    ``with_results`` also reads and decodes every whole stored result (series, histogram, server
    report) into its row; text tables of q/s, tps or p95/p99 need only the columns and skip that cost.
    """
    c = store.campaign(ref)
    if c is None:
        raise LookupError(f"no campaign {ref!r} in the results DB")
    rows = store.results(c.campaign_id)
    if with_results:
        whole = {r.run_id: r for r in store.stored_results(c.campaign_id)}
        rows = [row.with_result(whole.get(row.run_id)) for row in rows]
    spec = c.spec
    settings = spec.public_dump()  # no password_env/password_file in reports and exports
    settings["campaign_id"] = c.campaign_id
    describe_builds(settings, store.target_builds(c.campaign_id))
    return CampaignData(
        campaign_id=c.campaign_id, name=c.name, state=c.state,
        targets=tuple(t.name for t in spec.targets), baseline=spec.baseline_name,
        workloads=tuple(w.key for w in spec.workloads), threads=tuple(sorted(spec.threads)),
        settings=settings, runs=tuple(rows), created_at=c.created_at,
    )


def describe_builds(settings: dict[str, Any], builds: Sequence[TargetBuild]) -> None:
    """Add what each target ran (version, binary digest, allocator) to its settings line; a
    target that ran more than one (hosts with different builds) lists each value."""
    for t in settings.get("targets", []):
        items: dict[str, list[str]] = {}
        for b in builds:
            if b.target == t.get("name"):
                for key, value in b.describe().items():
                    items.setdefault(key, [])
                    if value not in items[key]:
                        items[key].append(value)
        for key, values in items.items():
            t[key] = values[0] if len(values) == 1 else values


def load_report(store: Store, ref: str, opts: ReportOptions) -> Report:
    """The report of campaign ``ref``, reading the whole stored results only when ``opts`` needs them."""
    return analyse(load(store, ref, with_results=opts.needs_results()), opts)
