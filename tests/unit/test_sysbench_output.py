"""The sysbench output parser on literal sysbench 1.0.20 output (captured once, kept as fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.messages.results import Series
from services.common.results import sysbench_output as so

FIXTURES = Path(__file__).parent / "fixtures" / "sysbench"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_per_second_reports_become_intervals():
    """Each '[ Ns ]' line of a run becomes one interval with its rates and latency percentile."""
    ivs = so.intervals(_text("oltp_read_write_pareto_histogram.txt"))
    assert [iv.second for iv in ivs] == [1.0, 2.0, 3.0]
    first = ivs[0]
    assert (first.threads, first.tps, first.qps) == (2, 653.79, 13124.66)
    assert (first.reads, first.writes, first.other) == (9194.94, 2619.14, 1310.57)
    assert (first.percentile, first.latency_ms, first.errors_per_s, first.reconnects_per_s) == (99, 7.43, 1.0, 0.0)
    assert first.queue_length is None


def test_final_report_totals_match_sysbench():
    """The final report's counts, time and latency summary are read exactly as sysbench printed them."""
    r = so.parse_final(_text("oltp_read_write_pareto_histogram.txt"))
    assert (r.reads, r.writes, r.other, r.queries) == (28322, 8076, 4040, 40438)
    assert (r.transactions, r.ignored_errors, r.reconnects, r.events) == (2017, 6, 0, 2017)
    assert r.total_time_s == pytest.approx(3.0051)
    assert (r.latency_min_ms, r.latency_avg_ms, r.latency_max_ms) == (1.09, 2.97, 11.23)
    assert (r.percentile, r.latency_pct_ms) == (99, 7.98)


def test_histogram_rows_carry_every_event():
    """The --histogram block is read row by row, and its counts add up to the events of the run."""
    r = so.parse_final(_text("oltp_read_write_pareto_histogram.txt"))
    assert r.histogram[0] == (1.082, 1)
    assert r.histogram[-1] == (11.242, 2)
    assert sum(n for _, n in r.histogram) == r.events


def test_latency_from_histogram_agrees_with_sysbench_percentile():
    """Percentiles taken from sysbench's histogram agree with the percentile sysbench printed (within its bucket width)."""
    r = so.parse_final(_text("oltp_read_write_pareto_histogram.txt"))
    lat = so.latency(r)
    assert lat.p99_ms == pytest.approx(r.latency_pct_ms, rel=0.03)
    assert lat.p50_ms < lat.p95_ms <= lat.p99_ms <= lat.max_ms == 11.23
    assert sum(lat.histogram["buckets"].values()) == r.events


def test_point_select_report_and_series():
    """A point-select run yields per-second counts from the rates and the 95th percentile by default."""
    text = _text("oltp_point_select_histogram.txt")
    r = so.parse_final(text)
    assert r.writes == 0 and r.other == 0 and r.reads == r.transactions
    assert r.percentile == 95
    s = so.series(so.intervals(text))
    assert len(s.transactions) == 2 and s.transactions == s.queries
    assert s.errors == [0, 0]


def test_ignored_errors_and_reconnects_per_second_reach_the_series():
    """sysbench's err/s (every error it survives is one of its ignore list) and reconn/s become the
    series' ignored_errors and reconnects; the second sysbench left unreported comes from the totals."""
    text = _text("oltp_read_write_pareto_histogram.txt")
    s = so.series(so.intervals(text))
    assert s.ignored_errors == [1, 2, 3] and s.reconnects == [0, 0, 0]
    report = so.parse_final(text)
    t = so.totals(report)
    short = Series(transactions=s.transactions[:2], queries=s.queries[:2], errors=[0, 0],
                   ignored_errors=s.ignored_errors[:2], reconnects=[0, 1])
    whole = so.with_last_second(short, t.model_copy(update={"reconnects": 2}), report.total_time_s)
    assert whole.ignored_errors == [1, 2, 3] and whole.reconnects == [0, 1, 1]


def test_a_duplicate_key_fatal_names_the_mysql_error():
    """sysbench's FATAL on an error outside --mysql-ignore-errors gives the code and the server's message."""
    fatal = ["mysql_stmt_execute() returned error 1062 (Duplicate entry '3' for key 'PRIMARY') for query "
             "'INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)'",
             "`thread_run' function failed: /usr/share/sysbench/oltp_common.lua:488: SQL error, errno = 1062, "
             "state = '23000': Duplicate entry '3' for key 'PRIMARY'"]
    assert so.fatal_error(fatal) == (1062, "Duplicate entry '3' for key 'PRIMARY'")
    assert so.fatal_error_code(fatal) == 1062
    assert so.fatal_error(["error 1049: Unknown database 'x'"]) == (1049, "Unknown database 'x'")
    assert so.fatal_error(["Thread initialization failed!"]) is None


