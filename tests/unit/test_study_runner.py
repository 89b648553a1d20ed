"""The study runner: a seed study runs on a fleet of its own (`make study` gives it its own vhost,
namespace and results DB; the runner refuses the shared fleet's, where its campaigns would mix with a
developer's demo and `--report-only` would read someone else's campaign of the same name), and one
failing study does not stop the others."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def runner():
    loader = importlib.machinery.SourceFileLoader("study_runner_fleet", str(ROOT / "examples" / "studies" / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("study_runner_fleet", loader))
    loader.exec_module(module)
    return module


def test_the_runner_refuses_the_shared_namespace_and_results_db():
    problem = runner().shared_fleet({})
    assert problem is not None
    assert "queue namespace benchfleet" in problem and "results DB benchfleet" in problem
    assert "make study" in problem


def test_a_fleet_of_the_studys_own_is_accepted():
    env = {"BENCHFLEET_NAMESPACE": "benchfleet-study", "BENCHFLEET_DB_NAME": "benchfleet_study"}
    assert runner().shared_fleet(env) is None


def test_own_namespace_on_the_shared_results_db_is_still_refused():
    problem = runner().shared_fleet({"BENCHFLEET_NAMESPACE": "benchfleet-study"})
    assert problem is not None and "results DB benchfleet" in problem and "queue namespace" not in problem


def test_running_a_study_on_the_shared_fleet_exits_2_before_submitting(monkeypatch, capsys):
    for var in ("BENCHFLEET_NAMESPACE", "BENCHFLEET_DB_NAME"):
        monkeypatch.delenv(var, raising=False)
    assert runner().main(["all"]) == 2
    assert "shared fleet" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_study_runs_every_study_on_its_own_vhost_namespace_db_and_var_dir():
    out = subprocess.run(["make", "-n", "-W", "pyproject.toml", "study", "STUDY=all", "STUDY_FLEET=benchfleet-study-x"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
    run_line = next(line for line in out.splitlines() if "examples/studies/run" in line)
    for setting in ("BENCHFLEET_NAMESPACE=benchfleet-study-x", "BENCHFLEET_AMQP_VHOST=benchfleet-study-x",
                    "BENCHFLEET_AMQP_USER_PREFIX=benchfleet-study-x", "BENCHFLEET_DB_NAME=benchfleet_study_x",
                    f"BENCHFLEET_VAR={ROOT}/var/benchfleet-study-x", "BENCHFLEET_CONFIG= "):
        assert setting in run_line
        assert setting in next(line for line in out.splitlines() if "deploy/local/up" in line)
    assert run_line.rstrip().endswith("all'")


def test_a_failing_study_does_not_stop_the_others(monkeypatch, capsys):
    """`all`: a study whose premise fails (exit 1) or whose spec cannot test its seed (exit 2) is
    reported, and every other study still runs."""
    run = runner()
    ran = []

    def run_study(name, report_only, quick, repeat=None):
        ran.append(name)
        if name == "keycache":
            raise SystemExit("error: study keycache: premise not met: the key cache misses")
        if name == "builds":
            raise SystemExit(2)

    monkeypatch.setattr(run, "run_study", run_study)
    monkeypatch.setattr(run, "shared_fleet", lambda env=None: None)
    assert run.main(["all"]) == 2
    assert ran == list(run.STUDIES)
    err = capsys.readouterr().err
    assert "premise not met" in err and "2 of 4 studies failed: builds, keycache" in err


def test_the_builds_study_registers_both_debian_builds_on_a_host_that_has_neither():
    """`make study STUDY=all` on a fresh machine: the runner fetches the two Debian builds the builds
    and allocators specs name, and only those not registered yet."""
    run = runner()
    specs = [run.load_spec(run.HERE / f) for f, _ in run.STUDIES["builds"][2]]
    assert run.builds_to_register(specs, set()) == [("mariadb-10.11.18", "10.11.18"), ("mariadb-10.11.19", "10.11.19")]
    assert run.builds_to_register(specs, {"mariadb-10.11.18"}) == [("mariadb-10.11.19", "10.11.19")]
    assert run.builds_to_register(specs, {"mariadb-10.11.18", "mariadb-10.11.19"}) == []
    keycache = [run.load_spec(run.HERE / f) for f, _ in run.STUDIES["keycache"][2]]
    assert run.builds_to_register(keycache, set()) == []


def test_a_build_the_runner_cannot_fetch_stops_the_study_with_exit_2(capsys):
    run = runner()
    spec = run.load_spec(run.HERE / "allocators.yaml")
    spec = spec.model_copy(update={"targets": [t.model_copy(update={"build": "mysql-8.0.40"}) for t in spec.targets]})
    with pytest.raises(SystemExit) as e:
        run.builds_to_register([spec], {"mariadb-10.11.19"})
    assert e.value.code == 2
    assert "mysql-8.0.40 is not registered" in capsys.readouterr().err


def test_the_machine_load_line_says_quiet_or_busy_from_the_start_load_against_the_cpus():
    """A study started at a 1-minute load below the machine's CPUs reads quiet, above them busy; a
    record of an earlier runner, without the CPU count, gets its figures and no judgement, and a
    page whose campaign was not the one recorded says the load is unknown."""
    line = runner().machine_load_line
    quiet = {"campaign": "c1", "load_start": "0.51, 0.38, 0.17", "load_end": "7.89, 5.49, 2.59", "cpus": 2}
    assert "was quiet when the study started" in line(quiet, "c1") and "0.51, 0.38, 0.17" in line(quiet, "c1")
    assert "shared" not in line(quiet, "c1")
    busy = dict(quiet, load_start="5.89, 10.97, 11.10")
    assert "was busy with other jobs when the study started" in line(busy, "c1")
    old = {k: v for k, v in quiet.items() if k != "cpus"}
    assert "quiet" not in line(old, "c1") and "busy" not in line(old, "c1") and "7.89, 5.49, 2.59" in line(old, "c1")
    assert line(quiet, "c2").startswith("**Machine load not recorded**")


def test_the_page_says_each_tests_windows_and_when_a_quick_run_shortened_them():
    """The thread-pool study gives its tests windows of their own: the page says each, not one length
    for all, and a --quick run says what it ran against what the spec asks."""
    from services.common.spec.loading import load_spec

    study = runner()
    spec = load_spec(ROOT / "examples" / "studies" / "thread-pool.yaml")
    said = study.spec_differences(spec, spec.public_dump())[1]
    assert "oltp_read_write: 5s warm-up + 10s measured at 16, 64, 256 threads;" in said
    assert "30s warm-up + 15m measured at 4096 threads." in said and "shortened" not in said
    quick = {"duration": "3s", "warmup": "1s", "repeat": 2, "duration_by_threads": {}, "warmup_by_threads": {},
             "workloads": [{"name": w.name} for w in spec.workloads]}
    said = study.spec_differences(spec, quick)[1]
    assert said.startswith("`study-thread-pool` was run **shortened**")
    assert "Each test was run 2 times for 3 seconds with 1 second warm-up. The spec asks: Each test was run 3 times:" in said


def test_fewer_repetitions_keep_the_windows_and_the_page_says_so():
    """--repeat 2 on a spec of 3 runs the spec's windows twice a cell; the page names it shortened, and
    --repeat never adds repetitions the spec did not ask for."""
    from services.common.spec.loading import load_spec

    study = runner()
    spec = load_spec(ROOT / "examples" / "studies" / "thread-pool.yaml")
    assert study.repeat_flags(spec, 2) == ["--repeat", "2"]
    assert study.repeat_flags(spec, 3) == [] and study.repeat_flags(spec, 5) == [] and study.repeat_flags(spec, None) == []
    said = study.spec_differences(spec, {**spec.public_dump(), "repeat": 2})[1]
    assert said.startswith("`study-thread-pool` was run **shortened**")
    assert "30s warm-up + 15m measured at 4096 threads" in said.split("The spec asks:")[0]


def test_a_repeat_that_is_not_a_count_is_refused_before_anything_runs(capsys):
    study = runner()
    assert study.main(["--repeat", "two", "thread-pool"]) == 2
    assert "--repeat wants a whole number" in capsys.readouterr().err
    assert study.main(["--quick", "--repeat", "2", "thread-pool"]) == 2
