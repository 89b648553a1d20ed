"""Read a campaign from the results DB into ``analysis.CampaignData`` (the report's only I/O)."""

from __future__ import annotations

import json

from services.common.store import Store
from services.reporting.analysis import CampaignData, RunData


def load(store: Store, ref: str, *, with_docs: bool = True) -> CampaignData:
    """The campaign ``ref`` (id, or name for the latest) with its results.

    ``with_docs`` also parses every stored result document (series, histogram, server status);
    text tables of q/s, tps or p95/p99 need only the columns and skip that cost.
    """
    c = store.campaign(ref)
    if c is None:
        raise LookupError(f"no campaign {ref!r} in the results DB")
    docs = {}
    if with_docs:
        docs = {run_id: json.loads(text) for run_id, text in store.result_documents(c.campaign_id)}
    runs = tuple(
        RunData(r.run_id, r.target, r.workload, r.threads, r.repetition, r.status, r.qps, r.tps, r.p95_ms,
                r.p99_ms, r.measured_s, r.error, docs.get(r.run_id))
        for r in store.results(c.campaign_id)
    )
    spec = c.spec
    settings = spec.model_dump(mode="json", exclude_none=True)
    settings["campaign_id"] = c.campaign_id
    return CampaignData(
        campaign_id=c.campaign_id, name=c.name, state=c.state,
        targets=tuple(t.name for t in spec.targets), baseline=spec.baseline_name,
        workloads=tuple(w.key for w in spec.workloads), threads=tuple(sorted(spec.threads)),
        settings=settings, runs=runs, created_at=c.created_at,
    )
