"""sysbench 1.0.20's options as a spec says them: validation (hostile script names included),
the command line the sysbench driver builds, the native driver's twin of each, and the schema."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.errors import LoadError
from services.common.spec.json_schema import spec_json_schema
from services.common.spec.loading import SpecError, parse_spec
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.scheduler.plan import run_specs
from services.worker import prepare
from services.worker.driver import registry as drivers
from services.worker.driver.sysbench import driver as sd
from services.worker.driver.sysbench import scripts
from services.workload import distributions
from services.workload.statements import Generator, as_text, text_events

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
name: opts
driver: {driver}
targets: [{{name: a, user: bench, database: sb_a}}]
workloads:
{workloads}
threads: [1, 2]
duration: 10s
"""


def spec_of(workloads: str, driver: str = "sysbench", extra: str = ""):
    return parse_spec(SPEC.format(driver=driver, workloads=workloads) + extra, "spec.yaml")


def errors_of(workloads: str, driver: str = "sysbench", extra: str = "") -> list[str]:
    with pytest.raises(SpecError) as info:
        spec_of(workloads, driver, extra)
    return str(info.value).splitlines()


def flags(w: WorkloadSpec, **kw) -> list[str]:
    return sd.command(w, DataShape(), threads=1, seed=1, duration=2, **kw)


# -- rand_type and its parameters ------------------------------------------------------------


def test_distribution_parameters_reach_sysbench_with_its_spelling():
    """rand_spec_iter/pct/res and rand_pareto_h become --rand-spec-iter, ... (sysbench's global options)."""
    w = WorkloadSpec(name="oltp_point_select", options={"rand_type": "special", "rand_spec_iter": 6,
                                                         "rand_spec_pct": 5, "rand_spec_res": 90, "rand_pareto_h": 0.4})
    argv = flags(w)
    for flag in ("--rand-type=special", "--rand-spec-iter=6", "--rand-spec-pct=5", "--rand-spec-res=90",
                 "--rand-pareto-h=0.4"):
        assert flag in argv
    assert not any(a.startswith("--rand_") for a in argv)
    # Left at sysbench's defaults, nothing extra is said.
    assert not any(a.startswith("--rand-spec") for a in flags(WorkloadSpec(name="oltp_point_select")))


@pytest.mark.parametrize("option, value, expected", [
    ("rand_spec_iter", 0, "must be a whole number >= 1"),
    ("rand_spec_iter", 1001, "must be <= 1,000"),
    ("rand_spec_pct", 101, "must be <= 100"),
    ("rand_spec_res", -1, "must be a whole number >= 0"),
    ("rand_pareto_h", 0, "must be > 0 and < 1"),
    ("rand_pareto_h", 1.0, "must be > 0 and < 1"),
    ("rand_pareto_h", "high", "must be a number"),
    ("rand_zipfian_exp", -0.5, "must be >= 0 and <= 100"),
    ("db_ps_mode", "off", "must be one of auto, disable"),
    ("mysql_compression", "yes", "must be true or false"),
])
def test_bad_option_values_are_named(option, value, expected):
    """Each parameter is bounded where sysbench would divide by zero or loop without end."""
    lines = errors_of(f"  - {{name: oltp_read_only, options: {{{option}: {value!r}}}}}", driver="native")
    assert any(f"workloads[0].options.{option}: {expected}" in line for line in lines), lines


def test_special_parameters_move_the_hot_rows_as_sysbench_does():
    """res = 100 sends every key to the middle pct% of the range; res = 0 none; pct widens the band."""
    hot = distributions.make("special", pct=10, res=100)
    r = random.Random(1).random
    keys = [hot(r, 1, 1000) for _ in range(2000)]
    assert min(keys) >= 450 and max(keys) <= 551
    cold = distributions.make("special", res=0)
    keys = [cold(r, 1, 1000) for _ in range(2000)]
    assert sum(495 <= k <= 505 for k in keys) < 200  # gaussian alone: no spike of 75% in the band
    assert distributions.make("special") is distributions.special


def test_pareto_h_and_gaussian_iterations_change_the_draws():
    """h = 0.5 makes pareto uniform (power 1); fewer iterations widen gaussian's spread."""
    r = random.Random(2).random
    flat = [distributions.make("pareto", pareto_h=0.5)(r, 1, 100) for _ in range(5000)]
    assert 40 < sum(flat) / len(flat) < 61
    skewed = [distributions.make("pareto")(r, 1, 100) for _ in range(5000)]
    assert sum(skewed) / len(skewed) < 30
    wide = [distributions.make("gaussian", iters=1)(r, 1, 100) for _ in range(5000)]
    narrow = [distributions.make("gaussian", iters=48)(r, 1, 100) for _ in range(5000)]
    assert min(wide) < 5 and min(narrow) > 25


