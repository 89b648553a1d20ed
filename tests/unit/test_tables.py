"""Golden-text tests of the comparison tables, on literal q/s numbers."""

from __future__ import annotations

import pytest

from services.reporting import metrics_catalog as mc
from services.reporting.analysis import NamedTable
from services.reporting.log_ratio import log_ratio
from services.reporting.page_verdicts import judge_tables
from services.reporting.render.formats import render_csv, render_markdown, render_settings
from services.reporting.tables import Measurement, Table, TableSpec, build_table, render_text


def judged(measurements, spec: TableSpec) -> Table:
    """The table as a page shows it: its compared cells judged as one family (page_verdicts)."""
    m = mc.BUILTIN["qps"] if spec.higher_is_better else mc.BUILTIN["p95_ms"]
    return judge_tables([NamedTable("t", "t", m, build_table(measurements, spec))],
                        alpha=spec.alpha, min_effect=spec.min_effect).tables[0].table


def runs(target, workload, threads, values, start=1):
    return [Measurement(target, workload, threads, start + i, v) for i, v in enumerate(values)]


# MariaDB vs MySQL (seed 003's shape): tight runs, so clear differences are significant.
TWO = (
    runs("MySQL", "oltp_simple", 1, [1000.0, 1002.0, 998.0])
    + runs("MariaDB", "oltp_simple", 1, [1022.0, 1024.0, 1021.0])
    + runs("MySQL", "oltp_simple", 8, [4000.0, 4010.0, 3990.0])
    + runs("MariaDB", "oltp_simple", 8, [4030.0, 3950.0, 4060.0])
    + runs("MySQL", "update_index", 1, [500.0, 505.0, 495.0])
    + runs("MariaDB", "update_index", 1, [440.0, 445.0, 442.0])
    + runs("MySQL", "update_index", 8, [900.0, 910.0, 890.0])
    + runs("MariaDB", "update_index", 8, [903.0])
)
TWO_SPEC = TableSpec(("MySQL", "MariaDB"), "MySQL", ("oltp_simple", "update_index"))

# Key cache segments off / 8 / 32 (seed 000's shape), with a noisy cell, a single run and a failure.
THREE = (
    runs("off", "oltp_simple", 1, [1000.0, 1010.0, 990.0])
    + runs("8", "oltp_simple", 1, [1060.0, 1058.0, 1062.0])
    + runs("32", "oltp_simple", 1, [1003.0, 995.0, 1012.0])
    + runs("off", "oltp_simple", 16, [5000.0, 5050.0, 4950.0])
    + runs("8", "oltp_simple", 16, [4500.0, 4520.0, 4480.0])
    + runs("32", "oltp_simple", 16, [5000.0, 4000.0, 6000.0])
    + runs("off", "select", 1, [800.0, 810.0, 790.0])
    + runs("8", "select", 1, [801.0])
    + runs("32", "select", 1, [790.0, 805.0])
    + [Measurement("32", "select", 1, 3, None, failed=True)]
)
THREE_SPEC = TableSpec(("off", "8", "32"), "off", ("oltp_simple", "select"), mode="delta", mark_high_cv=True)

# Thread pool study (seed 001): thread-per-connection collapses at 4096 clients, the pool holds.
POOL = (
    runs("thread-per-connection", "oltp_point_select", 16, [172083.0, 171500.0, 172600.0])
    + runs("threadpool", "oltp_point_select", 16, [170100.0, 171000.0, 170500.0])
    + runs("thread-per-connection", "oltp_point_select", 4096, [282.0, 301.0, 275.0])
    + runs("threadpool", "oltp_point_select", 4096, [98100.0, 97900.0, 98450.0])
)
POOL_SPEC = TableSpec(
    ("thread-per-connection", "threadpool"), "thread-per-connection", ("oltp_point_select",), mode="absolute"
)

LEGEND_OFF = [
    " +    faster than off: the adjusted interval excludes no change",
    " -    slower than off: the adjusted interval excludes no change",
    " =    equivalent to off: the adjusted interval lies within +-1% (or every repetition gave the same figure)",
    " °    undecided: the adjusted interval spans both no change and a change of 1% or more; more repetitions might tell",
    "      5 cells compared on this page (paired over the blocks both ran, log ratios), Benjamini-Hochberg at a 5% "
    "false-discovery rate: 2 marked, of which about 0.1 expected by chance (a 5% test per cell would mark 0.25 cells "
    "of an unchanged pair); intervals at 98% (Benjamini-Yekutieli)",
    " ?    not enough repetitions to test (fewer than 2 successful runs on a side)",
    " *    unusually high STDEV: coefficient of variation above 5%",
    " n/a  no successful run to compare",
]


