"""Each bisect step's campaign: the user's baseline target run as the good build and as the midpoint,
only the named cells, named for the bisect; and the series `--range` walks."""

from __future__ import annotations

import pytest

from services.common.spec.campaign import CampaignSpec
from services.scheduler import bisect_plan

SPEC = CampaignSpec.model_validate({
    "name": "nightly", "pool": "rack1",
    "targets": [{"kind": "managed", "name": "old", "build": "b1", "options": {"key_buffer_size": "64M"},
                 "malloc": "jemalloc"},
                {"kind": "managed", "name": "other", "build": "b9"}],
    "workloads": ["oltp_point_select", "oltp_read_only"], "threads": [1, 8], "duration": "5s", "repeat": 3,
    "seed": 7})


def test_a_step_runs_the_baseline_target_as_both_builds_on_the_named_cells_only():
    cells = [("oltp_read_only", 8), ("oltp_point_select", 1)]
    s = bisect_plan.step_spec(SPEC, cells, "b1", "b4", 6, name="nightly-bisect-abc-s2", description="step 2")
    assert [(t.name, t.build, t.malloc, t.options) for t in s.targets] == [
        ("b1", "b1", "jemalloc", {"key_buffer_size": "64M"}), ("b4", "b4", "jemalloc", {"key_buffer_size": "64M"})]
    assert (s.baseline_name, s.repeat, s.pool, s.seed, s.duration) == ("b1", 6, "rack1", 7, 5.0)
    runs = bisect_plan.step_runs(s, cells, "cid")
    assert {(r.cell.workload, r.cell.threads) for r in runs} == set(cells)
    assert len(runs) == 2 * 2 * 6 and [r.seq for r in runs] == list(range(len(runs)))


def test_cells_are_checked_against_the_spec_and_default_to_all_of_them():
    assert bisect_plan.cells_of(SPEC, []) == [("oltp_point_select", 1), ("oltp_point_select", 8),
                                              ("oltp_read_only", 1), ("oltp_read_only", 8)]
    assert bisect_plan.parse_cell("oltp_point_select:8") == ("oltp_point_select", 8)
    for bad, msg in (("oltp_point_select", "not WORKLOAD:THREADS"), ("x:0", "not WORKLOAD:THREADS")):
        with pytest.raises(ValueError, match=f"--cell: .*{msg}"):
            bisect_plan.parse_cell(bad)
    with pytest.raises(ValueError, match="--cell: workload 'oltp_delete' is not in spec"):
        bisect_plan.cells_of(SPEC, [("oltp_delete", 1)])
    with pytest.raises(ValueError, match="--cell: 4 threads is not in spec"):
        bisect_plan.cells_of(SPEC, [("oltp_read_only", 4)])


def test_a_baseline_that_is_not_a_managed_server_is_refused():
    spec = CampaignSpec.model_validate({
        "name": "x", "targets": [{"name": "db", "host": "db1", "user": "bench", "database": "sbtest"}],
        "workloads": ["oltp_point_select"], "threads": [1], "duration": "1s"})
    with pytest.raises(ValueError, match="^targets: baseline db is a dsn target"):
        bisect_plan.template_target(spec)


def test_a_spec_on_several_pools_is_refused_naming_the_field():
    spec = CampaignSpec.model_validate({
        "name": "x", "pools": ["suse", "rhel"], "targets": [{"kind": "managed", "name": "db", "build": "m18"}],
        "workloads": ["oltp_point_select"], "threads": [1], "duration": "1s"})
    with pytest.raises(ValueError, match="^pools: a bisect probes one pool, not suse, rhel"):
        bisect_plan.template_target(spec)


def test_step_names_link_the_steps_and_fit_a_campaign_name():
    assert bisect_plan.step_name("nightly", "abc123", 3) == "nightly-bisect-abc123-s3"
    long = bisect_plan.step_name("n" * 64, "abc123", 12)
    assert len(long) == 64 and long.endswith("-bisect-abc123-s12")


def test_range_walks_the_announced_builds_in_version_order_between_good_and_bad():
    ordered = bisect_plan.version_order([("m19", "10.11.19-MariaDB"), ("m9", "10.11.9-MariaDB"),
                                         ("m18", "10.11.18-MariaDB"), ("m19-dbg", "10.11.19-MariaDB")])
    assert ordered == ["m9", "m18", "m19", "m19-dbg"]
    assert bisect_plan.range_between(ordered, "m18", "m19-dbg") == ["m18", "m19", "m19-dbg"]
    with pytest.raises(ValueError, match="^--range: m19 does not come before m18"):
        bisect_plan.range_between(ordered, "m19", "m18")
    with pytest.raises(ValueError, match="^--bad: build 'm20' is not announced"):
        bisect_plan.range_between(ordered, "m18", "m20")


@pytest.mark.parametrize("extra", [[], ["--builds", "a,b", "--range"]])
def test_the_command_wants_either_a_list_of_builds_or_range(extra, capsys):
    from services.scheduler import cli

    with pytest.raises(SystemExit) as e:
        cli._parser().parse_args(["bisect", "s.yaml", "--good", "a", "--bad", "b", "--effect", "5%", *extra])
    assert e.value.code == 2
    assert "--builds" in capsys.readouterr().err


def test_the_command_reads_the_effect_as_a_fraction_and_cells_as_given():
    from services.scheduler import cli

    a = cli._parser().parse_args(["bisect", "s.yaml", "--good", "a", "--bad", "c", "--builds", "a,b,c",
                                  "--effect", "5%", "--cell", "oltp_point_select:2", "--cell", "oltp_read_only:8"])
    assert (a.effect, a.cell, a.max_repeat, a.fmt) == (0.05, ["oltp_point_select:2", "oltp_read_only:8"], 20, "text")
