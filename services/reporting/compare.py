"""`collector compare A B`: the same cells across two campaigns (a new build against last
week's), with the same statistics and table formats as a report.

Each target present in both campaigns gets its own table in the seeds' two-target shape: one
row per workload, one column per thread count, cells ``B / A`` with verdict marks. Text,
Markdown and CSV here; JSON and ODS in render/machine_formats.py, HTML in render/html.py.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, NamedTable
from services.common.results.rows import ResultRow
from services.reporting.campaign_noise import UNKNOWN, BetweenCampaigns, Series, between_campaigns
from services.reporting.counts import RunCounts, run_counts, summary
from services.reporting.kept_runs import left_out_reason
from services.reporting.options import ReportOptions
from services.reporting.page_verdicts import judge_tables
from services.reporting.render.formats import md_text, render_csv, render_markdown
from services.reporting.stalls import StalledRun, mark_stalls, stall_lines, stalled_runs
from services.reporting.tables import Measurement, TableSpec, build_table, render_text
from services.reporting.gate import Regression, regressions as gate_regressions
from services.reporting.verdicts import Page

#: Row labels of the two campaigns in every comparison table (the header says which is which).
LABEL_A, LABEL_B = "A", "B"


@dataclass(frozen=True)
class CampaignComparison:
    """Campaign B against campaign A: one table per target both ran, every compared cell judged in
    one family (``pages``)."""

    a: CampaignData
    b: CampaignData
    metric: mc.Metric
    tables: tuple[NamedTable, ...]
    #: The target each table compares, in the same order as ``tables``.
    targets: tuple[str, ...]
    #: Targets that only one campaign has (not compared).
    unmatched: tuple[str, ...]
    #: Runs of the compared targets marked for a stall or an overrun, per campaign.
    stalled_a: tuple[StalledRun, ...] = ()
    stalled_b: tuple[StalledRun, ...] = ()
    #: The page's verdicts (one family over every table, unpaired: two campaigns share no block).
    pages: tuple[Page, ...] = ()
    #: The client's and the server's counts of each campaign's compared successful runs.
    counts_a: tuple[RunCounts, ...] = ()
    counts_b: tuple[RunCounts, ...] = ()
    #: The campaigns' own shifts, from earlier campaigns of these cells, in every interval (None: unknown).
    between: BetweenCampaigns | None = None


def compare_campaigns(a: CampaignData, b: CampaignData, opts: ReportOptions = ReportOptions(),
                      between: BetweenCampaigns | None = None) -> CampaignComparison:
    """One table per target common to both campaigns, over their common workloads and thread
    counts, of ``opts.metric`` in ``opts.mode``; ``between`` (``campaign_noise``) widens every
    interval by the shifts of whole campaigns that earlier campaigns showed."""
    m = opts.table_metric
    targets = [t for t in a.targets if t in b.targets]
    workloads = tuple(w for w in a.workloads if w in b.workloads)
    threads = tuple(t for t in a.threads if t in b.threads)
    if not targets or not workloads or not threads:
        raise ValueError(f"campaigns {a.campaign_id} and {b.campaign_id} share no cell "
                         "(target, workload and thread count)")
    tables = []
    stalled = {label: [r for r in stalled_runs(data.runs) if r.target in targets and r.workload in workloads
                       and r.threads in threads] for label, data in ((LABEL_A, a), (LABEL_B, b))}
    for target in targets:
        ms = [Measurement(label, r.workload, r.threads, r.repetition, mc.row_value(m, r), failed=r.status != "ok",
                          left_out=left_out_reason(r.flags) if r.status == "ok" else "")
              for label, data in ((LABEL_A, a), (LABEL_B, b)) for r in data.runs if r.target == target]
        spec = TableSpec(targets=(LABEL_A, LABEL_B), baseline=LABEL_A, workloads=workloads, threads=threads,
                         mode=opts.mode, unit=m.unit, alpha=opts.alpha, min_effect=opts.min_effect,
                         cv_threshold=opts.cv_threshold, mark_high_cv=opts.mark_high_cv,
                         higher_is_better=m.higher_is_better, paired=False)
        # The table's rows are the campaigns: a run of this target marks the row of its campaign.
        here = [dataclasses.replace(r, target=label) for label, runs in stalled.items() for r in runs
                if r.target == target]
        tables.append(NamedTable(f"{m.key}_{target}", f"target {target}: {m.description}, B against A",
                                 m, mark_stalls(build_table(ms, spec), here)))
    unmatched = tuple(sorted(set(a.targets) ^ set(b.targets)))
    # Repetition 1 of A and of B ran days apart: their blocks pair nothing.
    judged = judge_tables(tables, scopes=targets, alpha=opts.alpha, min_effect=opts.min_effect, shared_blocks=False,
                          between=between)
    counts = {label: tuple(run_counts(r for r in data.runs if r.target in targets and r.workload in workloads
                                      and r.threads in threads)) for label, data in ((LABEL_A, a), (LABEL_B, b))}
    return CampaignComparison(a, b, m, judged.tables, tuple(targets), unmatched,
                              tuple(stalled[LABEL_A]), tuple(stalled[LABEL_B]), judged.pages,
                              counts[LABEL_A], counts[LABEL_B], between)


def shift_series(runs: Iterable[ResultRow], metric: mc.Metric, targets: Iterable[str],
                 cells: Iterable[tuple[str, int]], *, leave_out: Iterable[str] = ()) -> list[Series]:
    """Each (target, workload, threads) series of ``metric`` by campaign, from kept runs only (a stall
    or a short window is left out of every verdict, so of the noise too), campaigns of ``leave_out``
    excepted (the two compared)."""
    wanted_targets, wanted_cells, skip = set(targets), set(cells), set(leave_out)
    by: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r.status != "ok" or r.flags or r.campaign_id in skip:
            continue
        if r.target not in wanted_targets or (r.workload, r.threads) not in wanted_cells:
            continue
        v = mc.row_value(metric, r)
        if v is not None and v > 0 and math.isfinite(v):
            by[(r.target, r.workload, r.threads)][r.campaign_id].append(v)
    return [dict(series) for _, series in sorted(by.items())]


def campaign_shifts(runs: Iterable[ResultRow], a: CampaignData, b: CampaignData, metric: mc.Metric,
                    targets: Iterable[str]) -> BetweenCampaigns | None:
    """The between-campaign noise of the compared cells, from earlier campaigns' ``runs`` (A and B left out)."""
    cells = [(w, t) for w in a.workloads if w in b.workloads for t in a.threads if t in b.threads]
    return between_campaigns(shift_series(runs, metric, targets, cells, leave_out=(a.campaign_id, b.campaign_id)))


