"""Power: noise split into block and run parts, the smallest change a campaign can see, and the
repetitions a target change needs (simulated figures with fixed seeds)."""

from __future__ import annotations

import math
import random

import pytest

from services.reporting.log_ratio import log_ratio
from services.reporting.power import Noise, detectable_change, estimate_noise, repetitions_for


def _campaign(rng, targets, blocks, run_sd, block_sd):
    drift = [rng.gauss(0, block_sd) for _ in range(blocks)]
    return {t: {b + 1: 1000 * math.exp(0.01 * i + drift[b] + rng.gauss(0, run_sd)) for b in range(blocks)}
            for i, t in enumerate(targets)}


def test_noise_is_split_into_its_block_and_run_parts():
    """A 4-target, 40-block campaign with 2% run noise and 3% drift between blocks gives back
    about those two figures; target differences do not count as noise."""
    noise = estimate_noise(_campaign(random.Random(3), "ABCD", 40, 0.02, 0.03))
    assert noise.run_sd == pytest.approx(0.02, rel=0.15)
    assert noise.block_sd == pytest.approx(0.03, rel=0.25)
    assert noise.n_blocks == 40


def test_noise_uses_only_blocks_every_target_measured_and_says_what_it_needs():
    """A failed run leaves its block out; one target or one complete block is named as too little."""
    figures = _campaign(random.Random(4), "AB", 5, 0.02, 0.0)
    figures["B"][3] = None
    assert estimate_noise(figures).n_blocks == 4
    with pytest.raises(ValueError, match="at least 2"):
        estimate_noise({"A": figures["A"]})
    with pytest.raises(ValueError, match="block"):
        estimate_noise({"A": {1: 1.0, 2: 1.1}, "B": {2: 1.0, 3: 1.2}})


def test_pairing_sees_through_drift_that_an_unpaired_test_cannot():
    """With 3% drift between blocks, 5 paired repetitions see a ~5% change; unpaired ones need
    far more than that."""
    noise = Noise(run_sd=0.02, block_sd=0.03)
    paired = detectable_change(noise, 5)
    assert paired < 0.05
    assert detectable_change(noise, 5, paired=False) > 1.5 * paired


def test_more_repetitions_and_smaller_families_see_smaller_changes():
    noise = Noise(run_sd=0.02, block_sd=0.0)
    assert detectable_change(noise, 10) < detectable_change(noise, 5) < detectable_change(noise, 3)
    assert detectable_change(noise, 5, family_size=48) > detectable_change(noise, 5)


def test_the_detectable_change_is_found_80_percent_of_the_time():
    """Simulated: a change of exactly the detectable size, 4 paired repetitions, is found at
    p < 0.05 in about 80% of campaigns."""
    rng = random.Random(11)
    noise = Noise(run_sd=0.02, block_sd=0.02)
    change = detectable_change(noise, 4)
    found = 0
    for _ in range(2000):
        figures = _campaign(rng, "AB", 4, 0.02, 0.02)
        target = {b: v * (1 + change) / math.exp(0.01) for b, v in figures["B"].items()}
        found += log_ratio(target, figures["A"]).p < 0.05
    assert found / 2000 == pytest.approx(0.8, abs=0.03)


def test_repetitions_for_a_target_change_and_the_cap():
    """The fewest repetitions reaching the change; beyond the cap, the cap and what it reaches."""
    noise = Noise(run_sd=0.02, block_sd=0.03)
    advice = repetitions_for(noise, 0.05)
    assert advice.reached and advice.detectable <= 0.05
    assert detectable_change(noise, advice.repeat - 1) > 0.05
    capped = repetitions_for(noise, 0.01, family_size=48, max_repeat=10)
    assert not capped.reached and capped.repeat == 10 and capped.detectable > 0.01
    assert "the cap" in capped.message and "not 1%" in capped.message