def test_two_targets_ratio_one_row_per_test():
    """With two targets each test is one row of MariaDB/MySQL*100, marked + / - / ° / ? as the page's
    verdicts say, and the legend states the family they were judged in."""
    assert render_text(judged(TWO, TWO_SPEC)) == [
        "                Number of threads",
        "                  1        8",
        " sysbench test",
        "  oltp_simple     102.23+  100.33°",
        "  update_index     88.47-  100.33?",
        "",
        " (MariaDB q/s / MySQL q/s * 100)",
        "",
        " +  faster than MySQL: the adjusted interval excludes no change",
        " -  slower than MySQL: the adjusted interval excludes no change",
        " =  equivalent to MySQL: the adjusted interval lies within +-1% (or every repetition gave the same figure)",
        " °  undecided: the adjusted interval spans both no change and a change of 1% or more; more repetitions "
        "might tell",
        "    3 cells compared on this page (paired over the blocks both ran, log ratios), Benjamini-Hochberg at a 5% "
        "false-discovery rate: 2 marked, of which about 0.1 expected by chance (a 5% test per cell would mark 0.15 "
        "cells of an unchanged pair); intervals at 96.7% (Benjamini-Yekutieli)",
        " ?  not enough repetitions to test (fewer than 2 successful runs on a side)",
    ]


def test_a_table_no_page_judged_has_no_verdict_marks():
    """Before its page judges it, a table marks no cell faster or slower: there is one way to a verdict."""
    lines = render_text(build_table(TWO, TWO_SPEC))
    assert lines[3:5] == ["  oltp_simple     102.23   100.33", "  update_index     88.47   100.33"]
    assert not any("Welch" in x or "faster" in x for x in lines)


def test_three_targets_delta_grouped_with_cv_marks_and_failures():
    """Three targets give a heading per test and an `X / off` row per target, with `*`, n/a and a failure note."""
    assert render_text(judged(THREE, THREE_SPEC)) == [
        "                Number of threads",
        "                  1         16",
        " sysbench test",
        "  oltp_simple",
        "      8 / off       6.00+   -10.00-",
        "     32 / off       0.33°     0.00°*",
        "  select",
        "      8 / off       0.12?      n/a",
        "     32 / off      -0.93°      n/a",
        "",
        " ( 8/off*100)-100",
        " (32/off*100)-100",
        "",
        *LEGEND_OFF,
        "",
        " 1 failed run excluded:",
        "   32 / select / 1 thread: 1 of 3 runs failed",
    ]


def test_seed_layout_columns():
    """Single-digit deltas land in the seed's columns: first at 21, one every 8 characters."""
    data = []
    for threads in (1, 4, 8, 16, 32, 64, 128):
        data += runs("off", "oltp_complex_ro", threads, [1000.0, 1010.0, 990.0])
        data += runs("8", "oltp_complex_ro", threads, [992.0, 1002.0, 982.0])
        data += runs("32", "oltp_complex_ro", threads, [1010.8, 1020.8, 1000.8])
    lines = render_text(build_table(data, TableSpec(("off", "8", "32"), "off", ("oltp_complex_ro",), mode="delta")))
    assert lines[:6] == [
        "                   Number of threads",
        "                     1       4       8       16      32      64      128",
        " sysbench test",
        "  oltp_complex_ro",
        "      8 / off        -0.80   -0.80   -0.80   -0.80   -0.80   -0.80   -0.80",
        "     32 / off         1.08    1.08    1.08    1.08    1.08    1.08    1.08",
    ]


def test_absolute_wide_values_stay_aligned():
    """Absolute q/s as wide as 172083 keep every column aligned, with the baseline as a plain row."""
    assert render_text(judged(POOL, POOL_SPEC))[:6] == [
        "                           Number of threads",
        "                             16       4096",
        " sysbench test",
        "  oltp_point_select",
        "    thread-per-connection    172061      286",
        "    threadpool               170533°   98150+",
    ]


def test_ratio_of_two_decimal_places_and_explicit_threads():
    """Thread columns can be fixed by the spec; a thread count with no runs shows n/a everywhere."""
    spec = TableSpec(("MySQL", "MariaDB"), "MySQL", ("oltp_simple",), threads=(1, 64))
    lines = render_text(judged(TWO, spec))
    assert lines[3] == "  oltp_simple     102.23+     n/a"
    assert " n/a  no successful run to compare" in lines


