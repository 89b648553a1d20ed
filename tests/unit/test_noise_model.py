"""The noise model: run, block, campaign and target-by-campaign parts recovered from simulated
campaigns with known parts (fixed seeds), and the gate's false alarms on pages drawn from it."""

from __future__ import annotations

import math
import random

import pytest

from services.reporting.gate_simulation import Rate, Shape, draw_campaign, gated_cells, simulate, with_slowdown
from services.reporting.noise_model import Components, fit, fit_cell
from services.reporting.plan_power import CellHistory


def _campaign(rng, cid, cell, blocks, parts, targets="AB"):
    run, block, campaign, own_sd = parts
    shift = rng.gauss(0, campaign)
    own = {t: rng.gauss(0, own_sd) for t in targets}
    drift = [rng.gauss(0, block) for _ in range(blocks)]
    # Target B is steadily 3% faster: an effect, which must not count as noise.
    return CellHistory(cid, cell[0], cell[1], {
        t: {b + 1: 1000 * math.exp(0.03 * i + shift + own[t] + drift[b] + rng.gauss(0, run)) for b in range(blocks)}
        for i, t in enumerate(targets)})


def _history(seed, campaigns, blocks, parts, cells=(("oltp_point_select", 1),)):
    rng = random.Random(seed)
    return [_campaign(rng, f"c{i}", cell, blocks, parts) for i in range(campaigns) for cell in cells]


def test_the_four_parts_are_recovered_from_many_campaigns():
    """60 campaigns of 6 blocks with 1% run, 2% block, 3% campaign and 1% target-by-campaign noise
    give back each part within a fifth (a quarter for the smallest)."""
    cell = fit_cell(_history(7, 60, 6, (0.01, 0.02, 0.03, 0.01)))
    got = cell.components
    assert got.run_sd == pytest.approx(0.01, rel=0.1)
    assert got.block_sd == pytest.approx(0.02, rel=0.2)
    assert got.campaign_sd == pytest.approx(0.03, rel=0.2)
    assert got.target_campaign_sd == pytest.approx(0.01, rel=0.25)
    assert (got.campaigns, got.blocks) == (60, 360)
    assert math.exp(cell.level) == pytest.approx(1000 * math.exp(0.015), rel=0.02)


def test_a_part_that_is_absent_comes_out_near_zero():
    """With no campaign or target-by-campaign noise those parts are small beside the run part."""
    got = fit_cell(_history(11, 40, 5, (0.02, 0.01, 0.0, 0.0))).components
    assert got.run_sd == pytest.approx(0.02, rel=0.15)
    assert got.campaign_sd < 0.006
    assert got.target_campaign_sd < 0.006


def test_pooling_cells_recovers_their_shared_parts_from_five_campaigns():
    """Five campaigns of 8 cells and 3 blocks (the A/A campaigns' shape) pooled give the run and
    block parts within a fifth, and the campaign part within a half."""
    cells = [(w, t) for w in ("oltp_point_select", "oltp_read_only") for t in (1, 2, 4, 8)]
    model = fit(_history(5, 5, 3, (0.015, 0.02, 0.03, 0.0), cells))
    assert len(model.cells) == 8 and model.targets == ("A", "B")
    assert model.pooled.run_sd == pytest.approx(0.015, rel=0.2)
    assert model.pooled.block_sd == pytest.approx(0.02, rel=0.2)
    assert model.pooled.campaign_sd == pytest.approx(0.03, rel=0.5)
    assert model.pooled.plan_noise().run_sd == model.pooled.run_sd


def test_one_campaign_or_one_target_is_refused_by_name():
    """Campaign-level noise needs two campaigns; the parts need two targets; a zero figure has no log."""
    one = _history(1, 1, 3, (0.01, 0.01, 0.01, 0.0))
    with pytest.raises(ValueError, match="campaign"):
        fit_cell(one)
    lone = [CellHistory(h.campaign_id, h.workload, h.threads, {"A": h.by_target["A"]})
            for h in _history(2, 3, 3, (0.01, 0.01, 0.01, 0.0))]
    with pytest.raises(ValueError, match="at least 2"):
        fit_cell(lone)
    bad = _history(3, 2, 3, (0.01, 0.01, 0.01, 0.0))
    bad[0].by_target["A"][1] = 0.0
    with pytest.raises(ValueError, match="repetition 1"):
        fit_cell(bad)
    with pytest.raises(ValueError, match="campaign_sd"):
        Components(0.01, 0.01, -1.0, 0.0)


