"""A misspelt name gets the closest right one, and every wrong field of a spec is reported at once,
one line each."""

from __future__ import annotations

import pytest

from services.common.errors import SpecError
from services.common.spec.loading import parse_spec
from services.scheduler import cli

SPEC = """name: s
targets:
  - {name: before, user: bench}
  - {name: after, user: bench}
workloads:
  - oltp_point_select
  - {name: oltp_read_only, options: {point_selects: 5}}
threads: [1, 8]
duration: 4s
warmup: 1s
"""


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as e:
        parse_spec(text, "spec.yaml")
    return [err.render("spec.yaml") for err in e.value.errors]


def _suggestions(text: str) -> list[str | None]:
    with pytest.raises(SpecError) as e:
        parse_spec(text, "spec.yaml")
    return [err.suggestion for err in e.value.errors]


def test_a_misspelt_workload_gets_the_closest_name_not_all_eighteen():
    """`oltp_point_selct` suggests oltp_point_select, and the line does not list every workload."""
    lines = _errors(SPEC.replace("  - oltp_point_select\n", "  - oltp_point_selct\n"))
    assert lines == ["spec.yaml:6: workloads[0].name: unknown workload 'oltp_point_selct' "
                     "(did you mean oltp_point_select?)"]
    assert _suggestions(SPEC.replace("  - oltp_point_select\n", "  - oltp_point_selct\n")) == ["oltp_point_select"]


def test_a_workload_like_no_other_lists_the_known_ones():
    """A name near nothing still tells the user what exists."""
    [line] = _errors(SPEC.replace("  - oltp_point_select\n", "  - tpcc\n"))
    assert "unknown workload 'tpcc'; known: delete, insert," in line and "did you mean" not in line


@pytest.mark.parametrize("old,new,line", [
    ("warmup: 1s", "warmpu: 1s", "spec.yaml:10: warmpu: unknown field (did you mean warmup?)"),
    ("{name: before, user: bench}", "{name: before, user: bench, hots: db1}", "spec.yaml:3: targets[0].hots: unknown field (did you mean host?)"),
    ("{name: before, user: bench}", "{kind: managed, name: before, server_cpu: 0}",
     "spec.yaml:3: targets[0].server_cpu: unknown field (did you mean server_cpus?)"),
    ("{name: before, user: bench}", "{name: before, user: bench, quiesce: {timout: 5s}}",
     "spec.yaml:3: targets[0].quiesce.timout: unknown field (did you mean timeout?)"),
    ("{name: oltp_read_only, options", "{name: oltp_read_only, optoins",
     "spec.yaml:7: workloads[1].optoins: unknown field (did you mean options?)"),
    ("duration: 4s", "duration: 4s\ndata: {tabels: 2}", "spec.yaml:10: data.tabels: unknown field (did you mean tables?)"),
    ("point_selects: 5", "point_selcts: 5",
     "spec.yaml:7: workloads[1].options.point_selcts: not an option of oltp_read_only (did you mean point_selects?)"),
    ("point_selects: 5", "rand_type: unifrom",
     "spec.yaml:7: workloads[1].options.rand_type: must be one of uniform, gaussian, special, pareto, zipfian "
     "(did you mean uniform?)"),
    ("warmup: 1s", "warmup: 1s\nbaseline: befor",
     "spec.yaml:11: baseline: 'befor' is not a target (did you mean before?) (targets: before, after)"),
])
def test_a_misspelt_name_suggests_the_closest(old, new, line):
    """Fields, targets' fields, quiesce, options, distributions and the baseline: each suggests its closest name."""
    text = SPEC.replace(old, new)
    assert text != SPEC
    assert _errors(text) == [line]


def test_an_unknown_field_near_nothing_gets_no_suggestion():
    """`colour` is not near any field: no made-up suggestion."""
    assert _errors(SPEC + "colour: blue\n") == ["spec.yaml:11: colour: unknown field"]


def test_every_wrong_option_of_a_workload_is_reported():
    """Three wrong options of one workload are three lines, not the first alone."""
    text = SPEC.replace("point_selects: 5", "point_selectz: 5, range_size: -1, skip_trx: 3")
    assert _errors(text) == [
        "spec.yaml:7: workloads[1].options.point_selectz: not an option of oltp_read_only (did you mean point_selects?)",
        "spec.yaml:7: workloads[1].options.range_size: must be a whole number >= 0",
        "spec.yaml:7: workloads[1].options.skip_trx: must be true or false",
    ]


def test_every_wrong_cross_field_rule_is_reported():
    """A misspelt baseline, a repeated workload and a sysbench-only limit: one line each, together."""
    text = SPEC.replace("warmup: 1s", "warmup: 1s\nbaseline: befor\ndriver: sysbench\nlatency_by_kind: true") \
        .replace("  - oltp_point_select\n", "  - oltp_point_select\n  - oltp_point_select\n")
    lines = [line.split(": ", 1)[1] for line in _errors(text)]
    assert [line.split(":")[0] for line in lines] == ["baseline", "workloads", "latency_by_kind"]


def test_a_rule_that_names_its_field_in_the_message_points_at_that_field():
    """A cross-field rule whose message starts with its field (load_hosts) is reported at that field
    and its YAML line, not at the spec as a whole."""
    assert _errors(SPEC + "load_hosts: 2\n") == [
        "spec.yaml:11: load_hosts: 2 parts need at least 2 threads per run; threads has 1"]


def test_validate_prints_one_error_line_per_wrong_field(capsys):
    """`scheduler validate` exits 2 with an `error:` line for each wrong field, suggestions included."""
    import tempfile

    text = SPEC.replace("warmup: 1s", "warmpu: 1s").replace("  - oltp_point_select\n", "  - oltp_point_selct\n") \
        .replace("point_selects: 5", "point_selcts: 5")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        assert cli.main(["validate", "--offline", f.name]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.rsplit("(did you mean ", 1)[1] for line in err] == ["oltp_point_select?)", "point_selects?)", "warmup?)"]
    assert all(line.startswith(f"error: {f.name}:") for line in err)