def test_the_native_generator_draws_with_the_spec_parameters():
    """A workload's rand_* options reach the native driver's key draws."""
    w = WorkloadSpec(name="oltp_point_select", options={"rand_spec_pct": 2, "rand_spec_res": 100})
    gen = Generator(w, DataShape(table_size=10_000))
    rng = random.Random(3)
    ids = [gen(rng)[0][2][0] for _ in range(500)]
    assert all(4900 <= i <= 5101 for i in ids)


def test_zipfian_exponent_is_native_only():
    """rand_zipfian_exp is sysbench 1.1's; the sysbench driver (1.0.20) refuses it by name."""
    spec_of("  - {name: oltp_point_select, options: {rand_type: zipfian, rand_zipfian_exp: 1.2}}", driver="native")
    lines = errors_of("  - {name: oltp_point_select, options: {rand_zipfian_exp: 1.2}}")
    assert any("rand_zipfian_exp" in line and "sysbench 1.1" in line for line in lines), lines
    with pytest.raises(LoadError, match="rand_zipfian_exp"):
        flags(WorkloadSpec(name="oltp_point_select", options={"rand_zipfian_exp": 1.2}))


# -- prepared statements, compression, events, percentile ------------------------------------


def test_ps_mode_and_compression_reach_sysbench():
    """db_ps_mode and mysql_compression are sysbench's --db-ps-mode and --mysql-compression."""
    argv = flags(WorkloadSpec(name="oltp_read_only", options={"db_ps_mode": "disable", "mysql_compression": True}))
    assert "--db-ps-mode=disable" in argv and "--mysql-compression=on" in argv
    assert not any(a.startswith(("--db_ps_mode", "--mysql_compression")) for a in argv)


def test_text_mode_sends_every_statement_as_text_with_its_values():
    """db_ps_mode: disable sends each statement with its values written in, BEGIN and COMMIT too."""
    assert as_text("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", (5, 104)) == \
        "SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 104"
    assert as_text("INSERT INTO t VALUES (?, ?, ?)", (None, "a'b\\c", 7)) == "INSERT INTO t VALUES (NULL, 'a\\'b\\\\c', 7)"
    with pytest.raises(ValueError):
        as_text("SELECT ?", ())
    w = WorkloadSpec(name="oltp_read_write", options={"db_ps_mode": "disable"})
    gen = Generator(w, DataShape(tables=2, table_size=100))
    trx = text_events(gen.event)(random.Random(4))
    assert trx[0][1] == "BEGIN" and trx[-1][1] == "COMMIT"
    assert all(params is None and "?" not in sql for _, sql, params in trx)


def test_events_and_percentile_reach_the_run_and_sysbench():
    """events is --events beside --time (whichever ends first); percentile is --percentile, never 0."""
    spec = spec_of("  - oltp_point_select", extra="events: 5000\npercentile: 99\n")
    run = run_specs(spec, "c1")[0]
    assert (run.events, run.report_percentile) == (5000, 99)
    argv = sd.command(spec.workloads[0], run.data, threads=1, seed=1, duration=run.duration, events=run.events,
                      percentile=run.report_percentile)
    assert "--events=5000" in argv and "--time=10" in argv and "--percentile=99" in argv
    default = run_specs(spec_of("  - oltp_point_select"), "c1")[0]
    assert default.events is None and default.report_percentile == 95 and "percentile" not in default.encode().decode()
    with pytest.raises(LoadError, match="percentile 0"):
        flags(WorkloadSpec(name="oltp_point_select"), percentile=0)
    assert any("percentile: must be >= 1" in line for line in errors_of("  - oltp_point_select", extra="percentile: 0\n"))
    lines = errors_of("  - oltp_point_select", extra="events: 100\nload_hosts: 2\n")
    assert any(line.split(": ")[1] == "events" for line in lines), lines


# -- table shapes ----------------------------------------------------------------------------


