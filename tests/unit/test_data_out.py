"""Data out without a fleet: `collector compare` on two export files (no results DB), `--map`
renaming targets, `series` of an export file, and the percentiles read from histograms."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bench.synthetic import synthetic_results, synthetic_spec
from services.collector import cli as collector_cli
from services.common import cli
from services.common.results.histogram import Histogram
from services.common.store.campaign_file import CampaignExport, ExportedCampaign, ExportedRun
from services.reporting.percentiles import cell_percentiles, parse_percentiles, values_ms


def _export(cid: str, targets: list[str], *, seed: int) -> str:
    spec = synthetic_spec("files", targets, ["oltp_point_select"], [1, 8], 3, duration=5, warmup=1)
    results = synthetic_results(spec, cid, seconds=5, seed=seed)
    runs = [ExportedRun(run_id=r.run_id, seq=i, target=r.cell.target, workload=r.cell.workload,
                        threads=r.cell.threads, repetition=r.repetition, state="done", updated_at=1.0)
            for i, r in enumerate(results)]
    return CampaignExport(campaign=ExportedCampaign(campaign_id=cid, name="files", spec=spec, spec_hash="x", pool="p",
                                                    baseline=targets[0], total_runs=len(runs), state="finished",
                                                    created_at=1.0),
                          runs=runs, results=results).encode()


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Two export files of campaigns with different target names, and no results DB reachable."""
    monkeypatch.setenv("BENCHFLEET_DB_PORT", "9")
    (tmp_path / "empty.env").write_text("")
    monkeypatch.setenv("BENCHFLEET_CONFIG", str(tmp_path / "empty.env"))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(_export("old-1", ["off", "on"], seed=1))
    b.write_text(_export("new-1", ["mariadb-off", "mariadb-on"], seed=2))
    return a, b


def test_compare_reads_two_export_files_and_maps_target_names(files, capsys):
    """Two files compare with no results DB; A's targets renamed by --map meet B's, and a map of a
    target A does not have is refused naming it."""
    a, b = files
    assert collector_cli.main(["compare", str(a), str(b)]) == cli.EXIT_USAGE
    assert "share no cell" in capsys.readouterr().err
    assert collector_cli.main(["compare", str(a), str(b), "--map", "off=mariadb-off", "--map", "on=mariadb-on"]) == 0
    out = capsys.readouterr().out
    assert "target mariadb-off" in out and "target mariadb-on" in out and "A = old-1" in out
    assert collector_cli.main(["compare", str(a), str(b), "--map", "of=mariadb-off"]) == cli.EXIT_USAGE
    assert "--map: campaign old-1 has no target 'of' (its targets: off, on)" in capsys.readouterr().err
    assert collector_cli.main(["compare", str(a), str(b), "--map", "off"]) == cli.EXIT_USAGE
    assert "--map: 'off' is not OLD=NEW" in capsys.readouterr().err


def test_a_broken_export_file_is_refused_naming_the_file(files, capsys, tmp_path):
    """A file that is not an export is a usage error naming the file, not a traceback."""
    a, _ = files
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something/1"}')
    assert collector_cli.main(["compare", str(a), str(bad)]) == cli.EXIT_USAGE
    assert "bad.json: schema: 'something/1' is not a campaign export" in capsys.readouterr().err


