"""The progress line of `scheduler submit --wait`."""

import io

from services.scheduler.progress import CLEAR_TO_END, ConsumerWatch, Progress, ProgressLine, render


def _progress(current: str | None = "B oltp_point_select t=4 r1", done: int = 4) -> Progress:
    return Progress(total=10, done=done, failed=1, cancelled=0, running=1, current=current, elapsed_s=50,
                    planned_run_s=12)


def test_progress_line_shows_counts_cell_and_eta():
    """Users see how far the campaign is, what runs now and when it ends."""
    line = render(_progress(), columns=80)
    assert line == "[######.......]  5/10 runs  1 failed  now B oltp_point_select t=4 r1  ETA 50s"


def test_progress_line_fits_an_80_column_terminal():
    """A long cell name is shortened, never the counts or the ETA: the line never wraps at 80 columns."""
    p = _progress(current="a-very-long-target-name-indeed oltp_read_write t=1024 r3 (+2 more)")
    line = render(p, columns=80)
    assert len(line) <= 79
    assert "5/10 runs" in line and line.endswith("ETA 50s")
    assert len(render(p, columns=40)) <= 39


def test_terminal_progress_is_redrawn_in_place_and_cleared():
    """On a terminal each update returns to the line start and erases what a longer line left."""
    out = io.StringIO()
    shown = ProgressLine(out, tty=True, columns=80)
    shown.show(_progress(current="a much longer cell name than the next one"))
    shown.show(_progress(current=None, done=5))
    shown.close()
    text = out.getvalue()
    assert text.count("\r") == 2 and text.count(CLEAR_TO_END) == 2 and text.endswith("\n")
    assert "\n" not in text[:-1]


def test_progress_to_a_pipe_prints_whole_lines_sparingly():
    """Into a file or pipe, progress is whole lines, at most one per interval, and the last one always."""
    now = [0.0]
    out = io.StringIO()
    shown = ProgressLine(out, tty=False, every_s=10, clock=lambda: now[0])
    shown.show(_progress(done=1))
    now[0] = 5
    shown.show(_progress(done=2))   # too soon
    shown.show(_progress(done=9))   # finished (9 done + 1 failed): always shown
    assert [line.split("  ")[1] for line in out.getvalue().splitlines()] == ["2/10 runs", "10/10 runs"]


def test_no_worker_notice_after_grace_then_reminder_then_back():
    """Waiting with no worker on the pool's queue says so after a grace period, reminds, and says when one comes."""
    w = ConsumerWatch("default", grace_s=5, remind_s=60)
    assert w.update(0, 0) is None
    assert w.update(0, 4) is None
    first = w.update(0, 6)
    assert first is not None and "no worker" in first and "worker --pool default" in first and "6s" in first
    assert w.update(0, 30) is None
    assert "1m6s" in (w.update(0, 66) or "")
    assert "connected again" in (w.update(1, 70) or "")
    assert w.update(1, 80) is None


def test_eta_from_plan_before_first_run_ends():
    """Before any run finishes, the ETA comes from the planned run time."""
    p = Progress(total=4, done=0, failed=0, cancelled=0, running=1, current=None, elapsed_s=1, planned_run_s=10)
    assert p.eta_s() == 40


def test_wait_tells_once_that_the_broker_is_away_and_keeps_following(monkeypatch, capsys):
    """`submit --wait` reads progress from the results DB; a broker it cannot reach is one note
    (not a traceback, not a note per poll), and the campaign is followed to its end."""
    import argparse

    from services.common.config import Settings
    from services.common.errors import BusError
    from services.common.spec.campaign import CampaignSpec
    from services.reporting import load as load_module
    from services.reporting.report import analyse
    from services.scheduler import follow
    from tests.unit.test_report_formats import POOL_RUNS, campaign as pool_campaign

    polls = iter([0, 0, 0, 0, 12])

    class Runs:
        def counts(self, campaign_id):
            return {"pending": 0, "running": 0, "done": next(polls), "failed": 0, "cancelled": 0}

        def active(self, campaign_id):
            return []

        def failed(self, campaign_id):
            return []

    class Store:
        def __init__(self, settings):
            self.runs = Runs()

        def open(self):
            return self

        def close(self):
            pass

    class AwayBus:
        def __init__(self, *a, **k):
            pass

        def connect(self, attempts=None):
            raise BusError("cannot connect to RabbitMQ: StreamLostError")

    monkeypatch.setattr(follow, "Store", Store)
    monkeypatch.setattr(follow, "RabbitBus", AwayBus)
    monkeypatch.setattr(load_module, "load_report", lambda store, ref, opts, plots=False: analyse(pool_campaign(POOL_RUNS), opts))
    spec = CampaignSpec(name="pool", targets=[{"name": "tpc", "user": "bench"}, {"name": "pool", "user": "bench"}],
                        workloads=["oltp_point_select"],
                        threads=[16, 4096], duration=60, repeat=3)
    assert follow.wait(Settings(), "c", spec, argparse.Namespace(poll=0.01)) == 0
    err = capsys.readouterr().err
    assert err.count("note: broker away (cannot connect to RabbitMQ: StreamLostError); still waiting") == 1, err
