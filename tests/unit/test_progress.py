"""The progress line of `scheduler submit --wait`."""

from services.scheduler.progress import Progress, render


def test_progress_line_shows_counts_cell_and_eta():
    """Users see how far the campaign is, what runs now and when it ends."""
    p = Progress(total=10, done=4, failed=1, cancelled=0, running=1, current="B oltp_point_select t=4 r1",
                 elapsed_s=50, planned_run_s=12)
    line = render(p, width=10)
    assert line == "[#####.....]  5/10 runs  1 failed  now B oltp_point_select t=4 r1  ETA 50s"


def test_eta_from_plan_before_first_run_ends():
    """Before any run finishes, the ETA comes from the planned run time."""
    p = Progress(total=4, done=0, failed=0, cancelled=0, running=1, current=None, elapsed_s=1, planned_run_s=10)
    assert p.eta_s() == 40
