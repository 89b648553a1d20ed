"""Campaigns that travel: `collector export` -> `collector import` into another results DB gives the
same campaign (reports identical, no duplicates on a second import, which needs --replace), and `collector import-sysbench`
stores a real sysbench 1.0 run with the q/s and percentiles sysbench printed."""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
from dataclasses import replace

import mysql.connector
import pytest

from services.common.results.histogram import Histogram
from services.common.messages.results import RunResult
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.scheduler import plan

from tests.integration.fleet import TEST_TARGET_PASSWORD, Fleet, target_yaml
from tests.missing import missing

pytestmark = pytest.mark.integration


@pytest.fixture
def other_db(fleet):
    """A second results DB for the same fleet, dropped afterwards."""
    name = f"benchfleet_test_{secrets.token_hex(3)}"
    yield name
    conn = mysql.connector.connect(**{k: v for k, v in fleet.settings.db_params().items() if k != "database"})
    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


def _rich_result(r, campaign_id: str) -> RunResult:
    h = Histogram({})
    for us in (300, 450, 900, 2500) * (r.repetition + 2):
        h.record(us)
    q = 1000 + 10 * r.repetition + (200 if r.cell.target == "B" else 0)
    return RunResult(
        run_id=r.run_id, campaign_id=campaign_id, cell=r.cell, repetition=r.repetition, status="ok", worker="w1",
        host="h1", started_at=1_700_000_000.0 + r.seq, ended_at=1_700_000_003.5 + r.seq, warmup_s=0.5,
        measured_s=3.0, totals={"transactions": q // 10 * 3, "reads": q * 3},
        series={"transactions": [q // 10] * 3, "queries": [q - 5, q, q + 5], "errors": [0, 0, 0]},
        latency={"p50_ms": 0.45, "p95_ms": 2.5, "p99_ms": 2.5, "max_ms": 2.5, "histogram": h.to_wire()},
        server={"kind": "dsn", "version": "10.11.19-MariaDB", "status_deltas": {"Key_reads": 7 * r.repetition},
                "variables": {"key_buffer_size": "8388608"}},
        versions={"benchfleet": "0.1.0"})


def _spec(fleet: Fleet):
    s = fleet.settings
    return parse_spec("name: travel\ntargets:\n" + target_yaml(s, "A", "bf_tr_a") + target_yaml(s, "B", "bf_tr_b")
                      + "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 100}\nthreads: [1, 4]\n"
                        "duration: 3s\nwarmup: 0.5s\nrepeat: 2\nseed: 5\n")


def _exported(fleet: Fleet, campaign_id: str, out):
    """A campaign of ``_spec`` with every run's result stored, exported to ``out``; its runs."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, campaign_id)
    with Store(fleet.settings) as store:
        store.campaigns.record(campaign_id, spec, runs, now=1_700_000_000.0)
        for r in runs:
            store.results.store(_rich_result(r, campaign_id))
    assert fleet.cli("collector", "export", campaign_id, "--json", str(out)).returncode == 0
    return runs


def test_export_import_round_trips_a_campaign_exactly(fleet, other_db, tmp_path):
    """Every run, series, histogram and server figure comes back: the reimported campaign exports to
    the same file, reports identically in every format, and a second import adds nothing. The file
    carries the public spec (no password_env), so reports, not stored specs, are what round-trips."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "travel-1")
    with Store(fleet.settings) as store:
        store.campaigns.record("travel-1", spec, runs, now=1_700_000_000.0)
        for r in runs[:-1]:
            store.results.store(_rich_result(r, "travel-1"))
        # The last run never ran: failed without a result, its state and reason travel too.
        assert store.runs.fail(runs[-1].run_id, "travel-1", "no result: its worker is gone", now=1_700_000_100.0)
    out = tmp_path / "travel.json"
    r = fleet.cli("collector", "export", "travel-1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "benchfleet.campaign-export/1" and len(doc["runs"]) == 8 and len(doc["results"]) == 7
    # Shared like a report: where the targets' passwords are kept on the workers is not in it.
    assert spec.targets[0].password_env == TEST_TARGET_PASSWORD and "password_env" not in out.read_text()
    assert TEST_TARGET_PASSWORD not in out.read_text()
    first = doc["results"][0]
    assert first["series"]["queries"] and first["latency"]["histogram"] and first["server"]["status_deltas"]

    other = replace(fleet, settings=replace(fleet.settings, db_name=other_db))
    for again in ((), ("--replace",)):
        r = other.cli("collector", "import", str(out), *again)
        assert r.returncode == 0 and r.stdout.startswith("imported campaign travel-1: 8 runs, 7 results"), r.stderr
    with Store(other.settings) as store:
        assert len(store.results.rows("travel-1")) == 7 and store.runs.counts("travel-1")["failed"] == 1
        assert [store.results.count(x.run_id) for x in runs] == [1] * 7 + [0]
    again = tmp_path / "again.json"
    assert other.cli("collector", "export", "travel-1", "--json", str(again)).returncode == 0
    assert again.read_text() == out.read_text()
    for args in (["--format", "json"], ["--all-tables"], ["--metric", "status:Key_reads", "--format", "csv"]):
        a, b = fleet.cli("collector", "report", "travel-1", *args), other.cli("collector", "report", "travel-1", *args)
        assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and a.stdout, args


def test_import_of_a_broken_file_names_the_field_and_stores_nothing(fleet, tmp_path):
    """A file that is not an export, or one with a wrong field, is refused (exit 2) naming it."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "benchfleet.campaign-export/1", "campaign": {}, "runs": [], "results": []}))
    r = fleet.cli("collector", "import", str(bad))
    assert r.returncode == 2 and r.stderr.startswith(f"error: {bad}: campaign.campaign_id: Field required"), r.stderr
    bad.write_text("{}")
    r = fleet.cli("collector", "import", str(bad))
    assert r.returncode == 2 and "is not a campaign export" in r.stderr


def test_import_never_replaces_a_stored_campaign_unless_asked(fleet, other_db, tmp_path):
    """Importing a file whose campaign id the results DB holds is refused (exit 2, naming the id and
    --replace) and leaves the stored campaign as it was; with --replace the file's results replace it."""
    out = tmp_path / "mine.json"
    runs = _exported(fleet, "mine-1", out)
    # Someone else's file of the same id, with other numbers: what an import would store over ours.
    doc = json.loads(out.read_text())
    for result in doc["results"]:
        result["totals"]["transactions"] = 1
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    other = replace(fleet, settings=replace(fleet.settings, db_name=other_db))
    assert other.cli("collector", "import", str(out)).returncode == 0
    r = other.cli("collector", "import", str(forged))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("error: campaign mine-1 is already in the results DB") and "--replace" in r.stderr
    with Store(other.settings) as store:
        assert {x.totals.transactions for x in store.results.whole("mine-1")} != {1}
    r = other.cli("collector", "import", str(forged), "--replace")
    assert r.returncode == 0, r.stderr
    with Store(other.settings) as store:
        assert {x.totals.transactions for x in store.results.whole("mine-1")} == {1}
        assert len(store.results.rows("mine-1")) == len(runs)


def test_an_import_that_fails_part_way_leaves_nothing_of_the_campaign(fleet, other_db, tmp_path):
    """An import is one transaction: when the results DB refuses its last result, the command fails
    naming the campaign, and no campaign row, run or result of it is left (it once stored the campaign
    and its runs before the results, each in its own commit). Run again without the refusal, it all goes in."""
    out = tmp_path / "half.json"
    runs = _exported(fleet, "half-1", out)
    other = replace(fleet, settings=replace(fleet.settings, db_name=other_db))
    with Store(other.settings) as store:  # made and migrated, for the trigger
        store.db.execute("CREATE TRIGGER bf_test_refuse BEFORE INSERT ON results FOR EACH ROW"
                         f" IF NEW.run_id = '{runs[-1].run_id}' THEN SIGNAL SQLSTATE '45000'"
                         " SET MESSAGE_TEXT = 'refused'; END IF")
    r = other.cli("collector", "import", str(out))
    assert r.returncode != 0, r.stderr
    assert r.stderr.startswith(f"error: results DB: import campaign half-1: store the result of run {runs[-1].run_id}: ")
    assert r.stderr.rstrip().endswith("refused"), r.stderr
    with Store(other.settings) as store:
        for table in ("campaigns", "runs", "results", "result_series"):
            assert store.db.rows(f"SELECT COUNT(*) FROM {table} WHERE campaign_id=%s", ("half-1",)) == [(0,)], table
        store.db.execute("DROP TRIGGER bf_test_refuse")
    r = other.cli("collector", "import", str(out))
    assert r.returncode == 0, r.stderr
    with Store(other.settings) as store:
        assert len(store.results.rows("half-1")) == len(runs)


def test_import_of_a_deeply_nested_or_truncated_file_exits_2_naming_it(fleet, tmp_path):
    """A file nested 100,000 levels deep, and a truncated export, are refused by the real CLI with
    exit 2 and one `error:` line naming the file: no traceback."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "benchfleet.campaign-export/1", "campaign": ' + "[" * 100_000 + "]" * 100_000 + "}")
    cut = tmp_path / "cut.json"
    cut.write_text('{"schema": "benchfleet.campaign-export/1", "campaign": {"campaign_id": "x", "na')
    for path, says in ((deep, "nested deeper than 32 levels"), (cut, "not JSON")):
        r = fleet.cli("collector", "import", str(path))
        assert r.returncode == 2 and r.stderr.startswith(f"error: {path}: ") and says in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def _sysbench(fleet: Fleet, db: str, cnf, *args: str) -> str:
    r = subprocess.run(["sysbench", f"--config-file={cnf}", "oltp_read_only", f"--mysql-db={db}", "--tables=1",
                        "--table-size=2000", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_import_sysbench_of_a_real_run_reproduces_its_numbers(fleet, tmp_path):
    """A real `sysbench oltp_read_only run --report-interval=1 --histogram` imported: the report's
    q/s is the q/s sysbench printed, p95 its 95th percentile (within a histogram bucket)."""
    if shutil.which("sysbench") is None:
        missing("sysbench is not installed (deploy/ensure-services sysbench)")
    s = fleet.settings
    db = f"bf_sysimp_{secrets.token_hex(3)}"
    cnf = tmp_path / "sysbench.cnf"
    cnf.write_text(f"mysql-host={s.db_host}\nmysql-port={s.db_port}\nmysql-user={s.db_user}\n"
                   f"mysql-password={s.db_password}\n")
    cnf.chmod(0o600)
    conn = mysql.connector.connect(**{k: v for k, v in s.db_params().items() if k != "database"})
    conn.cursor().execute(f"CREATE DATABASE `{db}`")
    try:
        _sysbench(fleet, db, cnf, "prepare")
        output = _sysbench(fleet, db, cnf, "--threads=2", "--time=3", "--report-interval=1", "--histogram",
                           "--percentile=95", "run")
    finally:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()
    out = tmp_path / "run.txt"
    out.write_text(output)
    qps = float(re.search(r"queries:\s+\d+\s+\(([0-9.]+) per sec\.\)", output).group(1))  # type: ignore[union-attr]
    p95 = float(re.search(r"95th percentile:\s+([0-9.]+)", output).group(1))  # type: ignore[union-attr]

    r = fleet.cli("collector", "import-sysbench", str(out), "--campaign", "oldbox", "--target", "mariadb-10.11",
                  "--workload", "oltp_read_only")
    assert r.returncode == 0, r.stderr
    r = fleet.cli("collector", "report", "oldbox", "--format", "json")
    assert r.returncode == 0, r.stderr
    run, = json.loads(r.stdout)["runs"]
    assert round(run["qps"], 2) == qps and run["threads"] == 2
    assert abs(run["p95_ms"] - p95) <= 0.02 * p95 + 0.01
    with Store(fleet.settings) as store:
        stored = store.results.get(run["run_id"])
        # One figure per report line sysbench printed (a busy machine can drop the last one of 3 s), and
        # the last partial second from its totals when the lines do not add up to them.
        printed = len(re.findall(r"^\[ \d+s \]", output, re.MULTILINE))
        assert stored is not None and printed >= 2 and stored.latency.histogram
        assert len(stored.series.queries) in (printed, printed + 1)
    # The same command again replaces the run; another target joins the campaign for `report`.
    for target in ("mariadb-10.11", "mysql-8.0"):
        r = fleet.cli("collector", "import-sysbench", str(out), "--campaign", "oldbox", "--target", target,
                      "--workload", "oltp_read_only")
        assert r.returncode == 0, r.stderr
    r = fleet.cli("collector", "report", "oldbox", "--format", "json")
    assert len(json.loads(r.stdout)["runs"]) == 2


def test_import_sysbench_stores_unprinted_percentiles_as_missing_never_zero(fleet, tmp_path):
    """sysbench without --histogram prints one percentile (its 95th): the others are stored as missing
    (NULL), never 0.0, and the report says n/a for them, not a latency of 0 ms."""
    from pathlib import Path

    out = Path(__file__).parent.parent / "unit" / "fixtures" / "sysbench" / "oltp_point_select_rate.txt"
    assert "95th percentile:" in out.read_text() and "Latency histogram" not in out.read_text()
    r = fleet.cli("collector", "import-sysbench", str(out), "--campaign", "nohist", "--target", "old",
                  "--workload", "oltp_point_select")
    assert r.returncode == 0, r.stderr
    with Store(fleet.settings) as store:
        rows = store.db.rows("SELECT p50_ms, p95_ms, p99_ms, max_ms FROM results WHERE campaign_id='nohist'")
        assert rows == [(None, 0.35, None, 3.85)]
        stored, = [store.results.get(run_id) for (run_id,) in
                   store.db.rows("SELECT run_id FROM results WHERE campaign_id='nohist'")]
    assert stored is not None and (stored.latency.p50_ms, stored.latency.p99_ms) == (None, None)
    r = fleet.cli("collector", "report", "nohist", "--format", "json")
    doc = json.loads(r.stdout)
    run, = doc["runs"]
    # A missing figure is left out of a run's JSON (or null), never 0.
    assert run.get("p50_ms") is None and run.get("p99_ms") is None and run["p95_ms"] == 0.35
    # Its reason is that sysbench did not print it: the run completed transactions.
    assert doc["missing"][run["run_id"]]["p99_ms"].startswith("not printed by sysbench")
    r = fleet.cli("collector", "report", "nohist", "--metric", "p99_ms")
    assert "not printed by sysbench" in r.stdout and "no transaction completed" not in r.stdout, r.stdout


def test_import_sysbench_never_overwrites_a_campaign_the_fleet_ran_unless_forced(fleet, tmp_path):
    """import-sysbench naming a campaign the fleet ran is refused (exit 2, its spec untouched);
    with --force the imported runs are added to it."""
    from pathlib import Path

    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-fleet")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-fleet", spec, runs)
        for r in runs:
            store.results.store(_rich_result(r, "c-fleet"))
    out = Path(__file__).parent.parent / "unit" / "fixtures" / "sysbench" / "oltp_read_write_pareto_histogram.txt"
    args = ("collector", "import-sysbench", str(out), "--campaign", "c-fleet", "--target", "old",
            "--workload", "oltp_read_write")
    r = fleet.cli(*args)
    assert r.returncode == 2 and "--campaign: c-fleet is a campaign the fleet ran" in r.stderr, r.stderr
    with Store(fleet.settings) as store:
        assert store.campaigns.get("c-fleet").spec == spec
    r = fleet.cli(*args, "--force")
    assert r.returncode == 0, r.stderr
    with Store(fleet.settings) as store:
        assert "old" in [t.name for t in store.campaigns.get("c-fleet").spec.targets]


def test_an_unfinished_campaign_is_not_exported(fleet, tmp_path):
    """`collector export` of a campaign with runs still pending or running is refused (exit 2,
    saying how many), so an importing collector never reaps or waits for them."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-busy")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-busy", spec, runs)
        store.results.store(_rich_result(runs[0], "c-busy"))
    r = fleet.cli("collector", "export", "c-busy", "--json", str(tmp_path / "busy.json"))
    assert r.returncode == 2, r.stderr
    assert f"campaign c-busy is not finished ({len(runs) - 1} pending runs)" in r.stderr, r.stderr
    assert not (tmp_path / "busy.json").exists()
