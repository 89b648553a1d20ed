"""False-discovery control over a family of cells: Benjamini–Hochberg q-values and the
Benjamini–Yekutieli (2005) confidence level for intervals of the selected cells.

A page compares tens of cells at once; marking each at p < 0.05 marks about one cell in
twenty of an unchanged pair. BH bounds the expected share of wrong marks among the marked
ones (and, when nothing changed, the chance of any mark at all) at ``alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Selection:
    """BH at ``alpha`` over a family: each member's q-value, which are selected, and the
    confidence level every interval of the family is drawn at so intervals agree with marks."""

    alpha: float
    #: Members with a p-value; a missing p (NaN) is no member, not a 1.
    family_size: int
    qvalues: tuple[float, ...]
    selected: tuple[bool, ...]

    @property
    def n_selected(self) -> int:
        return sum(self.selected)

    @property
    def interval_level(self) -> float:
        """Benjamini–Yekutieli's FCR-adjusted level 1 - R*alpha/m (R selected of m).

        A selected cell's interval at this level excludes "no change" and an unselected one's
        includes it, so an interval never contradicts its mark. With nothing selected the level
        is Bonferroni's 1 - alpha/m, which also keeps every interval across "no change".
        """
        if self.family_size == 0:
            return 1 - self.alpha
        return 1 - max(self.n_selected, 1) * self.alpha / self.family_size


def bh_qvalues(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q-values), as statsmodels' multipletests(method="fdr_bh").

    NaN p-values (cells with nothing to test) stay NaN and do not count in the family size.
    """
    for i, p in enumerate(pvalues):
        if not (math.isnan(p) or 0.0 <= p <= 1.0):
            raise ValueError(f"pvalues[{i}]: {p} is not a probability")
    members = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(members)
    q = [math.nan] * len(pvalues)
    running = 1.0
    # Step-up: the q of rank k is the smallest p_(j) * m / j over j >= k.
    for rank in range(m, 0, -1):
        p, i = members[rank - 1]
        running = min(running, p * m / rank)
        q[i] = running
    return q


def select(pvalues: Sequence[float], alpha: float = 0.05) -> Selection:
    """BH selection at ``alpha``: the cells whose q-value is at most alpha."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    q = bh_qvalues(pvalues)
    return Selection(
        alpha=alpha,
        family_size=sum(1 for p in pvalues if not math.isnan(p)),
        qvalues=tuple(q),
        selected=tuple(not math.isnan(v) and v <= alpha for v in q),
    )
