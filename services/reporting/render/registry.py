"""The one table of output formats: each name maps to one renderer, which says what it renders
(a report, a campaign on several pools, a comparison, a history, a spec's change points), whether it writes bytes to a file or text, and its suffix.

Every command that prints a report takes its ``--format`` choices and its rendering from here;
renderers return the text or bytes and the commands write them out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Literal

from services.reporting.compare import CampaignComparison, render_compare_csv, render_compare_markdown, render_compare_text
from services.reporting.history import History, render_history_csv, render_history_json, render_history_text
from services.reporting.options import ReportOptions
from services.reporting.pools_compared import PoolsReport
from services.reporting.render.changes import (render_changes_csv, render_changes_json, render_changes_markdown,
                                               render_changes_text)
from services.reporting.render.html import render_compare_html, render_html_report
from services.reporting.render.machine_formats import render_compare_json, render_compare_ods, render_json, render_ods
from services.reporting.render.pools import (render_pools_csv, render_pools_html, render_pools_json, render_pools_markdown,
                                             render_pools_ods, render_pools_text)
from services.reporting.report import Report, render_csv_lines, render_lines, render_markdown_lines
from services.reporting.spec_history import SpecChanges

#: What a renderer can render: ``collector report``'s campaign (``pools``: one that ran on several pools),
#: ``compare``'s two, ``history``'s cell, ``history SPEC --changes``'s change points.
Document = Literal["report", "pools", "compare", "history", "changes"]
#: The format a command prints when not told otherwise: the seeds' text tables.
DEFAULT_FORMAT = "text"


@dataclass(frozen=True)
class Renderer:
    """One output format: a function per document it renders (None: not that document) and how its
    output is written."""

    name: str
    #: The file suffix its output takes, dot included.
    suffix: str
    report: Callable[[Report], str | bytes] | None = None
    pools: Callable[[PoolsReport], str | bytes] | None = None
    compare: Callable[[CampaignComparison], str | bytes] | None = None
    history: Callable[[History], str] | None = None
    changes: Callable[[SpecChanges], str] | None = None
    #: Bytes (a zip, say) that only a file holds: every command refuses it without ``--out``.
    to_file: bool = False
    #: Carries every recorded metric's table, not only the chosen one.
    every_table: bool = False
    #: Draws time plots: a report in it reads the plotted runs' series, and goes to a file.
    plots: bool = False

    def renders(self, document: Document) -> bool:
        return getattr(self, document) is not None

    def render_report(self, report: Report) -> str | bytes:
        if self.report is None:
            raise ValueError(f"format {self.name} renders no report")
        return self.report(report)

    def render_pools(self, p: PoolsReport) -> str | bytes:
        if self.pools is None:
            raise ValueError(f"format {self.name} renders no campaign on several pools")
        return self.pools(p)

    def render_compare(self, c: CampaignComparison) -> str | bytes:
        if self.compare is None:
            raise ValueError(f"format {self.name} renders no comparison")
        return self.compare(c)

    def render_history(self, h: History) -> str:
        if self.history is None:
            raise ValueError(f"format {self.name} renders no history")
        return self.history(h)

    def render_changes(self, c: SpecChanges) -> str:
        if self.changes is None:
            raise ValueError(f"format {self.name} renders no change points")
        return self.changes(c)

    def options(self, opts: ReportOptions) -> ReportOptions:
        """``opts`` as this format needs them: every table for the formats that carry them all."""
        return replace(opts, all_tables=True) if self.every_table else opts


_RENDERERS: dict[str, Renderer] = {}


def register(r: Renderer) -> Renderer:
    """Add a format; its name must be new."""
    if r.name in _RENDERERS:
        raise ValueError(f"format {r.name!r} is already registered")
    _RENDERERS[r.name] = r
    return r


def unregister(name: str) -> None:
    """Remove a format (a test's own, once the test is done)."""
    del _RENDERERS[name]


def names(document: Document) -> tuple[str, ...]:
    """The formats that render ``document``, in the order they were registered (the ``--format`` choices)."""
    return tuple(name for name, r in _RENDERERS.items() if r.renders(document))


def renderer(name: str, document: Document = "report") -> Renderer:
    """The renderer of format ``name`` for ``document``; ValueError naming the formats it has."""
    r = _RENDERERS.get(name)
    if r is None or not r.renders(document):
        raise ValueError(f"format must be one of {', '.join(names(document))}, got {name!r}")
    return r


def _text(lines: Callable[[Report], list[str]]) -> Callable[[Report], str]:
    return lambda report: "\n".join(lines(report)) + "\n"


register(Renderer("text", ".txt", report=_text(render_lines), pools=render_pools_text, compare=render_compare_text,
                  history=render_history_text, changes=render_changes_text))
register(Renderer("markdown", ".md", report=_text(render_markdown_lines), pools=render_pools_markdown,
                  compare=render_compare_markdown, changes=render_changes_markdown))
register(Renderer("csv", ".csv", report=_text(render_csv_lines), pools=render_pools_csv, compare=render_compare_csv,
                  history=render_history_csv, changes=render_changes_csv))
register(Renderer("json", ".json", report=render_json, pools=render_pools_json, compare=render_compare_json,
                  history=render_history_json, changes=render_changes_json, every_table=True))
register(Renderer("ods", ".ods", report=render_ods, pools=render_pools_ods, compare=render_compare_ods, to_file=True,
                  every_table=True))
register(Renderer("html", ".html", report=render_html_report, pools=render_pools_html, compare=render_compare_html,
                  every_table=True, plots=True))
