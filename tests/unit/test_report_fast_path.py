"""The HTML report stays complete on its fast path: the page a campaign renders from its rows'
figures (and the whole results of the plotted runs only) equals, byte for byte, the page the
report rendered before the fast path, from every whole result."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.results.figures import RunFigures
from services.reporting.analysis import CampaignData
from services.reporting.render import html as html_module
from services.reporting.render.plots import series_runs
from services.reporting.render.html import render_html_report
from services.reporting.report import ReportOptions, analyse
from tests.unit.report_sample import sample_data

#: The sample campaign's page as the report rendered it before the fast path (commit e2f8045), with
#: the marks and tooltips of the page's verdicts since they replaced the per-cell Welch test.
GOLDEN = Path(__file__).parent / "fixtures" / "report" / "sample.html"


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    """The page says when it was rendered; the golden page was rendered at this time."""
    monkeypatch.setattr(html_module.time, "strftime", lambda fmt, *a: "2026-01-01 00:00:00 UTC")


def lean(data: CampaignData) -> CampaignData:
    """The campaign as the fast path loads it: figures on every row, whole results only where a plot draws a series."""
    drawn = {r.run_id for w in data.workloads for r in series_runs(data, w)[0]}
    rows = tuple(r.with_figures(r.figures) if r.run_id not in drawn else r for r in data.runs)
    return CampaignData(**{**data.__dict__, "runs": rows})


def page(data: CampaignData) -> str:
    return render_html_report(analyse(data, ReportOptions(all_tables=True)))


def test_the_page_from_whole_results_is_the_page_rendered_before():
    """Reading the figures from whole results changes nothing on the page: every table, plot, note and section."""
    assert page(sample_data()) == GOLDEN.read_text()


def test_the_fast_path_renders_the_same_page():
    """With whole results only for the plotted runs, the page is byte for byte the one rendered before."""
    data = lean(sample_data())
    assert 0 < sum(r.result is not None for r in data.runs) < len(data.runs)
    assert page(data) == GOLDEN.read_text()


def test_figures_read_back_from_columns_equal_the_results_own():
    """What the store writes as figure columns gives back the figures of the whole result."""
    for row in sample_data().runs:
        assert row.result is not None
        assert RunFigures.from_columns(RunFigures.columns(row.result)) == row.figures


def test_a_row_stored_before_the_figure_columns_has_no_figures():
    """A row without the figure columns (series_seconds NULL) reads as no figures: the loader decodes its whole result."""
    row = sample_data().runs[0]
    assert row.result is not None
    values = list(RunFigures.columns(row.result))
    values[-1] = None
    assert RunFigures.from_columns(values) is None