def test_totals_map_into_the_result_format():
    """sysbench's counts land in the same Totals a native run reports."""
    t = so.totals(so.parse_final(_text("oltp_read_only_events.txt")))
    assert (t.transactions, t.reads, t.writes, t.other, t.queries) == (50, 700, 0, 100, 800)
    assert t.errors == 0


def test_report_without_histogram_keeps_its_one_percentile():
    """Without --histogram the latency carries the one percentile sysbench printed and its max."""
    lat = so.latency(so.parse_final(_text("oltp_read_only_events.txt")))
    # The percentiles sysbench did not print are unknown: None (n/a), not 0.
    assert (lat.p95_ms, lat.p99_ms, lat.max_ms) == (7.30, None, 12.96)


def test_rate_mode_queue_lines_fold_into_their_second():
    """With --rate, the queue length of each second is attached to that second's report."""
    ivs = so.intervals(_text("oltp_point_select_rate.txt"))
    assert [(iv.second, iv.queue_length, iv.concurrency) for iv in ivs] == [(1.0, 0, 0), (2.0, 0, 0), (3.0, 0, 0)]
    assert so.queue_lengths(ivs) == [0, 0, 0]
    assert so.series(ivs).queue == [0, 0, 0]


@pytest.mark.parametrize("fixture, code, words", [
    ("connect_refused.txt", 2002, "Can't connect to server"),
    ("unknown_database.txt", 1049, "Unknown database 'bf_sb_nosuchdb'"),
    ("missing_table.txt", 1146, "sbtest3' doesn't exist"),
])
def test_fatal_output_is_an_error_naming_the_cause(fixture, code, words):
    """A sysbench that dies before its report gives an error with its FATAL lines and the MySQL error code."""
    with pytest.raises(so.SysbenchOutputError) as e:
        so.parse_final(_text(fixture))
    assert words in str(e.value)
    assert so.fatal_error_code(e.value.fatal) == code


def test_lines_that_are_not_reports_are_ignored():
    """Banner and option lines never parse as reports."""
    assert so.parse_interval("Number of threads: 2") is None
    assert so.parse_queue("Threads started!") is None
    assert so.intervals("") == []


def test_a_last_second_sysbench_did_not_report_is_the_rest_of_the_totals():
    """A 2 s run whose second report line sysbench dropped still has two seconds adding up to its totals."""
    from services.common.messages.results import Series, Totals

    totals = Totals(transactions=6096, reads=85344, other=12192)
    one = Series(transactions=[3022], queries=[48374], errors=[0])
    s = so.with_last_second(one, totals, 2.0074)
    assert s.transactions == [3022, 3074] and s.queries == [48374, 97536 - 48374] and s.errors == [0, 0]
    # Complete series, or more than one second missing (something else went wrong), stay as they are.
    assert so.with_last_second(s, totals, 2.0074) == s
    assert so.with_last_second(one, totals, 3.0) == one


@pytest.mark.parametrize("total_time_s", [1.0074, 1.03, 1.0499])
def test_what_completed_after_the_last_line_is_in_the_last_second(total_time_s):
    """An events run that ends just after a report line (or a line whose rate was over a stretched
    interval): the rest of the totals joins the last reported second, and the series adds up."""
    from services.common.messages.results import Series, Totals

    totals = Totals(transactions=1040, reads=14560, other=2080, ignored_errors=9, reconnects=1)
    one = Series(transactions=[1000], queries=[16000], errors=[0], queue=[3], ignored_errors=[7], reconnects=[1])
    s = so.with_last_second(one, totals, total_time_s)
    assert (s.transactions, s.queries, s.ignored_errors, s.reconnects) == ([1040], [16640], [9], [1])
    assert s.errors == [0] and s.queue == [3]
    # Rounded rates can also read one more than the totals: taken off the last second.
    over = so.with_last_second(Series(transactions=[600, 441], queries=[9600, 7040], errors=[0, 0]), totals, 2.01)
    assert over.transactions == [600, 440] and over.queries == [9600, 7040]


def test_an_events_run_shorter_than_a_second_is_one_partial_second():
    """No report line at all (the run ended before the first): the totals are its one second."""
    from services.common.messages.results import Series, Totals

    totals = Totals(transactions=3000, reads=0, writes=6000, ignored_errors=2200)
    for total_time_s in (0.43, 0.03):
        s = so.with_last_second(Series(), totals, total_time_s)
        assert (s.transactions, s.queries, s.ignored_errors, s.errors) == ([3000], [6000], [2200], [0])
