"""`collector report`: a campaign's settings, comparison tables and collapse list, read from the
results DB, as text, Markdown, CSV, JSON, ODS or a self-contained HTML file with plots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from services.common.store import Store
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import (
    AnalysisOptions,
    CampaignData,
    CollapseFinding,
    NamedTable,
    all_tables,
    build,
    collapse_findings,
    collapse_lines,
)
from services.reporting.collapse import DEFAULT_FRACTION
from services.reporting.render.formats import (
    render_csv,
    render_markdown,
    render_settings,
)
from services.reporting.stats import (
    DEFAULT_ALPHA,
    DEFAULT_CV_THRESHOLD,
    DEFAULT_MIN_EFFECT,
)
from services.reporting.tables import render_text

#: Metrics a table can show, with their unit and whether higher is better (kept for callers
#: of the first version; ``metrics_catalog`` has the full list, including ``status:NAME``).
METRICS = {k: (m.unit, m.higher_is_better) for k, m in mc.BUILTIN.items()}
FORMATS = ("text", "markdown", "csv", "json", "ods", "html")


@dataclass(frozen=True)
class ReportOptions:
    mode: Literal["ratio", "delta", "absolute"] = "ratio"
    metric: str = "qps"
    fmt: Literal["text", "markdown", "csv", "json", "ods", "html"] = "text"
    high_cv: bool = False
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    cv_threshold: float = DEFAULT_CV_THRESHOLD
    collapse_fraction: float = DEFAULT_FRACTION
    #: Text and Markdown: print every table (each recorded metric), not only the chosen one.
    all_tables: bool = False

    def analysis(self) -> AnalysisOptions:
        return AnalysisOptions(alpha=self.alpha, min_effect=self.min_effect, cv_threshold=self.cv_threshold,
                               mark_high_cv=self.high_cv, collapse_fraction=self.collapse_fraction)

    def needs_documents(self) -> bool:
        """Whether the whole stored results must be read (series, histograms, status), not only columns."""
        return self.fmt in ("json", "ods", "html") or self.all_tables or not mc.metric(self.metric).column


@dataclass(frozen=True)
class Report:
    """Everything computed for one campaign's report, ready for any renderer."""

    data: CampaignData
    opts: ReportOptions
    tables: tuple[NamedTable, ...]
    collapsed: tuple[CollapseFinding, ...]

    @property
    def main(self) -> NamedTable:
        return self.tables[0]


def analyse(data: CampaignData, opts: ReportOptions) -> Report:
    """Tables and collapse findings of a campaign (pure)."""
    a = opts.analysis()
    collapsed = tuple(collapse_findings(data, a))
    m = mc.metric(opts.metric)
    if opts.needs_documents() and (opts.fmt in ("json", "ods", "html") or opts.all_tables):
        tables = tuple(all_tables(data, m, opts.mode, a, collapsed))
    else:
        shape = opts.mode if len(data.targets) > 1 else "absolute"
        tables = (NamedTable(f"{m.key}_{shape}", f"{m.description} ({shape})", m,
                             build(data, m, opts.mode, a, collapsed)),)
    return Report(data, opts, tables, collapsed)


def head_lines(data: CampaignData) -> list[str]:
    return [f"Campaign {data.campaign_id} ({data.state})"] + render_settings(data.settings) + [""]


def render_lines(report: Report) -> list[str]:
    """Text, Markdown or CSV lines of a report."""
    fmt = report.opts.fmt
    if fmt == "csv":
        return render_csv(report.main.table)
    lines = head_lines(report.data)
    tables = report.tables if report.opts.all_tables else report.tables[:1]
    for i, named in enumerate(tables):
        if len(tables) > 1:
            lines.extend(([""] if i else []) + ([f"## {named.title}", ""] if fmt == "markdown" else [named.title, ""]))
        lines.extend(render_markdown(named.table) if fmt == "markdown" else render_text(named.table))
    lines.append("")
    lines.extend(collapse_lines(report.collapsed, report.opts.collapse_fraction))
    return lines


def load_report(store: Store, campaign_ref: str, opts: ReportOptions) -> Report:
    from services.reporting.load import load

    return analyse(load(store, campaign_ref, with_docs=opts.needs_documents()), opts)


def render_report(store: Store, campaign_ref: str, opts: ReportOptions) -> list[str]:
    """Lines of the report: settings, then the table, in the chosen format (text, markdown, csv)."""
    return render_lines(load_report(store, campaign_ref, opts))


def render_html_report(report: Report) -> str:
    """The self-contained HTML report with plots."""
    from services.reporting.render.html import render_html
    from services.reporting.render.plots import all_plots

    return render_html(report.data, report.tables, report.collapsed, report.opts.collapse_fraction,
                       all_plots(report.data))
