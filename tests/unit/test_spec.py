"""The spec model: good specs load, every kind of bad spec is refused naming the field."""

from __future__ import annotations

import pytest

from services.common.spec.durations import format_duration, parse_duration
from services.common.spec.loading import SpecError, parse_spec

GOOD = """\
name: quick
targets:
  - name: a
    user: bench
    database: sb_a
  - {name: b, user: bench, database: sb_b, password_env: BENCH_PW}
baseline: b
workloads: [oltp_point_select, {name: oltp_read_only, label: ro_5, options: {point_selects: 5}}]
data: {tables: 2, table_size: 1000, engine: myisam}
threads: [1, 4]
duration: 15m
warmup: 90s
repeat: 3
seed: 303
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "spec.yaml")
    return str(info.value).splitlines()


def replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


def test_good_spec_loads_with_units_and_defaults():
    """Durations accept 15m/90s, the engine is case-insensitive and options keep their overrides."""
    spec = parse_spec(GOOD)
    assert spec.duration == 900 and spec.warmup == 90
    assert spec.data.engine == "MyISAM"
    assert spec.baseline_name == "b"
    ro = spec.workload("ro_5")
    assert ro.option("point_selects") == 5 and ro.option("range_size") == 100
    assert spec.targets[1].password_env == "BENCH_PW"


def test_baseline_defaults_to_first_target():
    """Without `baseline`, ratios are taken against the first target."""
    assert parse_spec(replace("baseline: b\n", "")).baseline_name == "a"


def test_zero_threads_names_the_list_item_and_line():
    """`threads: [0]` is refused as threads[0] with its YAML line."""
    assert errors_of(replace("threads: [1, 4]", "threads: [0]")) == ["spec.yaml:10: threads[0]: must be > 0"]


def test_third_thread_count_named_by_index():
    """The message names the exact item of the list that is wrong."""
    assert errors_of(replace("threads: [1, 4]", "threads: [1, 4, -2]")) == ["spec.yaml:10: threads[2]: must be > 0"]


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ("duration: 15m", "duration: 15x", "duration: '15x' is not a duration"),
        ("duration: 15m", "duration: 0s", "duration: must be > 0"),
        ("repeat: 3", "repeat: 0", "repeat: must be >= 1"),
        ("repeat: 3", "repeat: lots", "repeat: must be a whole number"),
        ("seed: 303", "seed: 303\ncolour: red", "colour: unknown field"),
        ("    database: sb_a", "    database: sb_a\n    port: 70000", "targets[0].port: must be <= 65535"),
        ("    database: sb_a", "    database: 'sb_a; DROP'", "targets[0].database: invalid value"),
        ("    database: sb_a", "    database: sb_a\n    password: hunter2", "targets[0].password: a password may not be written"),
        ("baseline: b", "baseline: c", "baseline: 'c' is not a target"),
        ("{name: b,", "{name: a,", "targets: names must be distinct, repeated: a"),
        ("oltp_point_select,", "oltp_pointselect,", "workloads[0].name: unknown workload 'oltp_pointselect'"),
        ("point_selects: 5", "point_selcts: 5", "workloads[1].options.point_selcts: not an option of oltp_read_only"),
        ("point_selects: 5", "point_selects: -5", "workloads[1].options.point_selects: must be a whole number >= 0"),
        ("engine: myisam", "engine: 'Rocks DB'", "data.engine: invalid value"),
        ("threads: [1, 4]", "threads: [4, 4]", "threads: thread counts must be distinct"),
    ],
)
def test_each_kind_of_bad_field_is_named(old, new, expected):
    """Every invalid field gives one line that starts with the file, line and field path."""
    lines = errors_of(replace(old, new))
    assert any(expected in line for line in lines), lines
    assert all(line.startswith("spec.yaml") for line in lines)


def test_several_errors_give_one_line_each():
    """Users fix a spec in one go: all wrong fields are listed, not just the first."""
    text = replace("threads: [1, 4]", "threads: [0]").replace("repeat: 3", "repeat: 0")
    lines = errors_of(text)
    assert len(lines) == 2
    assert {l.split(": ")[1] for l in lines} == {"threads[0]", "repeat"}


def test_not_yaml_and_not_a_mapping():
    """Broken YAML names its line; a list instead of a mapping is explained."""
    assert "not valid YAML" in errors_of("name: [unclosed\n")[0]
    assert "a spec is a YAML mapping" in errors_of("- a\n- b\n")[0]


def test_every_catalogue_workload_and_2010_name_validates():
    """Each sysbench 1.0 test and each 2010 name is accepted by the spec (on one table, which the 2010 names need)."""
    from services.workload.registry import WORKLOADS

    for name in WORKLOADS:
        text = replace("oltp_point_select,", f"{name},").replace("tables: 2,", "tables: 1,")
        assert parse_spec(text).workloads[0].name == name


def test_2010_names_are_their_own_workloads():
    """The seeds' names (oltp_simple, select, ...) are workloads of their own, not aliases of sysbench 1.0 tests."""
    spec = parse_spec(replace("oltp_point_select,", "select,").replace("tables: 2,", "tables: 1,"))
    assert spec.workloads[0].name == spec.workloads[0].key == "select"
    assert spec.workloads[0].option("auto_inc") is True


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("15m", 900), ("1h30m", 5400), ("2.5", 2.5), (3, 3), ("500ms", 0.5)])
def test_durations(text, seconds):
    """Durations are written the way engineers say them."""
    assert parse_duration(text) == seconds


