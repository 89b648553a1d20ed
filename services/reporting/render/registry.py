"""The one table of output formats: each name maps to one renderer, which says what it renders
(a report, a campaign on several pools, a comparison, a history, a spec's change points), whether it writes bytes to a file or text, and its suffix.

Every command that prints a report takes its ``--format`` choices and its rendering from here;
renderers return the text or bytes and the commands write them out.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Literal

if TYPE_CHECKING:
    from services.reporting.compare import CampaignComparison
    from services.reporting.history import History
    from services.reporting.options import ReportOptions
    from services.reporting.pools_compared import PoolsReport
    from services.reporting.report import Report
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


@dataclass(frozen=True)
class _Later:
    """A render function named by its module and name, imported at its first call: a command that
    only lists the formats (its ``--format`` choices) loads none of their code."""

    module: str
    name: str

    def __call__(self, document: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(document)


@dataclass(frozen=True)
class _Lines:
    """A report format printed as lines (text, markdown, csv): its line function, loaded at first use."""

    lines: _Later

    def __call__(self, report: Report) -> str:
        return "\n".join(self.lines(report)) + "\n"


_REPORT, _COMPARE, _HISTORY = "services.reporting.report", "services.reporting.compare", "services.reporting.history"
_CHANGES, _POOLS = "services.reporting.render.changes", "services.reporting.render.pools"
_MACHINE, _HTML = "services.reporting.render.machine_formats", "services.reporting.render.html"

register(Renderer("text", ".txt", report=_Lines(_Later(_REPORT, "render_lines")),
                  pools=_Later(_POOLS, "render_pools_text"), compare=_Later(_COMPARE, "render_compare_text"),
                  history=_Later(_HISTORY, "render_history_text"), changes=_Later(_CHANGES, "render_changes_text")))
register(Renderer("markdown", ".md", report=_Lines(_Later(_REPORT, "render_markdown_lines")),
                  pools=_Later(_POOLS, "render_pools_markdown"), compare=_Later(_COMPARE, "render_compare_markdown"),
                  changes=_Later(_CHANGES, "render_changes_markdown")))
register(Renderer("csv", ".csv", report=_Lines(_Later(_REPORT, "render_csv_lines")),
                  pools=_Later(_POOLS, "render_pools_csv"), compare=_Later(_COMPARE, "render_compare_csv"),
                  history=_Later(_HISTORY, "render_history_csv"), changes=_Later(_CHANGES, "render_changes_csv")))
register(Renderer("json", ".json", report=_Later(_MACHINE, "render_json"), pools=_Later(_POOLS, "render_pools_json"),
                  compare=_Later(_MACHINE, "render_compare_json"), history=_Later(_HISTORY, "render_history_json"),
                  changes=_Later(_CHANGES, "render_changes_json"), every_table=True))
register(Renderer("ods", ".ods", report=_Later(_MACHINE, "render_ods"), pools=_Later(_POOLS, "render_pools_ods"),
                  compare=_Later(_MACHINE, "render_compare_ods"), to_file=True, every_table=True))
register(Renderer("html", ".html", report=_Later(_HTML, "render_html_report"),
                  pools=_Later(_POOLS, "render_pools_html"), compare=_Later(_HTML, "render_compare_html"),
                  every_table=True, plots=True))