def test_each_workload_may_have_its_own_tables_and_rows():
    """A workload's tables and table_size override data for its runs only (sysbench's --tables, --table_size)."""
    spec = spec_of("  - oltp_point_select\n  - {name: oltp_read_only, tables: 3, table_size: 500}",
                   extra="data: {tables: 2, table_size: 1000}\n")
    shapes = {r.cell.workload: (r.data.tables, r.data.table_size) for r in run_specs(spec, "c1")}
    assert shapes == {"oltp_point_select": (2, 1000), "oltp_read_only": (3, 500)}
    lines = errors_of("  - {name: select_random_points, tables: 2}", driver="native")
    assert any("its tables is 2" in line for line in lines), lines
    lines = errors_of("  - {name: oltp_read_only, options: {table_size: 5}}")
    assert any("options.table_size: not an option: give the workload's own table_size" in line for line in lines)


def test_secondary_and_create_secondary_are_other_table_shapes():
    """secondary puts id under KEY xid; create_secondary: false drops k's index; both mark the tables apart."""
    assert "KEY xid (id)" in prepare._table_sql(1, "InnoDB", secondary=True)
    assert "PRIMARY KEY (id)" in prepare._table_sql(1, "InnoDB")
    w = WorkloadSpec(name="oltp_read_only", options={"secondary": True, "create_secondary": False})
    idx = prepare.indexes_of(w)
    assert (idx.secondary, idx.create_secondary) == (True, False)
    marks = {prepare.marker(DataShape(), True, indexes=i) for i in
             (prepare.Indexes(), prepare.Indexes(secondary=True), prepare.Indexes(create_secondary=False))}
    assert len(marks) == 3
    assert prepare.marker(DataShape(), True) == "1x10000:InnoDB"  # tables prepared before keep their marker
    assert "--secondary=on" in flags(w) and "--create_secondary=off" in flags(w)


# -- custom Lua scripts ----------------------------------------------------------------------