def test_missing_baseline_is_na_in_ratio_but_value_in_absolute():
    """Without a baseline run a ratio cell is n/a, while an absolute cell still shows its mean marked `?`."""
    data = runs("B", "select", 4, [10.0, 11.0])
    ratio = render_text(build_table(data, TableSpec(("A", "B"), "A", ("select",))))
    absolute = render_text(build_table(data, TableSpec(("A", "B"), "A", ("select",), mode="absolute")))
    assert ratio[3] == "  select          n/a"
    assert absolute[4:6] == ["    A               n/a", "    B             10.50?"]


def test_redelivered_run_counts_once():
    """A result stored twice for the same repetition does not add a fake repetition."""
    data = TWO + runs("MariaDB", "update_index", 8, [903.0])
    assert render_text(judged(data, TWO_SPEC))[4] == "  update_index     88.47-  100.33?"


def test_min_effect_and_alpha_come_from_the_spec():
    """Raising the minimum effect to 5% turns a confirmed 2.23% gain into `=`, and the legend says so."""
    spec = TableSpec(("MySQL", "MariaDB"), "MySQL", ("oltp_simple",), min_effect=0.05)
    lines = render_text(judged(TWO, spec))
    assert lines[3] == "  oltp_simple     102.23=  100.33°"
    assert "within +-5%" in lines[9]


def test_spec_errors():
    """A baseline that is not a target, or a ratio table with one target, is refused with the reason."""
    with pytest.raises(ValueError, match="baseline 'X' is not one of the targets"):
        TableSpec(("A", "B"), "X", ("select",))
    with pytest.raises(ValueError, match="needs a target besides the baseline"):
        TableSpec(("A",), "A", ("select",))
    with pytest.raises(ValueError, match="mode must be one of"):
        TableSpec(("A", "B"), "A", ("select",), mode="percent")


def test_markdown_has_same_numbers_and_marks():
    """The Markdown table carries the same numbers and marks, with `*` escaped so it renders literally."""
    assert render_markdown(judged(THREE, THREE_SPEC))[:22] == [
        "Columns: number of threads.",
        "",
        "| sysbench test | target | 1 | 16 |",
        "| :--- | :--- | ---: | ---: |",
        "| oltp_simple |  8 / off | 6.00[^1]+ | -10.00[^2]- |",
        "| oltp_simple | 32 / off | 0.33[^3]° | 0.00[^4]°\\* |",
        "| select |  8 / off | 0.12[^5]? | n/a |",
        "| select | 32 / off | -0.93[^6]° | n/a |",
        "",
        "`( 8/off*100)-100`  ",
        "`(32/off*100)-100`  ",
        "",
        "- `+` faster than off: the adjusted interval excludes no change",
        "- `-` slower than off: the adjusted interval excludes no change",
        "- `=` equivalent to off: the adjusted interval lies within +-1% (or every repetition gave the same figure)",
        "- `°` undecided: the adjusted interval spans both no change and a change of 1% or more; more repetitions "
        "might tell",
        "- 5 cells compared on this page (paired over the blocks both ran, log ratios), Benjamini-Hochberg at a 5% "
        "false-discovery rate: 2 marked, of which about 0.1 expected by chance (a 5% test per cell would mark 0.25 "
        "cells of an unchanged pair); intervals at 98% (Benjamini-Yekutieli)",
        "- `?` not enough repetitions to test (fewer than 2 successful runs on a side)",
        "- `*` unusually high STDEV: coefficient of variation above 5%",
        "- `n/a` no successful run to compare",
        "",
        "1 failed run excluded:",
    ]


