"""What a report, a comparison or a history shows and how it tests: the one options type, and the
formats they render (the CLIs take their choices from here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from services.reporting import metrics_catalog as mc
from services.reporting.collapse import DEFAULT_FRACTION
from services.reporting.stats import (
    DEFAULT_ALPHA,
    DEFAULT_CV_THRESHOLD,
    DEFAULT_MIN_EFFECT,
)
from services.reporting.tables import MODES, Mode

Format = Literal["text", "markdown", "csv", "json", "ods", "html"]
#: Every format of a report and of a comparison (a history renders the text-like few it names).
FORMATS: tuple[Format, ...] = get_args(Format)
#: Formats that carry every recorded metric's table, so they need the whole stored results.
FULL_FORMATS: tuple[Format, ...] = ("json", "ods", "html")
#: Formats a report writes only to a file (``--out``): a spreadsheet, a page with inlined plots.
FILE_FORMATS: tuple[Format, ...] = ("ods", "html")


@dataclass(frozen=True)
class ReportOptions:
    """The table's shape and metric, the output format, and the statistics every table shares."""

    mode: Mode = "ratio"
    metric: str = "qps"
    fmt: Format = "text"
    #: Add the seeds' ``*`` to cells whose CV exceeds ``cv_threshold``.
    mark_high_cv: bool = False
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    cv_threshold: float = DEFAULT_CV_THRESHOLD
    collapse_fraction: float = DEFAULT_FRACTION
    #: Text and Markdown: print every table (each recorded metric), not only the chosen one.
    all_tables: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {self.fmt!r}")
        mc.metric(self.metric)  # raises ValueError naming the known metrics

    @property
    def table_metric(self) -> mc.Metric:
        """The metric of the chosen table."""
        return mc.metric(self.metric)

    @property
    def every_table(self) -> bool:
        """Whether the report carries a table of every recorded metric, not only the chosen one."""
        return self.all_tables or self.fmt in FULL_FORMATS

    def needs_results(self) -> bool:
        """Whether the whole stored results must be read (series, histograms, server report), not
        only the result columns."""
        return self.every_table or not self.table_metric.column