HOSTILE_NAMES = ["../x", "/etc/passwd", "a/b", "x.lua", "..", ".hidden", "", "a b", "a\nb", "-x", "ä", "x" * 65,
                 "name;rm -rf", "$(id)", "C:\\x"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_script_is_named_never_given_as_a_path(name):
    """A script name is letters, digits, _ and -: no path, no dot, so it names a file only in the
    worker's own script directories."""
    lines = errors_of(f"  - {{script: {name!r}}}".replace("\n", "\\n"))
    assert any("workloads[0].script" in line for line in lines), lines
    with pytest.raises(LoadError, match="workloads.w.script"):
        scripts.find_script(name, "workloads.w.script", {scripts.ENV: "/tmp"})


def test_a_script_runs_with_the_sysbench_driver_only():
    """native refuses a script at validate time, naming the field; sysbench takes it as a row named after it."""
    lines = errors_of("  - {script: my_bench}", driver="native")
    assert any("workloads[0].script: my_bench: a Lua script runs only with driver: sysbench" in line for line in lines)
    spec = spec_of("  - {script: my_bench, label: mine, options: {point_selects: 3, rand_type: pareto}}")
    w = spec.workloads[0]
    assert (w.script, w.name, w.key) == ("my_bench", "my_bench", "mine")
    argv = sd.command(w, DataShape(), threads=1, seed=1, duration=2, script_path="/opt/lua/my_bench.lua")
    assert argv[1] == "/opt/lua/my_bench.lua" and "--point_selects=3" in argv and "--rand-type=pareto" in argv
    with pytest.raises(LoadError, match="not looked up"):
        sd.command(w, DataShape(), threads=1, seed=1, duration=2)
    lines = errors_of("  - {script: my_bench, name: oltp_read_only}")
    assert any("use label for another row name" in line for line in lines), lines


@pytest.mark.parametrize("option, value, expected", [
    ("mysql_host", "'evil'", "is sysbench's own --mysql-host"),
    ("threads", 64, "is sysbench's own --threads"),
    ("config_file", "x", "is sysbench's own --config-file"),
    ("db_driver", "pgsql", "is sysbench's own --db-driver"),
    ("rand_seed", 1, "is sysbench's own --rand-seed"),
    ("tables", 4, "is sysbench's own --tables"),
    ("Weird-Name", 1, "a script's option name is lower-case letters, digits and '_'"),
    ("path", "'/etc/shadow'", "a text value is letters, digits"),
    ("text", "'a b'", "a text value is letters, digits"),
])
def test_a_scripts_options_cannot_shadow_sysbenchs_own(option, value, expected):
    """A script's options are its own: connection, threads, time, seed and table shape stay the run's."""
    lines = errors_of(f"  - {{script: my_bench, options: {{{option}: {value}}}}}")
    assert any(f"workloads[0].options.{option}: {expected}" in line for line in lines), lines


def test_the_worker_finds_only_installed_scripts(tmp_path):
    """NAME.lua in the first listed directory that has it; a missing one is refused naming what is there."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    (second / "my_bench.lua").write_text("function event() end\n")
    (second / "other.lua").write_text("")
    env = {scripts.ENV: f"{first}:{second}"}
    assert scripts.find_script("my_bench", "w", env) == str(second / "my_bench.lua")
    with pytest.raises(LoadError, match=r"script 'nope' is not installed .*installed: my_bench, other"):
        scripts.find_script("nope", "workloads.x.script", env)
    with pytest.raises(LoadError, match="BENCHFLEET_LUA_DIRS is not set"):
        scripts.find_script("my_bench", "w", {})
    (first / "my_bench.lua").mkdir()  # a directory of that name is not a script
    assert scripts.find_script("my_bench", "w", env) == str(second / "my_bench.lua")


def test_the_worker_refuses_a_script_before_anything_runs(monkeypatch):
    """The driver registry's check fails a run naming the field: native runs no script, sysbench
    needs it installed."""
    w = WorkloadSpec(script="my_bench")
    with pytest.raises(LoadError, match="workloads.my_bench.script: driver native runs no Lua script"):
        drivers.check_workload("native", w)
    monkeypatch.delenv(scripts.ENV, raising=False)
    with pytest.raises(LoadError, match="workloads.my_bench.script"):
        drivers.check_workload("sysbench", w)
    drivers.check_workload("native", WorkloadSpec(name="oltp_point_select"))


# -- the schema ------------------------------------------------------------------------------


def test_the_schema_accepts_the_new_options_and_refuses_hostile_scripts():
    """An editor wired to `scheduler schema` accepts every option above and marks a path as a script red."""
    jsonschema = pytest.importorskip("jsonschema")
    from services.common.spec import yaml_input

    validator = jsonschema.Draft202012Validator(spec_json_schema())
    text = SPEC.format(driver="sysbench", workloads=(
        "  - {name: oltp_read_only, tables: 3, table_size: 500, options: {rand_spec_iter: 6, rand_pareto_h: 0.3,\n"
        "     db_ps_mode: disable, mysql_compression: true, secondary: true, create_secondary: false}}\n"
        "  - {script: my_bench, label: mine, options: {point_selects: 3, warehouses: 2}}\n"
        "  - oltp_point_select")) + "events: 1000\npercentile: 99\ndata: {engine: rocksdb}\n"
    parse_spec(text)
    assert list(validator.iter_errors(yaml_input.load(text)[0])) == []
    for bad in ("  - {script: ../x}", "  - {name: oltp_read_only, options: {db_ps_mode: off}}",
                "  - {name: oltp_read_only, options: {rand_pareto_h: 1}}"):
        data = yaml_input.load(SPEC.format(driver="sysbench", workloads=bad))[0]
        assert list(validator.iter_errors(data)), bad


# -- from the command line -------------------------------------------------------------------


def _validate(tmp_path, text: str) -> subprocess.CompletedProcess:
    """`scheduler validate --offline --json FILE` as a user types it."""
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHFLEET_")}
    env.update(PYTHONPATH=str(ROOT), BENCHFLEET_CONFIG="")
    return subprocess.run([sys.executable, "-m", "services.scheduler.cli", "validate", "--offline", "--json", str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_a_translated_sysbench_command_line_validates_and_a_script_under_native_does_not(tmp_path):
    """`sysbench oltp_read_only --tables=3 --table_size=500 --events=1000 --percentile=99 --rand-spec-res=90
    --db-ps-mode=disable --mysql-compression=on --secondary=on --create_secondary=off` as a spec is
    accepted; a script under driver native is refused naming workloads[0].script."""
    good = SPEC.format(driver="sysbench", workloads=(
        "  - {name: oltp_read_only, tables: 3, table_size: 500, options: {rand_spec_res: 90, db_ps_mode: disable,\n"
        "     mysql_compression: true, secondary: true, create_secondary: false}}")) + "events: 1000\npercentile: 99\n"
    out = _validate(tmp_path, good)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["ok"] is True
    out = _validate(tmp_path, SPEC.format(driver="native", workloads="  - {script: my_bench}"))
    assert out.returncode == 2
    errors = json.loads(out.stdout)["errors"]
    assert [e["field"] for e in errors] == ["workloads[0].script"], errors


def test_a_scripts_transactions_are_not_counted_by_the_server():
    """The worker cannot tell which statements make a script's transaction, so the server's count is n/a, saying why."""
    from services.workload.server_counter import counter_for

    counter = counter_for(WorkloadSpec(script="my_bench"), DataShape())
    assert counter.counters == () and "custom Lua script" in counter.reason
