"""`scheduler plan`'s power line on literal history: the noise of earlier campaigns of the same
cells, the change the planned repeat detects over the page's BH family, and the repetitions a
wanted change needs (capped, saying so)."""

from __future__ import annotations

import math

from services.reporting.plan_power import CellHistory, plan_power, pooled_noise
from services.reporting.power import detectable_change

# Two targets, four blocks; each block moves both targets alike (block noise), plus ~1% run noise.
BLOCKS = {1: 1.00, 2: 1.05, 3: 0.97, 4: 1.02}
RUN = {("A", 1): 1.01, ("A", 2): 0.99, ("A", 3): 1.00, ("A", 4): 1.005,
       ("B", 1): 0.995, ("B", 2): 1.01, ("B", 3): 0.99, ("B", 4): 1.0}


def cell(cid="c1", workload="w", threads=8):
    return CellHistory(cid, workload, threads, {t: {b: 1000.0 * m * RUN[(t, b)] for b, m in BLOCKS.items()}
                                               for t in ("A", "B")})


def test_without_history_the_plan_says_the_detectable_change_is_unknown():
    p = plan_power([], repeat=3, family_size=4)
    assert p.noise is None and p.detectable is None
    assert p.lines()[0].startswith("power: no earlier campaign of these cells")
    # One target, or one repetition, gives no noise either.
    lone = CellHistory("c1", "w", 8, {"A": {1: 1000.0, 2: 1010.0}})
    assert plan_power([lone], repeat=3, family_size=4).noise is None


def test_the_planned_repeat_detects_what_power_says_for_the_pooled_noise():
    history = [cell("c1"), cell("c2", threads=16)]
    noise, used = pooled_noise(history)
    assert used == 2 and 0.005 < noise.run_sd < 0.02 and noise.block_sd > noise.run_sd
    p = plan_power(history, repeat=3, family_size=12)
    assert p.campaigns == 2 and p.cells == 2
    assert math.isclose(p.detectable, detectable_change(noise, 3, family_size=12))
    # A larger family raises the bar: the same repeat sees less over more cells.
    assert plan_power(history, repeat=3, family_size=1).detectable < p.detectable
    assert "over 12 compared cell(s)" in p.lines()[1] and "at 80% power" in p.lines()[1]


def test_detect_asks_for_the_repetitions_a_change_needs_and_the_cap_says_so():
    history = [cell()]
    p = plan_power(history, repeat=3, family_size=4, detect=0.03)
    assert p.advice is not None and p.advice.reached and 2 <= p.advice.repeat <= 20
    assert detectable_change(p.noise, p.advice.repeat, family_size=4) <= 0.03
    tiny = plan_power(history, repeat=3, family_size=4, detect=0.0005)
    assert not tiny.advice.reached and tiny.advice.repeat == 20
    assert "the cap" in tiny.lines()[-1] and "--detect 0.05%" in tiny.lines()[-1]
    assert tiny.as_data()["reached"] is False and tiny.as_data()["repeat_needed"] == 20


def test_scheduler_plan_prints_the_power_lines_and_their_json(monkeypatch, capsys):
    """`scheduler plan --detect 3%` prints the power lines after the settings; --json carries them;
    an unreadable results DB is said, and the plan still prints."""
    import json

    from services.common.errors import StoreUnavailable
    from services.scheduler import cli, spec_commands

    seen = {}

    def fake_power(spec, settings, detect):
        seen["detect"] = detect
        return plan_power([cell()], repeat=spec.repeat, family_size=4, detect=detect)

    monkeypatch.setattr(spec_commands, "power_of", fake_power)
    assert cli.main(["plan", "examples/quickstart.yaml", "--detect", "3%"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert seen["detect"] == 0.03
    assert out[3].startswith("power: noise of 1 cell(s) over 1 earlier campaign(s)")
    assert out[5].startswith("power: --detect 3%: ")
    assert cli.main(["plan", "examples/quickstart.yaml", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["power"]["family_size"] == 4 and doc["power"]["detect"] is None

    def down(spec, settings, detect):
        raise StoreUnavailable("cannot connect to the results DB")

    monkeypatch.setattr(spec_commands, "power_of", down)
    assert cli.main(["plan", "examples/quickstart.yaml"]) == 0
    assert "power: not estimated: the results DB was not read (cannot connect" in capsys.readouterr().out