def count_summary_lines(c: CampaignComparison) -> list[str]:
    """Each campaign's client and server counts over its compared runs, in the report's summary line
    (``collector report`` lists the runs)."""
    return [f"{label}: {summary(counts).line()}"
            for label, counts in ((LABEL_A, c.counts_a), (LABEL_B, c.counts_b))]


def compare_stall_lines(c: CampaignComparison) -> list[str]:
    """The runs behind the ``~`` marks, per campaign; nothing when no compared run was marked."""
    lines: list[str] = []
    for label, data, found in ((LABEL_A, c.a, c.stalled_a), (LABEL_B, c.b, c.stalled_b)):
        if found:
            lines += ["", f"{label} = {data.campaign_id}:"] + stall_lines(found)
    return lines


def regressions(c: CampaignComparison, beyond: float) -> list[Regression]:
    """Cells where B is slower than A by more than ``beyond`` (a fraction: 0.05 is 5%) beyond doubt
    and by at least the page's min-effect (``gate.regressions`` over the page's tables)."""
    return gate_regressions(c.tables, beyond, targets=c.targets)


def _ran(data: CampaignData, target: str) -> str:
    """What ``target`` ran in a campaign (version, digest, allocator), from its settings line."""
    for t in data.settings.get("targets", []):
        if t.get("name") == target:
            return " ".join(f"{k}={','.join(v) if isinstance(v, list) else v}"
                            for k in ("version", "sha256", "malloc_loaded") if (v := t.get(k)))
    return ""


def header_lines(c: CampaignComparison) -> list[str]:
    lines = [f"A = {c.a.campaign_id} ({c.a.name}, {c.a.state})", f"B = {c.b.campaign_id} ({c.b.name}, {c.b.state})"]
    for t in c.targets:
        a, b = _ran(c.a, t), _ran(c.b, t)
        if a or b:
            lines.append(f"target {t}: A ran {a or 'n/a'}; B ran {b or 'n/a'}")
    if c.unmatched:
        lines.append(f"Targets in only one campaign (not compared): {', '.join(c.unmatched)}")
    lines.append(c.between.describe() if c.between is not None else UNKNOWN)
    return lines + [""]


def render_compare_text(c: CampaignComparison) -> str:
    """The comparison as aligned text tables under the campaigns' header."""
    return _text(c, markdown=False)


def render_compare_markdown(c: CampaignComparison) -> str:
    """The comparison as GitHub Markdown tables."""
    return _text(c, markdown=True)


def render_compare_csv(c: CampaignComparison) -> str:
    """Every table's long-format CSV lines, each row led by the target it compares."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for i, (t, target) in enumerate(zip(c.tables, c.targets)):
        rows = list(csv.reader(render_csv(t.table)))
        for j, row in enumerate(rows):
            if j == 0 and i > 0:
                continue
            w.writerow(["compared_target" if j == 0 else target] + row)
    return out.getvalue()


def _text(c: CampaignComparison, *, markdown: bool) -> str:
    lines = header_lines(c)
    for i, t in enumerate(c.tables):
        if i:
            lines.append("")
        lines.extend([f"## {t.title}", ""] if markdown else [t.title, ""])
        lines.extend(render_markdown(t.table, t.key) if markdown else render_text(t.table))
    stalls = compare_stall_lines(c)
    lines.extend([md_text(x) for x in stalls] if markdown else stalls)
    counted = count_summary_lines(c)
    lines.extend(["", "## Client and server counts", ""] + [f"- {md_text(x)}" for x in counted] if markdown
                 else ["", "Client and server counts:"] + [f"  {x}" for x in counted])
    return "\n".join(lines) + "\n"