def test_duration_round_trip():
    """A spec written back shows durations in the same units."""
    assert [format_duration(s) for s in (900, 90, 5400, 2.5)] == ["15m", "1m30s", "1h30m", "2.5s"]


def test_json_schema_names_the_fields():
    """`scheduler schema` gives editors a schema with the spec's fields."""
    from services.common.spec.campaign import CampaignSpec

    props = CampaignSpec.model_json_schema()["properties"]
    assert {"name", "targets", "workloads", "threads", "duration", "warmup", "repeat", "seed", "data", "pool"} <= set(props)


def test_target_named_off_stays_a_string():
    """The seeds' target names `off`, `on`, `8` are names, not YAML 1.1 booleans or numbers."""
    spec = parse_spec(GOOD.replace("name: a\n", "name: off\n").replace("baseline: b", "baseline: off"))
    assert spec.targets[0].name == "off" and spec.baseline_name == "off"
    assert parse_spec(GOOD.replace("repeat: 3", "repeat: 3\nspec_version: 1")).spec_version == 1


def test_latency_by_kind_only_with_the_native_driver():
    """Per-statement latency is a native-driver feature; asking sysbench for it is refused by name."""
    assert parse_spec(GOOD + "latency_by_kind: true\n").latency_by_kind is True
    lines = errors_of(GOOD + "latency_by_kind: true\ndriver: sysbench\n")
    assert any(l.split(": ")[1] == "latency_by_kind" for l in lines), lines


def test_table_shape_options_are_accepted_and_other_engines_named():
    """secondary and create_secondary are sysbench's table options, which prepare builds; any
    engine name is taken (known ones in the server's spelling), prepare checks the server has it."""
    spec = parse_spec(replace("point_selects: 5", "point_selects: 5, secondary: true, create_secondary: false")
                      .replace("engine: myisam", "engine: rocksdb"))
    w = spec.workload("ro_5")
    assert (w.option("secondary"), w.option("create_secondary")) == (True, False)
    assert spec.data.engine == "ROCKSDB"
    assert parse_spec(replace("engine: myisam", "engine: TokuDB")).data.engine == "TokuDB"


def test_quiesce_is_on_for_managed_targets_and_off_for_dsn_ones():
    """The worker owns a managed server, so it waits for it to settle unless told not to; a dsn
    server is waited for only when the spec asks."""
    spec = parse_spec(replace("  - name: a\n    user: bench\n    database: sb_a\n",
                              "  - {kind: managed, name: a}\n"))
    assert spec.targets[0].quiesce.enabled and spec.targets[0].quiesce.timeout == 300
    assert not spec.targets[1].quiesce.enabled


def test_quiesce_short_form_and_block():
    """`quiesce: true|false` switches it with the defaults; a block sets the bound and thresholds
    (and switches it on)."""
    spec = parse_spec(replace("  - name: a\n    user: bench\n    database: sb_a\n", "  - {name: a, user: bench, database: sb_a, quiesce: true}\n"))
    assert spec.targets[0].quiesce.enabled and spec.targets[0].quiesce.max_history == 1000
    spec = parse_spec(replace("  - name: a\n    user: bench\n    database: sb_a\n",
                              "  - {name: a, user: bench, database: sb_a, quiesce: {timeout: 2m, max_dirty_pct: 5, max_history: 20000}}\n"))
    q = spec.targets[0].quiesce
    assert (q.enabled, q.timeout, q.max_dirty_pct, q.max_history) == (True, 120, 5.0, 20000)
    spec = parse_spec(replace("  - name: a\n    user: bench\n    database: sb_a\n", "  - {kind: managed, name: a, quiesce: false}\n"))
    assert not spec.targets[0].quiesce.enabled


@pytest.mark.parametrize("value,message", [
    ("yes", "targets[0].quiesce: must be true, false or a mapping of enabled, timeout, max_dirty_pct, max_history"),
    ("{timeout: 0s}", "targets[0].quiesce.timeout: must be > 0"),
    ("{timeout: 2h}", "targets[0].quiesce.timeout: must be <= 3600"),
    ("{max_dirty_pct: .nan}", "targets[0].quiesce.max_dirty_pct: must be a finite number"),
    ("{max_dirty_pct: 150}", "targets[0].quiesce.max_dirty_pct: must be <= 100.0"),
    ("{max_history: -1}", "targets[0].quiesce.max_history: must be >= 0"),
    ("{timout: 5s}", "targets[0].quiesce.timout: unknown field (did you mean timeout?)"),
])
def test_bad_quiesce_values_name_the_field(value, message):
    """Every quiesce value is finite and bounded; a wrong one is refused naming its field."""
    errs = errors_of(replace("  - name: a\n    user: bench\n    database: sb_a\n", f"  - {{name: a, user: bench, database: sb_a, quiesce: {value}}}\n"))
    assert errs == [f"spec.yaml:3: {message}"]
