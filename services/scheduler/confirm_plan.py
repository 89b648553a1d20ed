"""The confirming campaign of a gate: the failing cells alone, with their baseline, re-run with the
same targets (build, options), workloads, data, durations, seed and repeat as the campaign that failed."""

from __future__ import annotations

import json
from typing import Iterable

from services.common.messages.runs import RunSpec
from services.common.spec.campaign import CampaignSpec
from services.scheduler import plan

#: (target, workload, threads): one failing cell.
CellKey = tuple[str, str, int]

SUFFIX = "-confirm"
#: The longest campaign name (``spec.fields.NAME_PATTERN``).
_LONGEST_NAME = 64


def confirming_name(name: str) -> str:
    """The confirming campaign's name: the original's with ``-confirm`` (shortened to fit a name)."""
    return name[:_LONGEST_NAME - len(SUFFIX)] + SUFFIX


def confirming_spec(spec: CampaignSpec, cells: Iterable[CellKey]) -> CampaignSpec:
    """``spec`` narrowed to the failing ``cells``: their targets with the baseline (in the spec's
    order), their workloads and their thread counts; everything else as it was. ValueError naming
    the cell when one is not of the spec."""
    cells = list(cells)
    if not cells:
        raise ValueError("cells: no failing cell to confirm")
    targets = {t.name for t in spec.targets}
    workloads = {w.key for w in spec.workloads}
    for target, workload, threads in cells:
        if target not in targets or workload not in workloads or threads not in spec.threads:
            raise ValueError(f"cells: {target} / {workload} / {threads} threads is not a cell of campaign spec {spec.name}")
        if target == spec.baseline_name:
            raise ValueError(f"cells: {target} is the baseline; a gate fails targets against it")
    keep_t = {c[0] for c in cells} | {spec.baseline_name}
    keep_w = {c[1] for c in cells}
    keep_n = {c[2] for c in cells}
    data = json.loads(spec.model_dump_json())
    data.update(name=confirming_name(spec.name), baseline=spec.baseline_name,
                targets=[t for t in data["targets"] if t["name"] in keep_t],
                workloads=[w for w, m in zip(data["workloads"], spec.workloads) if m.key in keep_w],
                threads=[n for n in spec.threads if n in keep_n])
    return CampaignSpec.model_validate(data)


def confirming_runs(spec: CampaignSpec, cells: Iterable[CellKey], campaign_id: str,
                    now: float | None = None) -> list[RunSpec]:
    """The runs of the confirming campaign (``spec`` from :func:`confirming_spec`): every
    repetition of each failing cell and of its baseline's cell, in the plan's alternating order,
    numbered anew. A cell the narrowed spec holds only because its row and column are kept
    (another target's failure at that workload and thread count) is not run."""
    cells = set(cells)
    wanted = cells | {(spec.baseline_name, w, n) for _, w, n in cells}
    runs = [r for r in plan.run_specs(spec, campaign_id, now)
            if (r.cell.target, r.cell.workload, r.cell.threads) in wanted]
    return [r.model_copy(update={"seq": i, "total_runs": len(runs)}) for i, r in enumerate(runs)]
