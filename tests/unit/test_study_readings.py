"""A study's reading cannot overclaim: its numbers are named cells of the page's reports, filled in
by the study runner; a number typed by hand (like the "index about 7 MB" no table showed) fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.reporting import readings
from services.reporting.readings import ReadingError
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import NamedTable
from services.reporting.page_verdicts import judge_tables
from services.reporting.tables import Measurement, Table, TableSpec, build_table

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "studies"
STUDIES = ROOT / "examples" / "studies"
SEEDS = ROOT.parents[1] / "shared" / "seeds"


def study_specs(name: str) -> list[str]:
    """The spec files of study ``name``, as the study runner lists them."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("study_runner", str(STUDIES / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("study_runner", loader))
    loader.exec_module(module)
    return [f for f, _ in module.STUDIES[name][2]]


def inputs(name: str) -> list[str]:
    """What a study asked for (its specs), where a reading may take a number without a cell."""
    return [(STUDIES / f).read_text() for f in study_specs(name)]


def judged(table: Table) -> Table:
    """The table as a page shows it: its cells judged as one family (page_verdicts)."""
    return judge_tables([NamedTable("t", "t", mc.BUILTIN["qps"], table)]).tables[0].table


def delta_table():
    """A delta table of two targets over two thread counts, as `collector report --delta` builds it."""
    values = {("off", 1): [100, 101, 99], ("32", 1): [120, 121, 119], ("off", 8): [200, 202, 198],
              ("32", 8): [150, 152, 148]}
    ms = [Measurement(t, "select", th, i, v) for (t, th), vs in values.items() for i, v in enumerate(vs)]
    return judged(build_table(ms, TableSpec(targets=("off", "32"), baseline="off", workloads=("select",),
                                            threads=(1, 8), mode="delta")))


TABLES = {"keycache-small/delta/qps": delta_table()}


def test_a_reference_is_filled_in_with_the_cell_the_table_prints_and_names_it():
    text = readings.render("32 segments gain {select/32/1@keycache-small/delta/qps} at one thread.", TABLES)
    assert text.startswith("32 segments gain 20.00+ <sub>")
    assert "`select/32/1` in `keycache-small/delta/qps`" in text


def test_min_and_max_pick_the_extreme_cell_and_say_which():
    text = readings.render("from {select/32/*@keycache-small/delta/qps|min} to {select/32/*@keycache-small/delta/qps|max}",
                           TABLES)
    assert text.startswith("from -25.00")
    assert "min of select/32/*: select/32/8" in text and "20.00+" in text


def test_marks_name_the_significant_cells_or_say_there_are_none():
    assert readings.render("{marks@keycache-small/delta/qps}", TABLES) == (
        "marked `+` in `keycache-small/delta/qps`: `select/32/1`; marked `-` in `keycache-small/delta/qps`: `select/32/8`")
    flat = {"t/delta/qps": judged(build_table([Measurement(t, "select", 1, i, 100 + i) for t in ("off", "32")
                                               for i in range(3)],
                                              TableSpec(targets=("off", "32"), baseline="off", workloads=("select",),
                                                        mode="delta")))}
    assert readings.render("{marks@t/delta/qps}", flat) == "no cell of `t/delta/qps` is marked faster or slower"


@pytest.mark.parametrize("template, says", [
    ("{select/64/1@keycache-small/delta/qps}", "no cell with data"),
    ("{select/32/1@keycache-large/delta/qps}", "no table 'keycache-large/delta/qps'"),
    ("{select/32@keycache-small/delta/qps}", "WORKLOAD/TARGET/THREADS"),
    ("{select/32/*@keycache-small/delta/qps}", "needs |min or |max"),
])
def test_a_reference_the_report_does_not_hold_is_refused_by_name(template, says):
    with pytest.raises(ReadingError, match=says.replace("|", r"\|").replace("*", r"\*")):
        readings.render(template, TABLES)


def test_a_typed_number_is_caught_and_an_asked_one_is_not():
    """"index about 7 MB" (typed) fails; "1,000,000 rows" (what the spec asked) and a cell pass."""
    template = "On 1,000,000 rows the index is about 7 MB; 32 segments gain {select/32/1@keycache-small/delta/qps}."
    assert readings.typed_numbers(template, ["table_size: 1000000\nname: \"32\""]) == ["7"]


@pytest.mark.parametrize("reading", sorted(DOCS.glob("*.reading.md")), ids=lambda p: p.name)
def test_a_reading_template_types_no_measured_number(reading):
    name = reading.name.removesuffix(".reading.md")
    template = reading.read_text()
    readings.parse(template)
    typed = readings.typed_numbers(template, inputs(name))
    assert not typed, f"{reading.name} types numbers no spec of the study asked for (make them cells): {typed}"


@pytest.mark.parametrize("page", sorted(p for p in DOCS.glob("*.md") if not p.name.endswith(".reading.md")),
                         ids=lambda p: p.name)
def test_a_page_reading_holds_only_numbers_its_reports_produced(page):
    """The rendered reading of each page: every number is in the page's reports or the study's specs."""
    name = page.name.removesuffix(".md")
    report, _, reading = page.read_text().partition("\n## Reading\n")
    unknown = sorted(readings.numbers(reading) - readings.numbers(report + "".join(inputs(name))))
    assert not unknown, f"{page.name}'s reading holds numbers its reports did not produce: {unknown}"
