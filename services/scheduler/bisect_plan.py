"""The campaign of one bisect step: the user's spec with two managed targets, the good build and the
midpoint build (each a copy of the spec's baseline target with its ``build:`` replaced and named for
its build), only the named cells, and the step's repetitions; its name and description link it to
the bisect it belongs to."""

from __future__ import annotations

import json
import re
from typing import Sequence

from services.common.messages.runs import RunSpec
from services.common.spec.campaign import CampaignSpec
from services.common.spec.targets import ManagedTarget
from services.scheduler import plan

#: (workload, threads): one cell the bisect judges.
Cell = tuple[str, int]

#: The longest campaign name (``spec.fields.NAME_PATTERN``).
_LONGEST_NAME = 64
_VERSION = re.compile(r"\d+")


def parse_cell(text: str) -> Cell:
    """``oltp_point_select:8`` as a cell; ValueError naming the flag when it is not one."""
    workload, sep, threads = text.rpartition(":")
    if not sep or not workload or not threads.isdigit() or int(threads) < 1:
        raise ValueError(f"--cell: {text!r} is not WORKLOAD:THREADS (e.g. oltp_point_select:8)")
    return workload, int(threads)


def cells_of(spec: CampaignSpec, wanted: Sequence[Cell]) -> list[Cell]:
    """The cells to judge: ``wanted`` (each checked against the spec), or every cell of the spec."""
    if not wanted:
        return [(w.key, n) for w in spec.workloads for n in spec.threads]
    workloads = {w.key for w in spec.workloads}
    for w, n in wanted:
        if w not in workloads:
            raise ValueError(f"--cell: workload {w!r} is not in spec {spec.name} (workloads: {', '.join(sorted(workloads))})")
        if n not in spec.threads:
            raise ValueError(f"--cell: {n} threads is not in spec {spec.name} (threads: {', '.join(map(str, spec.threads))})")
    return list(dict.fromkeys(wanted))


def template_target(spec: CampaignSpec) -> ManagedTarget:
    """The target each step copies: the spec's baseline, which must be a managed server (and the
    spec on one pool: each step's builds are announced and measured by one pool's workers)."""
    if spec.pools:
        raise ValueError(f"pools: a bisect probes one pool, not {', '.join(spec.pools)}; give pool: NAME instead")
    t = next(t for t in spec.targets if t.name == spec.baseline_name)
    if not isinstance(t, ManagedTarget):
        raise ValueError(f"targets: baseline {t.name} is a {t.kind} target; a bisect starts builds, so it copies a "
                         "managed baseline target (kind: managed)")
    return t


def step_name(spec_name: str, bisect_id: str, step: int) -> str:
    """``NAME-bisect-ID-sK``: every step of one bisect shares ``NAME-bisect-ID``."""
    tail = f"-bisect-{bisect_id}-s{step}"
    return spec_name[:_LONGEST_NAME - len(tail)] + tail


def step_spec(spec: CampaignSpec, cells: Sequence[Cell], good: str, build: str, repeat: int, *,
              name: str, description: str) -> CampaignSpec:
    """The spec of one step: the baseline target run as ``good`` and as ``build``, the cells' workloads
    and thread counts, ``repeat``; everything else (data, durations, seed, pool) as the user's spec."""
    base = json.loads(template_target(spec).model_dump_json())
    keep_w = {w for w, _ in cells}
    keep_n = {n for _, n in cells}
    data = json.loads(spec.model_dump_json())
    data.update(name=name, description=description, repeat=repeat, baseline=good,
                targets=[{**base, "name": good, "build": good}, {**base, "name": build, "build": build}],
                workloads=[w for w, m in zip(data["workloads"], spec.workloads) if m.key in keep_w],
                threads=[n for n in spec.threads if n in keep_n])
    return CampaignSpec.model_validate(data)


def step_runs(spec: CampaignSpec, cells: Sequence[Cell], campaign_id: str) -> list[RunSpec]:
    """The step's runs: the named cells of both builds, in the plan's alternating order, numbered
    anew (a cell the spec holds only because its row and column are kept is not run)."""
    wanted = set(cells)
    runs = [r for r in plan.run_specs(spec, campaign_id) if (r.cell.workload, r.cell.threads) in wanted]
    return [r.model_copy(update={"seq": i, "total_runs": len(runs)}) for i, r in enumerate(runs)]


def version_order(names_versions: Sequence[tuple[str, str]]) -> list[str]:
    """Build names by their version's numbers (10.11.9 before 10.11.18), then by name: the order
    ``--range`` walks when the builds are not listed."""
    return [n for n, v in sorted(names_versions, key=lambda nv: ([int(x) for x in _VERSION.findall(nv[1])[:3]], nv[0]))]


def range_between(ordered: Sequence[str], good: str, bad: str) -> list[str]:
    """``ordered`` from ``good`` to ``bad``; ValueError naming the flag when one is missing or out of order."""
    for flag, b in (("--good", good), ("--bad", bad)):
        if b not in ordered:
            raise ValueError(f"{flag}: build {b!r} is not announced by the pool (announced: {', '.join(ordered) or 'none'})")
    i, j = ordered.index(good), ordered.index(bad)
    if i >= j:
        raise ValueError(f"--range: {good} does not come before {bad} in version order ({', '.join(ordered)})")
    return list(ordered[i:j + 1])