def test_series_of_an_export_file_as_csv(files, capsys):
    """`collector series FILE` prints one CSV line per run and second, in target order."""
    a, _ = files
    assert collector_cli.main(["series", str(a)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 2 * 2 * 3 * 5
    assert [r["target"] for r in rows[:20]] == ["off"] * 15 + ["on"] * 5  # 3 repetitions of 5 seconds
    assert [r["repetition"] for r in rows[:15:5]] == ["1", "2", "3"]
    assert rows[0]["second"] == "0" and int(rows[0]["queries"]) > 0 and rows[0]["ignored_errors"] == ""
    assert collector_cli.main(["series", str(a), "--percentiles", "50"]) == cli.EXIT_USAGE
    assert "--format json" in capsys.readouterr().err


def test_series_json_gives_each_runs_percentiles(files, capsys):
    """`series --json` (as --format json) gives each run its seconds and the percentiles asked."""
    a, _ = files
    assert collector_cli.main(["series", str(a), "--json", "--percentiles", "50,99.9"]) == 0
    doc = json.loads(capsys.readouterr().out)
    run = doc["runs"][0]
    assert set(run["latency_ms"]) == {"p50", "p99.9"} and run["latency_ms"]["p99.9"] >= run["latency_ms"]["p50"] > 0
    assert len(run["seconds"]) == 5


@pytest.mark.parametrize("text, message", [("50,x", "'x' is not a number"), ("0", "0 is not a percentile"),
                                           ("100.5", "100.5 is not a percentile"), ("nan", "nan is not a percentile")])
def test_a_wrong_percentile_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_percentiles(text)


def test_percentiles_read_the_histogram_and_are_na_when_empty():
    """p99.9 of 998 fast and 2 slow transactions is a slow one, p50 a fast one; no sample: n/a."""
    h = Histogram()
    for _ in range(998):
        h.record(1000.0)
    h.record(80_000.0)
    h.record(80_000.0)
    p50, p999 = values_ms(h, parse_percentiles("50,99.9"))
    assert p50 == pytest.approx(1.0, rel=0.006) and p999 == pytest.approx(80.0, rel=0.006)
    assert values_ms(Histogram(), (50.0, 99.0)) == (None, None)


def test_a_cells_percentile_merges_its_runs_histograms():
    """A cell's p99 comes from its runs' histograms merged, not averaged from each run's p99."""
    spec = synthetic_spec("m", ["a"], ["oltp_point_select"], [1], 2, duration=5, warmup=1)
    r1, r2 = synthetic_results(spec, "m-1", seconds=5, seed=3)
    fast, slow = Histogram(), Histogram()
    for _ in range(100):
        fast.record(1000.0)
        slow.record(9000.0)
    r1 = r1.model_copy(update={"latency": r1.latency.model_copy(update={"histogram": fast.to_wire()})})
    r2 = r2.model_copy(update={"latency": r2.latency.model_copy(update={"histogram": slow.to_wire()})})
    (cell,) = cell_percentiles([r1, r2], (25.0, 75.0))
    assert cell.runs == 2 and cell.transactions == 200
    assert cell.values_ms[0] == pytest.approx(1.0, rel=0.006) and cell.values_ms[1] == pytest.approx(9.0, rel=0.006)


def test_compare_of_two_files_widens_its_intervals_by_the_campaigns_given_with_noise_from(files, capsys, tmp_path):
    """Two files alone cannot show how whole campaigns shift, and the comparison says so; earlier
    campaigns given with --noise-from (files here, no results DB) are read for it, A and B left out."""
    a, b = files
    mapping = ["--map", "off=mariadb-off", "--map", "on=mariadb-on"]
    assert collector_cli.main(["compare", str(a), str(b), *mapping]) == 0
    assert "between campaigns: unknown (fewer than 2 earlier campaigns" in capsys.readouterr().out
    earlier = []
    for seed in (3, 4, 5):
        p = tmp_path / f"earlier-{seed}.json"
        p.write_text(_export(f"earlier-{seed}", ["mariadb-off", "mariadb-on"], seed=seed))
        earlier += ["--noise-from", str(p)]
    assert collector_cli.main(["compare", str(a), str(b), *mapping, *earlier, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    between = doc["between_campaigns"]
    assert between["campaigns"] == 3 and between["series"] == 4 and between["sd"] >= 0
    assert collector_cli.main(["compare", str(a), str(b), *mapping, *earlier]) == 0
    assert "from 3 earlier campaign(s), 4 target x cell series), added to every interval" in capsys.readouterr().out