def test_csv_one_line_per_cell_with_statistics():
    """The CSV gives every cell its value, mark, verdict and the statistics behind it, for spreadsheets:
    t, df, p and the unadjusted interval are the verdict's own paired log-ratio test's."""
    lines = render_csv(judged(TWO, TWO_SPEC))
    assert lines[0] == (
        "workload,target,baseline,threads,mode,value,mark,verdict,n,mean,stdev,cv,baseline_n,"
        "baseline_mean,ratio,ratio_low,ratio_high,t,df,p,failed_runs,stalled_runs,"
        # A page's verdict (blank for a table no page judged).
        "method,log_ratio,q,interval_level,adjusted_low,adjusted_high,"
        # Stalled and short runs left out of the verdict.
        "excluded_runs,excluded_reason"
    )
    assert len(lines) == 5
    first = lines[1].split(",")
    assert first[:11] == ["oltp_simple", "MariaDB", "MySQL", "1", "ratio", "102.23", "+", "faster", "3", "1022.333333", "1.527525232"]
    head = lines[0].split(",")
    cell = dict(zip(head, first))
    # Paired over 3 blocks: df 2; the interval around the ratio, p beside the q that marks it.
    assert (cell["df"], cell["method"], cell["p"]) == ("2", "paired", "0.0002486974494")
    assert float(cell["ratio_low"]) < float(cell["ratio"]) < float(cell["ratio_high"])
    est = log_ratio({1: 1022.0, 2: 1024.0, 3: 1021.0}, {1: 1000.0, 2: 1002.0, 3: 998.0})
    assert float(cell["t"]) == pytest.approx(est.t, rel=1e-9) and float(cell["p"]) == pytest.approx(est.p, rel=1e-9)
    assert lines[4].startswith("update_index,MariaDB,MySQL,8,ratio,100.33,?,missing,1,903,,,3,900,1.003333333,,,,,,0,0,")


def test_settings_block():
    """Above a table the user sees each target's settings (never a password) and how long each test ran."""
    settings = {
        "name": "keycache-400M",
        "targets": [
            {"name": "off", "kind": "managed", "options": {"key_buffer_size": "400M", "key_cache_segments": 0}},
            {"name": "32", "kind": "managed", "password_env": "DB_PW", "options": {"key_buffer_size": "400M", "key_cache_segments": 32}},
        ],
        "baseline": "off",
        "data": {"tables": 1, "table_size": 20000000, "engine": "MyISAM"},
        "duration": "15m",
        "warmup": 180,
        "repeat": 3,
    }
    assert render_settings(settings) == [
        "Campaign: keycache-400M",
        "Targets (baseline: off):",
        "  off  kind=managed key_buffer_size=400M key_cache_segments=0",
        "  32   kind=managed key_buffer_size=400M key_cache_segments=32",
        "Table shape: 1 table x 20000000 rows, MyISAM",
        "Each test was run 3 times for 15 minutes with 3 minutes warm-up.",
    ]


def test_settings_block_single_run_without_warmup():
    """A single run without warm-up is said plainly, and missing keys are simply left out."""
    assert render_settings({"duration": 300, "repeat": 1}) == ["Each test was run once for 5 minutes without warm-up."]


def test_settings_block_says_each_tests_windows_when_they_differ():
    """Windows by thread count, the campaign's and a workload's own, are said by test (the report
    must not claim one length for runs that measured others)."""
    settings = {"duration": "10s", "warmup": 5, "repeat": 3, "threads": [16, 1024, 4096],
                "warmup_by_threads": {"1024": "15s"},
                "workloads": [{"name": "oltp_point_select"},
                              {"name": "oltp_read_write", "duration_by_threads": {"1024": "30s", "4096": "9m"}}]}
    assert render_settings(settings) == [
        "Each test was run 3 times:",
        "  oltp_point_select: 5s warm-up + 10s measured at 16 threads; 15s warm-up + 10s measured at 1024, 4096 threads",
        "  oltp_read_write: 5s warm-up + 10s measured at 16 threads; 15s warm-up + 30s measured at 1024 threads; "
        "15s warm-up + 9m measured at 4096 threads",
    ]
    same = {"duration": 8, "repeat": 1, "threads": [1, 2], "workloads": ["oltp_point_select"],
            "duration_by_threads": {"1": "8s"}}
    assert render_settings(same) == ["Each test was run once: 0s warm-up + 8s measured."]


def test_absolute_small_values_keep_decimals():
    """Absolute latencies in milliseconds keep two decimals, while q/s in the thousands are whole numbers."""
    data = runs("A", "select", 4, [1.25, 1.5]) + runs("B", "select", 4, [2.0, 2.25])
    lines = render_text(build_table(data, TableSpec(("A", "B"), "A", ("select",), mode="absolute", unit="p95 ms", higher_is_better=False)))
    assert lines[4:6] == ["    A             1.38", "    B             2.12"]


def test_a_targets_settings_block_keeps_its_name_but_server_options_read_bare():
    """"enabled=False" alone would read as a disabled target: the quiesce block keeps its prefix."""
    from services.reporting.render.formats import render_settings

    text = "\n".join(render_settings({"name": "c", "targets": [
        {"name": "A", "kind": "managed", "options": {"key_buffer_size": "400M"},
         "quiesce": {"enabled": False, "timeout": 300}}]}))
    assert "key_buffer_size=400M" in text and "quiesce.enabled=False" in text
    assert " enabled=False" not in text
