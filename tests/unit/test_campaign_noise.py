"""Between-campaign noise: its estimate on literal figures, and what it does to `collector compare`'s
gate on simulated campaigns whose whole-campaign shifts one campaign cannot show."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from services.reporting import metrics_catalog as mc
from services.reporting.campaign_noise import BetweenCampaigns, between_campaigns
from services.reporting.compare import campaign_shifts, compare_campaigns, header_lines
from services.reporting.gate_simulation import Shape, draw_campaign, simulate
from services.reporting.log_ratio import welch
from services.reporting.noise_model import fit
from services.reporting.options import ReportOptions
from tests.unit.test_noise_model import _CELLS, _history


def test_the_shift_of_a_campaign_beyond_its_repetitions_is_estimated_by_hand_figures():
    """Two campaigns of logs (0, 0.02) and (0.10, 0.12): mean square between 0.01, within 0.0002,
    two figures each, so the between part is sqrt((0.01 - 0.0002) / 2) = 0.07."""
    e = math.exp
    got = between_campaigns([{"c1": [e(0.0), e(0.02)], "c2": [e(0.10), e(0.12)]}])
    assert got is not None and got.sd == pytest.approx(0.07, rel=1e-9)
    assert (got.campaigns, got.series) == (2, 1)


def test_campaigns_that_agree_give_no_between_part_and_one_campaign_gives_none():
    same = {"c1": [100.0, 102.0, 98.0], "c2": [100.0, 102.0, 98.0]}
    got = between_campaigns([same])
    assert got is not None and got.sd == 0.0
    # One campaign, or campaigns of one figure each, cannot show it.
    assert between_campaigns([{"c1": [100.0, 101.0]}]) is None
    assert between_campaigns([{"c1": [100.0], "c2": [150.0]}]) is None


def test_a_figure_with_no_log_is_refused_naming_its_campaign():
    with pytest.raises(ValueError, match="campaign c2: figure 0.0 has no log"):
        between_campaigns([{"c1": [1.0, 2.0], "c2": [0.0, 1.0]}])


def test_the_shift_widens_the_unpaired_interval_with_the_history_s_own_degrees_of_freedom():
    """A 10% difference between two tight campaigns is beyond doubt alone, and not once two campaigns'
    5% shifts (known to 4 df) join its variance (Satterthwaite over the three parts)."""
    t, b = [math.log(v) for v in (100, 101, 99)], [math.log(v) for v in (110, 111, 109)]
    plain = welch(t, b)
    wide = welch(t, b, between=BetweenCampaigns(0.05, 4.0, 5, 8))
    assert wide.estimate == plain.estimate
    st, sb = statistics.variance(t) / 3, statistics.variance(b) / 3
    assert wide.se == pytest.approx(math.sqrt(st + sb + 2 * 0.05**2))
    assert wide.df == pytest.approx(wide.se**4 / (st**2 / 2 + sb**2 / 2 + (2 * 0.05**2) ** 2 / 4.0))
    assert plain.p < 0.001 and wide.p > 0.05
    assert "between-campaign" in wide.reason


def _earlier(model, shape, n, seed):
    rng = random.Random(seed)
    return [draw_campaign(model, shape, rng, f"earlier{i}") for i in range(n)]


def test_compare_of_two_unchanged_campaigns_fails_rarely_once_earlier_campaigns_show_their_shifts():
    """Campaigns that shift as a whole by 4% (1% run noise): compared unpaired, two unchanged ones fail
    the gate on far more than 5% of pages; with the shift read from six earlier campaigns, on at most 5%."""
    model = fit(_history(9, 12, 4, (0.01, 0.02, 0.04, 0.0), [(w, t) for w in _CELLS[0] for t in _CELLS[1]]))
    shape = Shape(("A", "B"), *_CELLS, repeat=3)
    earlier = _earlier(model, shape, 6, seed=5)
    a, b = earlier[0], earlier[1]
    shift = campaign_shifts([r for d in earlier for r in d.runs], a, b, mc.metric("qps"), shape.targets)
    assert shift is not None and 0.02 < shift.sd < 0.08
    blind = simulate(model, shape, kind="across", pages=200, seed=6)
    seen = simulate(model, shape, kind="across", pages=200, seed=6, between=shift)
    assert blind.false_alarm.value > 0.2
    assert seen.false_alarm.value <= 0.05


def test_the_comparison_says_where_its_between_campaign_noise_came_from_or_that_it_is_unknown():
    model = fit(_history(9, 12, 4, (0.01, 0.02, 0.04, 0.0), [(w, t) for w in _CELLS[0] for t in _CELLS[1]]))
    shape = Shape(("A", "B"), *_CELLS, repeat=3)
    earlier = _earlier(model, shape, 4, seed=7)
    a, b = earlier[-2], earlier[-1]
    shift = campaign_shifts([r for d in earlier for r in d.runs], a, b, mc.metric("qps"), shape.targets)
    assert shift is not None and shift.campaigns == 2  # A and B themselves are left out
    assert any(line.startswith("between campaigns: unknown") for line in header_lines(compare_campaigns(a, b)))
    known = header_lines(compare_campaigns(a, b, ReportOptions(), shift))
    assert any(line.startswith(f"between campaigns: {shift.sd * 100:.2f}%") and "from 2 earlier" in line for line in known)
