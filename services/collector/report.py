"""`collector report`: a campaign's settings and comparison table, read from the results DB."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from services.common.store import Store

from .table_formats import render_csv, render_markdown, render_settings
from .tables import Measurement, TableSpec, build_table, render_text

#: Metrics a table can show, with their unit and whether higher is better.
METRICS = {"qps": ("q/s", True), "tps": ("tps", True), "p95_ms": ("p95 ms", False), "p99_ms": ("p99 ms", False)}


@dataclass(frozen=True)
class ReportOptions:
    mode: Literal["ratio", "delta", "absolute"] = "ratio"
    metric: str = "qps"
    fmt: Literal["text", "markdown", "csv"] = "text"
    high_cv: bool = False


def render_report(store: Store, campaign_ref: str, opts: ReportOptions) -> list[str]:
    """Lines of the report: settings, then the table, in the chosen format."""
    c = store.campaign(campaign_ref)
    if c is None:
        raise LookupError(f"no campaign {campaign_ref!r}")
    spec = c.spec
    unit, higher = METRICS[opts.metric]
    rows = store.results(c.campaign_id)
    measurements = [
        Measurement(r.target, r.workload, r.threads, r.repetition,
                    getattr(r, opts.metric) if r.status == "ok" else None, failed=r.status != "ok")
        for r in rows
    ]
    mode = opts.mode if len(spec.targets) > 1 else "absolute"
    table = build_table(
        measurements,
        TableSpec(
            targets=tuple(t.name for t in spec.targets),
            baseline=spec.baseline_name,
            workloads=tuple(w.key for w in spec.workloads),
            threads=tuple(sorted(spec.threads)),
            mode=mode,
            unit=unit,
            mark_high_cv=opts.high_cv,
            higher_is_better=higher,
        ),
    )
    if opts.fmt == "csv":
        return render_csv(table)
    settings = spec.model_dump(mode="json", exclude_none=True)
    settings["campaign_id"] = c.campaign_id
    head = [f"Campaign {c.campaign_id} ({c.state})"] + render_settings(settings) + [""]
    if opts.fmt == "markdown":
        return head + render_markdown(table)
    return head + render_text(table)