def test_a_missing_run_drops_its_block_only():
    """A failed run (None) leaves its block out of that campaign; the fit still uses the others."""
    history = _history(4, 3, 4, (0.01, 0.01, 0.01, 0.0))
    history[0].by_target["B"][2] = None
    assert fit_cell(history).components.blocks == 11


_CELLS = (("oltp_point_select", "oltp_read_only"), (1, 4))


def _model(parts):
    cells = [(w, t) for w in _CELLS[0] for t in _CELLS[1]]
    return fit(_history(9, 12, 4, parts, cells))


def test_the_gate_false_alarm_rate_on_pages_with_no_difference_is_at_most_five_percent():
    """400 A/A pages of 8 cells and 3 repetitions, drawn from a model with 2% run and 3% block and
    campaign noise and no own offset: the paired gate names a cell on at most 5% of them."""
    model = _model((0.02, 0.03, 0.03, 0.0))
    out = simulate(model, Shape(("A", "B"), *_CELLS, repeat=3), kind="within", pages=400, seed=3)
    assert out.power is None
    assert out.false_alarm.value <= 0.05


def test_a_regression_well_above_the_noise_is_found_and_campaign_noise_fools_the_unpaired_gate():
    """A 10% slowdown against 1% run noise is found in most pages; two campaigns with 4% campaign
    noise compared unpaired raise far more false alarms than the paired gate does."""
    model = _model((0.01, 0.02, 0.04, 0.0))
    shape = Shape(("A", "B"), *_CELLS, repeat=4)
    found = simulate(model, shape, kind="within", pages=80, seed=4, change=0.10)
    assert found.power is not None and found.power.value >= 0.8
    across = simulate(model, shape, kind="across", pages=80, seed=4)
    within = simulate(model, shape, kind="within", pages=80, seed=4)
    assert across.false_alarm.value > within.false_alarm.value + 0.1


def test_a_slowdown_put_into_a_campaign_is_named_by_the_gate():
    """Making one cell of target B 30% slower (q/s / 1.3) in a drawn campaign makes the gate name exactly that cell."""
    model = _model((0.005, 0.02, 0.02, 0.0))
    data = draw_campaign(model, Shape(("A", "B"), *_CELLS, repeat=3), random.Random(1), "c")
    assert gated_cells(data, 0.0) == set()
    slowed = with_slowdown(data, {("B", "oltp_read_only", 4): 0.3})
    assert gated_cells(slowed, 0.0) == {("B", "oltp_read_only", 4)}


def test_rates_carry_a_wilson_interval():
    """0 of 100 still allows a few percent; 50 of 100 is about 40-60%."""
    assert Rate(0, 100).interval()[1] == pytest.approx(0.037, abs=0.001)
    low, high = Rate(50, 100).interval()
    assert (round(low, 2), round(high, 2)) == (0.4, 0.6)
    with pytest.raises(ValueError, match="repeat"):
        Shape(("A", "B"), ("x",), (1,), repeat=1)


def test_a_drawn_cell_keeps_its_own_run_noise_and_the_pooled_campaign_parts():
    """Cells with different run noise keep it when drawn; the campaign parts come from the pool."""
    rng = random.Random(8)
    history = ([_campaign(rng, f"c{i}", ("oltp_point_select", 1), 4, (0.005, 0.01, 0.02, 0.0)) for i in range(20)]
               + [_campaign(rng, f"c{i}", ("oltp_read_only", 1), 4, (0.04, 0.01, 0.02, 0.0)) for i in range(20)])
    model = fit(history)
    quiet, loud = model.parts("oltp_point_select", 1), model.parts("oltp_read_only", 1)
    assert quiet.run_sd == pytest.approx(0.005, rel=0.3) and loud.run_sd == pytest.approx(0.04, rel=0.3)
    assert quiet.campaign_sd == loud.campaign_sd == model.pooled.campaign_sd
    with pytest.raises(KeyError, match="oltp_delete"):
        model.parts("oltp_delete", 1)
