"""What a report, a comparison or a history shows and how it tests: the one options type (the
formats they render are render/registry.py's)."""

from __future__ import annotations

from dataclasses import dataclass

from services.reporting import metrics_catalog as mc
from services.reporting.collapse import DEFAULT_FRACTION
from services.reporting.stats import (
    DEFAULT_ALPHA,
    DEFAULT_CV_THRESHOLD,
    DEFAULT_MIN_EFFECT,
)
from services.reporting.tables import MODES, Mode


@dataclass(frozen=True)
class ReportOptions:
    """The table's shape and metric, which tables, and the statistics every table shares."""

    mode: Mode = "ratio"
    metric: str = "qps"
    #: Add the seeds' ``*`` to cells whose CV exceeds ``cv_threshold``.
    mark_high_cv: bool = False
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    cv_threshold: float = DEFAULT_CV_THRESHOLD
    collapse_fraction: float = DEFAULT_FRACTION
    #: A table of every recorded metric, not only the chosen one (``--all-tables``; the formats that
    #: carry every table, JSON, ODS and HTML, set it).
    all_tables: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        mc.metric(self.metric)  # raises ValueError naming the known metrics

    @property
    def table_metric(self) -> mc.Metric:
        """The metric of the chosen table."""
        return mc.metric(self.metric)

    def needs_results(self) -> bool:
        """Whether the whole stored results must be read (series, histograms, server report), not
        only the result columns."""
        return self.all_tables or not self.table_metric.column
