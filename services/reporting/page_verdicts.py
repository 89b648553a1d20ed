"""A page's marks from one family of verdicts: every compared cell of every table on the page,
judged together by ``verdicts.judge_groups`` so the false-discovery rate holds for the page.

A cell shown twice (the chosen table and its metric's absolute table) is one member; so are
two metrics whose figures are proportional in every run (q/s and tps when every transaction
runs the same statements), which would otherwise count one finding twice.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

from services.reporting import metrics_catalog as mc
from services.reporting.analysis import NamedTable
from services.reporting.campaign_noise import BetweenCampaigns
from services.reporting.log_ratio import Figures
from services.reporting.tables import DECISION_MARK, MARK_COLLAPSE, MARK_HIGH_CV, MARK_SHORT, MARK_STALL, FamilyNote
from services.reporting.verdicts import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    CellFigures,
    Page,
    Verdict,
    judge_groups,
)

#: Marks a page keeps when it replaces a cell's verdict mark: they say something else.
_KEPT = (MARK_HIGH_CV, MARK_COLLAPSE, MARK_STALL, MARK_SHORT)

#: (scope, metric key, target, baseline, workload, threads): one member of a page's family.
_Ident = tuple[str, str, str, str, str, int]


@dataclass(frozen=True)
class JudgedPage:
    """The page's tables marked by their verdicts, the family note and one verdict Page per direction."""

    tables: tuple[NamedTable, ...]
    family: FamilyNote
    pages: tuple[Page, ...]


#: Server status counters whose fewer-per-transaction is known to be better (reads that missed a cache).
KNOWN_BETTER_FEWER = frozenset({"Key_reads", "Innodb_buffer_pool_reads", "Innodb_data_reads",
                                "Created_tmp_disk_tables", "Select_full_join", "Sort_merge_passes"})


def direction(m: mc.Metric) -> bool | None:
    """A metric's better direction for a verdict: None for a server status counter without a
    known better direction (Com_select per transaction is neither), which only "differs"."""
    if m.key.startswith(mc.STATUS_PREFIX) and m.key[len(mc.STATUS_PREFIX):] not in KNOWN_BETTER_FEWER:
        return None
    return m.higher_is_better


def _proportional(a: Figures, b: Figures) -> bool:
    """Whether two metrics' figures of one side stand in one ratio in every repetition."""
    if a.keys() != b.keys() or not a:
        return False
    ratios = [x / y for k in a if (x := a[k]) is not None and (y := b[k]) is not None and y]
    return len(ratios) == len(a) and all(math.isclose(r, ratios[0], rel_tol=1e-9) for r in ratios)


def judge_tables(tables: Sequence[NamedTable], *, scopes: Sequence[str] = (), alpha: float = DEFAULT_ALPHA,
                 min_effect: float = DEFAULT_MIN_EFFECT, shared_blocks: bool = True,
                 between: BetweenCampaigns | None = None) -> JudgedPage:
    """Judge every compared cell of ``tables`` as one family and mark them by their verdicts.
    ``scopes`` tells apart tables whose rows carry the same labels (a comparison's per-target
    tables); ``shared_blocks`` False for sides from two campaigns, whose own shifts ``between``
    gives when earlier campaigns showed them."""
    scopes = tuple(scopes) or ("",) * len(tables)
    members: dict[_Ident, tuple[CellFigures, bool | None]] = {}
    for scope, named in zip(scopes, tables):
        spec = named.table.spec
        for row in named.table.rows:
            for t, c in zip(named.table.threads, row.cells):
                if c.figures is not None:
                    ident = (scope, named.metric.key, row.target, spec.baseline, row.workload, t)
                    label = f"{scope + ': ' if scope else ''}{c.figures.key} ({named.metric.unit})"
                    members.setdefault(ident, (dataclasses.replace(c.figures, key=label), direction(named.metric)))
    alias: dict[_Ident, _Ident] = {}
    for ident, (figs, _) in members.items():
        if ident[1] == "tps" and (qps := (ident[0], "qps", *ident[2:])) in members:
            q = members[qps][0]
            if _proportional(q.target, figs.target) and _proportional(q.baseline, figs.baseline):
                alias[ident] = qps
    groups: dict[bool | None, list[_Ident]] = {}
    for ident, (_, way) in members.items():
        if ident not in alias:
            groups.setdefault(way, []).append(ident)
    order = list(groups)
    pages = judge_groups([([members[i][0] for i in groups[w]], w) for w in order], family="page",
                         alpha=alpha, min_effect=min_effect, shared_blocks=shared_blocks, between=between)
    verdict: dict[_Ident, Verdict] = {i: v for w, p in zip(order, pages) for i, v in zip(groups[w], p.verdicts)}
    selection = pages[0].selection if pages else None
    note = FamilyNote(selection.family_size if selection else 0, selection.n_selected if selection else 0,
                      alpha, selection.interval_level if selection else 1 - alpha, min_effect, shared_blocks)
    out = []
    for scope, named in zip(scopes, tables):
        spec = named.table.spec
        rows = []
        for row in named.table.rows:
            cells = []
            for t, c in zip(named.table.threads, row.cells):
                ident = (scope, named.metric.key, row.target, spec.baseline, row.workload, t)
                v = verdict.get(alias.get(ident, ident))
                if c.figures is not None and v is not None:
                    kept = "".join(ch for ch in c.mark if ch in _KEPT)
                    # A cell with no number (a zero baseline) keeps no verdict mark beside its n/a.
                    mark = (DECISION_MARK[v.decision] if c.value is not None else "") + kept
                    c = dataclasses.replace(c, verdict=v, mark=mark)
                cells.append(c)
            rows.append(dataclasses.replace(row, cells=tuple(cells)))
        # A page that compares nothing (one target) keeps the table's own legend.
        table = dataclasses.replace(named.table, rows=tuple(rows), family=note if members else None)
        out.append(dataclasses.replace(named, table=table))
    return JudgedPage(tuple(out), note, tuple(pages))
