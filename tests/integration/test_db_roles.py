"""Least privilege in the results DB: deploy/ensure-services makes one role per job, and each may do
its job and no more (a submitter records and cancels only its own campaigns and writes no result,
Grafana only reads, the collector writes results, an operator cancels anyone's). Runs the real
script, twice, on a results DB and account prefix of its own; the roles' grants are compared with
the table docs/security.md shows."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from services.common.bus.stub import StubBroker
from services.common.config import Settings
from services.common.errors import BusError, NotYourCampaign, StoreError
from services.common.store import Store, connection, procedures
from services.common.store.judgements import GateRecord, StoredChangePoint
from services.common.store.campaigns import default_key, spec_hash
from services.scheduler.submit import StoreLedger, Submitted, submit

from tests.missing import missing
from tests.unit.consumer_fixtures import SPEC, result, runs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The role names of docs/security.md, by the default prefix.
DOC_PREFIX = "benchfleet"
HOSTS = ("localhost", "127.0.0.1")
#: MySQL errors for a statement the user may not run (table, database, routine).
DENIED = (1142, 1044, 1370)


def root_sql(sql: str) -> str:
    """Run ``sql`` as MariaDB's root over its socket (as ensure-services does); its output, tab-separated."""
    r = subprocess.run(["mariadb", "--protocol=socket", "-uroot", "-N", "-r", "-B"], input=sql, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def deployed(mariadb_params, settings, tmp_path_factory):
    """ensure-services mariadb, run twice, for a results DB, roles and accounts of this module's own
    (two submitters, one operator); everything dropped afterwards."""
    if os.geteuid() != 0 or shutil.which("mariadb") is None:
        missing("needs root and the mariadb client (the roles are made as MariaDB's root)")
    tag = f"bfr{secrets.token_hex(3)}"
    db = f"bfroles_{secrets.token_hex(3)}"
    people = {"alice": f"alice{tag}", "bob": f"bob{tag}", "carol": f"carol{tag}"}
    tmp = tmp_path_factory.mktemp("roles")
    env = dict(os.environ, BENCHFLEET_DB_USER_PREFIX=tag, BENCHFLEET_DB_NAME=db, BENCHFLEET_SECRETS=str(tmp / "secrets"),
               BENCHFLEET_VAR=str(tmp / "var"), BENCHFLEET_CONFIG=str(tmp / "settings.env"),
               BENCHFLEET_TARGET_SECRETS=str(tmp / "target"), BENCHFLEET_DB_CLIENT_HOSTS="",
               BENCHFLEET_DB_SUBMITTERS=f"{people['alice']},{people['bob']}", BENCHFLEET_DB_OPERATORS=people["carol"])
    accounts = [tag, f"{tag}_collector", f"{tag}_grafana", f"{tag}_operator", *people.values()]
    roles = [f"{tag}_{r}" for r in ("submitters", "collectors", "readers", "operators", "procedures")]
    try:
        runs_ = [ensure_services(env) for _ in range(2)]
        assert [r.returncode for r in runs_] == [0, 0], [r.stderr for r in runs_]
        yield tag, db, people, tmp, env
    finally:
        drop = [f"DROP DATABASE IF EXISTS `{db}`;"]
        drop += [f"DROP USER IF EXISTS '{a}'@'{h}';" for a in accounts for h in HOSTS]
        drop += [f"DROP ROLE IF EXISTS {r};" for r in roles]
        root_sql("\n".join(drop))


def ensure_services(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "deploy" / "ensure-services"), "mariadb"], env=env, capture_output=True,
                          text=True, timeout=300)


def account(deployed, settings: Settings, who: str) -> Settings:
    """Settings for ``who``: a role's account (collector, grafana, operator, or "" for the local
    submitter) or a person (alice, bob, carol), with the password ensure-services generated."""
    tag, db, people, tmp, _ = deployed
    if who in people:
        user, pwfile = people[who], f"db_password_{people[who]}"
    else:
        user, pwfile = (f"{tag}_{who}" if who else tag), (f"db_{who}_password" if who else "db_password")
    password = (tmp / "secrets" / pwfile).read_text().strip()
    return replace(settings, db_user=user, db_password=password, db_name=db, db_host="127.0.0.1")


def denied(fn) -> int:
    """Run ``fn`` (a statement this user may not run); the MySQL error that refused it."""
    with pytest.raises(StoreError) as e:
        fn()
    assert e.value.errno in DENIED, e.value
    return e.value.errno


def doc_roles() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """docs/security.md's roles table: role -> (privileges on the results DB, procedures it may EXECUTE)."""
    text = (ROOT / "docs" / "security.md").read_text()
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(rf"`{DOC_PREFIX}_\w+`", cells[0]):
            privileges = frozenset(p.strip() for p in cells[2].split(","))
            procs = frozenset() if cells[3] == "none" else frozenset(re.findall(r"`(\w+)`", cells[3]))
            out[cells[0].strip("`")] = (privileges, procs)
    return out


def server_grants(role: str, db: str) -> tuple[frozenset[str], frozenset[str]]:
    """SHOW GRANTS FOR ``role``: (privileges on ``db``, procedures of ``db`` it may EXECUTE); fails on any
    grant elsewhere but the USAGE every role has."""
    privileges: set[str] = set()
    procs: set[str] = set()
    granted_db = re.escape(db.replace("_", "\\_"))  # a database grant's name escapes its wildcards
    for line in root_sql(f"SHOW GRANTS FOR {role}").splitlines():
        if m := re.fullmatch(rf"GRANT (.+) ON `{granted_db}`\.\* TO `{role}`", line):
            privileges |= {p.strip() for p in m.group(1).split(",")}
        elif m := re.fullmatch(rf"GRANT EXECUTE ON PROCEDURE `{db}`\.`(\w+)` TO `{role}`", line):
            procs.add(m.group(1))
        else:
            assert line == f"GRANT USAGE ON *.* TO `{role}`", line
    return frozenset(privileges), frozenset(procs)


def test_each_role_holds_the_grants_the_security_page_lists(deployed, settings):
    """The roles' SHOW GRANTS are the table of docs/security.md, role for role; each account holds
    its role as its default; running ensure-services again kept every password."""
    tag, db, people, tmp, _ = deployed
    listed = doc_roles()
    assert len(listed) == 5, listed
    made = {r for r in root_sql(f"SELECT User FROM mysql.user WHERE is_role = 'Y' AND User LIKE '{tag}\\_%'").split()}
    assert made == {r.replace(DOC_PREFIX, tag, 1) for r in listed}
    for role, (privileges, procs) in listed.items():
        assert server_grants(role.replace(DOC_PREFIX, tag, 1), db) == (privileges, procs), role
    holders = {tag: "submitters", f"{tag}_collector": "collectors", f"{tag}_grafana": "readers",
               f"{tag}_operator": "operators", people["alice"]: "submitters", people["carol"]: "operators"}
    for user, role in holders.items():
        grants = root_sql(f"SHOW GRANTS FOR '{user}'@'localhost'")
        assert f"GRANT `{tag}_{role}` TO `{user}`@`localhost`" in grants, grants
        assert f"SET DEFAULT ROLE `{tag}_{role}` FOR `{user}`@`localhost`" in grants, grants
        # Nothing of the results DB but through the role.
        assert f"`{db}`" not in grants, grants
    # Run again with the same secrets, ensure-services set the same passwords: the accounts still log in.
    with Store(account(deployed, settings, "")).open(migrate=False) as s:
        assert s.db.rows("SELECT CURRENT_ROLE()") == [(f"{tag}_submitters",)]


def test_a_submitter_submits_and_reads_but_neither_writes_results_nor_cancels_another_submitters_campaign(
        deployed, settings):
    """Alice and Bob submit through the procedures, and each campaign records its submitter; Alice
    reads Bob's results but may not change a result, a run or a campaign by SQL, nor cancel or
    withdraw Bob's campaign (`scheduler cancel` exits 3 naming Bob); she cancels her own. The operator
    cancels Bob's, and a campaign with no recorded submitter is the operator's alone."""
    collector = Store(account(deployed, settings, "collector")).open()  # the collector's start makes the schema
    alice = Store(account(deployed, settings, "alice")).open()
    bob = Store(account(deployed, settings, "bob")).open()
    carol = Store(account(deployed, settings, "carol")).open()
    tag, db, people, tmp, _ = deployed
    try:
        broker = StubBroker()
        key = default_key(spec_hash(SPEC))
        for store, cid in ((alice, "roles-alice"), (bob, "roles-bob")):
            with broker.bus("scheduler") as bus:
                assert submit(StoreLedger(store), bus, SPEC, cid, runs(cid), key=f"{key}-{cid}", explicit_key=True,
                              force=False) == Submitted(cid, 8, "default")
        assert alice.db.rows("SELECT campaign_id, submitter FROM campaigns ORDER BY campaign_id") == [
            ("roles-alice", people["alice"]), ("roles-bob", people["bob"])]
        # A publish that fails takes the submitter's own campaign back out, through bf_withdraw_campaign.
        broker.lose_connections(after_publishes=3)
        with pytest.raises(BusError), broker.bus("scheduler") as bus:
            submit(StoreLedger(alice), bus, SPEC, "roles-lost", runs("roles-lost"), key=f"{key}-lost",
                   explicit_key=True, force=False)
        assert alice.campaigns.get("roles-lost") is None

        # Only the collector writes results; Alice reads them, Bob's included.
        bob_run = runs("roles-bob")[0]
        collector.results.store(result(bob_run, "ok"))
        assert alice.db.rows("SELECT status FROM results WHERE run_id=%s", (bob_run.run_id,)) == [("ok",)]
        denied(lambda: alice.db.execute("UPDATE results SET tps = 1 WHERE run_id=%s", (bob_run.run_id,)))
        denied(lambda: alice.db.execute("UPDATE runs SET state='cancelled' WHERE campaign_id='roles-bob'"))
        denied(lambda: alice.db.execute("UPDATE campaigns SET submitter=%s WHERE campaign_id='roles-bob'",
                                        (people["alice"],)))
        denied(lambda: alice.db.execute("DELETE FROM results"))
        denied(lambda: alice.db.execute(
            "INSERT INTO campaigns (campaign_id, name, spec_json, spec_hash, pool, baseline, total_runs, created_at,"
            " submitter) VALUES ('forged', 'x', '{}', '', 'default', 'A', 0, 0, %s)", (people["bob"],)))
        denied(lambda: alice.results.store(result(runs("roles-alice")[0], "ok")))

        # Bob's campaign is not Alice's to cancel or withdraw, by the store or the CLI.
        with pytest.raises(NotYourCampaign, match=f"roles-bob was submitted by {people['bob']}: only its submitter"):
            alice.campaigns.cancel("roles-bob", 1.0)
        with pytest.raises(StoreError, match=f"submitted by {people['bob']}"):
            alice.campaigns.delete("roles-bob")
        env = dict(os.environ, BENCHFLEET_DB_USER=people["alice"], BENCHFLEET_DB_NAME=db,
                   BENCHFLEET_DB_HOST="127.0.0.1", BENCHFLEET_DB_PASSWORD_FILE=str(
                       tmp / "secrets" / f"db_password_{people['alice']}"))
        env.pop("BENCHFLEET_DB_PASSWORD", None)
        cli = subprocess.run([str(Path(sys.executable).parent / "scheduler"), "cancel", "roles-bob"], env=env,
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert cli.returncode == 3, cli.stdout + cli.stderr
        assert f"error: campaign roles-bob was submitted by {people['bob']}" in cli.stderr
        assert bob.runs.counts("roles-bob")["pending"] == 7
        assert bob.campaigns.get("roles-bob").state == "running"  # one result stored, nothing cancelled

        # Her own she cancels; the operator cancels Bob's.
        assert alice.campaigns.cancel("roles-alice", 2.0) == 8
        assert carol.campaigns.cancel("roles-bob", 3.0) == 7
        assert [alice.campaigns.get(c).state for c in ("roles-alice", "roles-bob")] == ["cancelled", "cancelled"]

        # A campaign recorded before submitters were recorded is the operator's.
        with StubBroker().bus("scheduler") as bus:
            submit(StoreLedger(alice), bus, SPEC, "roles-old", runs("roles-old"), key=f"{key}-old", explicit_key=True,
                   force=False)
        carol.db.execute("UPDATE campaigns SET submitter=NULL WHERE campaign_id='roles-old'")
        with pytest.raises(NotYourCampaign, match="roles-old has no recorded submitter"):
            alice.campaigns.cancel("roles-old", 4.0)
        assert carol.campaigns.cancel("roles-old", 5.0) == 8
    finally:
        for s in (collector, alice, bob, carol):
            s.close()


def test_a_submitter_records_the_gate_verdict_of_its_own_campaign_and_the_collector_its_change_points(
        deployed, settings):
    """Alice records the gate's verdict on her campaign through bf_record_gate_verdict (the row names
    her), but not on Bob's, on none that does not exist, nor a verdict the board does not know, and
    never by SQL; the collector keeps a change point (found again, its size updated, its finding time
    kept), which a submitter may not write."""
    collector = Store(account(deployed, settings, "collector")).open()
    alice = Store(account(deployed, settings, "alice")).open()
    bob = Store(account(deployed, settings, "bob")).open()
    _, _, people, _, _ = deployed
    try:
        key = default_key(spec_hash(SPEC))
        for store, cid in ((alice, "verdict-alice"), (bob, "verdict-bob")):
            with StubBroker().bus("scheduler") as bus:
                submit(StoreLedger(store), bus, SPEC, cid, runs(cid), key=f"{key}-{cid}", explicit_key=True,
                       force=False)
        alice.judgements.record_gate(GateRecord("verdict-alice", "verdict-bob", "failed", 0.05, 2, 10.0, "forged"))
        assert alice.judgements.gate_verdicts("verdict-alice") == [
            GateRecord("verdict-alice", "verdict-bob", "failed", 0.05, 2, 10.0, people["alice"])]
        with pytest.raises(StoreError, match=f"submitted by {people['bob']}: only its submitter or an operator may "
                                             "record a gate verdict for it"):
            alice.judgements.record_gate(GateRecord("verdict-bob", None, "passed", 0.05, 0, 11.0))
        with pytest.raises(StoreError, match="is not in the results DB"):
            alice.judgements.record_gate(GateRecord("verdict-nope", None, "passed", 0.05, 0, 11.0))
        with pytest.raises(StoreError, match="verdict must be passed, failed or unjudged"):
            alice.judgements.record_gate(GateRecord("verdict-alice", None, "maybe", 0.05, 0, 11.0))  # type: ignore[arg-type]
        denied(lambda: alice.db.execute("INSERT INTO gate_verdicts (campaign_id, verdict, beyond, slower_cells,"
                                        " judged_at, judged_by) VALUES ('verdict-bob', 'failed', 0.05, 1, 1, 'x')"))
        warned: list[str] = []
        bob.judgements.keep_gate(GateRecord("verdict-alice", None, "passed", 0.05, 0, 12.0), warned.append)
        assert len(warned) == 1 and "verdict on verdict-alice stands but was not recorded" in warned[0], warned
        assert len(bob.judgements.gate_verdicts("verdict-alice")) == 1

        first = StoredChangePoint("roles", "verdict-bob", "A", "oltp_point_select", 4, "qps", 0.8, 0.001, 0.01,
                                  "worse", "verdict-bob", 20.0)
        collector.judgements.record_change_points([first])
        collector.judgements.record_change_points([replace(first, ratio=0.75, q_value=0.002, found_at=30.0)])
        assert alice.judgements.change_points("roles") == [replace(first, ratio=0.75, q_value=0.002)]
        denied(lambda: alice.judgements.record_change_points([replace(first, campaign_id="verdict-alice")]))
    finally:
        for s in (collector, alice, bob):
            s.close()


def test_grafana_only_reads_and_the_collector_cannot_cancel(deployed, settings):
    """Grafana's account reads every table and view, and may neither write nor call a procedure; the
    collector, which writes results, cannot run a submitter's procedures either."""
    collector = Store(account(deployed, settings, "collector")).open()
    grafana = Store(account(deployed, settings, "grafana")).open()
    try:
        assert grafana.db.rows("SELECT COUNT(*) FROM campaigns_v")[0][0] >= 0
        assert grafana.db.rows("SELECT COUNT(*) FROM results")[0][0] >= 0
        denied(lambda: grafana.db.execute("UPDATE campaigns SET state='cancelled'"))
        denied(lambda: grafana.db.execute("INSERT INTO worker_endpoints VALUES ('w', 'p', 'a', 'up', 0)"))
        denied(lambda: grafana.db.execute("CALL bf_cancel_campaign('roles-bob', 0, @n)"))
        denied(lambda: collector.db.execute("CALL bf_cancel_campaign('roles-bob', 0, @n)"))
        denied(lambda: collector.db.execute("DELETE FROM results"))
        denied(lambda: collector.db.execute("DROP TABLE results"))
    finally:
        collector.close()
        grafana.close()


def test_a_view_of_an_earlier_version_reads_again_after_ensure_services(deployed, settings):
    """A view made before roles read with its maker's rights, which now come from a role MariaDB does
    not take on for a definer: Grafana cannot read it until ensure-services drops it and the
    collector's next start makes it again, reading with the reader's rights. A DEFINER view the
    collector made with SQL in its name is not replayed as root."""
    tag, db, people, tmp, env = deployed
    Store(account(deployed, settings, "collector")).open().close()
    definition = root_sql(f"SELECT VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_SCHEMA = '{db}'"
                          " AND TABLE_NAME = 'runs_v'").strip()
    root_sql(f"USE `{db}`; ALTER DEFINER = '{tag}_collector'@'localhost' SQL SECURITY DEFINER VIEW runs_v AS {definition};")
    hostile = f"v` AS SELECT 1;GRANT ALL ON *.* TO {tag}_collectors;#"
    collector = Store(account(deployed, settings, "collector")).open(migrate=False)
    collector.db.execute(f"CREATE SQL SECURITY DEFINER VIEW `{hostile.replace('`', '``')}` AS SELECT 1 AS one")
    collector.db.execute("CREATE SQL SECURITY DEFINER VIEW v AS SELECT 1 AS one")
    collector.close()
    grafana = Store(account(deployed, settings, "grafana")).open(migrate=False)
    try:
        with pytest.raises(StoreError) as e:
            grafana.db.rows("SELECT COUNT(*) FROM runs_v")
        assert e.value.errno == 1356, e.value
        assert ensure_services(env).returncode == 0
        assert "GRANT ALL PRIVILEGES ON *.*" not in root_sql(f"SHOW GRANTS FOR {tag}_collectors")
        Store(account(deployed, settings, "collector")).open().close()
        assert grafana.db.rows("SELECT COUNT(*) FROM runs_v") == grafana.db.rows("SELECT COUNT(*) FROM runs")
    finally:
        grafana.close()


def test_a_submitter_before_the_collectors_first_start_waits_for_the_schema(deployed, settings, monkeypatch):
    """A submitter may not make the schema: opening a results DB that has none yet, it waits for the
    collector's first start to make it (make demo starts both at once), and without one gives up
    naming who may."""
    tag, db, people, tmp, env = deployed
    root_sql(f"DROP DATABASE `{db}`; CREATE DATABASE `{db}` CHARACTER SET utf8mb4;")
    monkeypatch.setattr(connection, "SCHEMA_WAIT_S", 2)
    with pytest.raises(StoreError, match=f"{db} has no schema yet and {people['alice']} may not change the schema"
                                         r" \(waited 2 s\): start the collector"):
        Store(account(deployed, settings, "alice")).open()
    monkeypatch.setattr(connection, "SCHEMA_WAIT_S", 60)
    collector = threading.Timer(2, lambda: Store(account(deployed, settings, "collector")).open().close())
    collector.start()
    try:
        with Store(account(deployed, settings, "alice")).open() as alice:
            assert alice.db.rows("SELECT COUNT(*) FROM campaigns") == [(0,)]
    finally:
        collector.join()


def test_a_submitter_cannot_add_runs_under_another_campaigns_run_ids(deployed, settings):
    """Run ids are predictable (the campaign id, a dot, the cell): Alice's own campaign takes no run id
    that does not start with its id and a dot, so she cannot squat Bob's next campaign's runs."""
    assert ensure_services(deployed[4]).returncode == 0  # the procedures again (a test before drops the DB)
    Store(account(deployed, settings, "collector")).open().close()
    with Store(account(deployed, settings, "alice")).open() as alice:
        def add(run_id: str) -> Callable[[Any], None]:
            def statements(cur: Any) -> None:
                cur.execute("CALL bf_record_campaign(%s,'x','{}','',%s,'A',1,0,NULL,NULL)", ("squat", "default"))
                cur.execute("CALL bf_add_runs(%s,%s,0)", ("squat", json.dumps([[run_id, 0, "A", "w", 1, 0]])))
            return statements
        for foreign in ("roles-bob2.A.w.t1.r0", "squat2.A.w.t1.r0", "squatA.w.t1.r0"):
            with pytest.raises(StoreError, match="1644 .*does not start with its campaign id and a dot") as e:
                alice.db.transaction("add runs", add(foreign))
            assert e.value.errno == 1644
        assert alice.db.rows("SELECT COUNT(*) FROM campaigns WHERE campaign_id = 'squat'") == [(0,)]
        alice.db.transaction("add runs", add("squat.A.w.t1.r0"))
        assert alice.db.rows("SELECT run_id FROM runs WHERE campaign_id = 'squat'") == [("squat.A.w.t1.r0",)]


def test_a_store_never_replaces_the_procedures_and_names_ensure_services_when_they_are_older(deployed, settings):
    """Procedures of an earlier version: an operator's store (which may create routines) refuses to open
    naming deploy/ensure-services, and leaves them and their definer alone (had it replaced them, it
    would be their definer and every submitter's CALL would fail); ensure-services replaces them."""
    tag, db, people, tmp, env = deployed
    assert ensure_services(env).returncode == 0
    where = f"information_schema.ROUTINES WHERE ROUTINE_SCHEMA = '{db}' AND ROUTINE_NAME = 'bf_cancel_campaign'"
    root_sql(f"USE `{db}`; ALTER PROCEDURE bf_cancel_campaign COMMENT 'benchfleet procedures 1';")
    with pytest.raises(StoreError, match=r"bf_cancel_campaign are not .*found: benchfleet procedures 1\): run "
                                         r"deploy/ensure-services mariadb"):
        Store(account(deployed, settings, "carol")).open()
    assert root_sql(f"SELECT DEFINER, ROUTINE_COMMENT FROM {where}").split("\t") == [
        f"{tag}_procedures", "benchfleet procedures 1\n"]
    assert ensure_services(env).returncode == 0
    with Store(account(deployed, settings, "carol")).open() as carol:
        assert carol.db.rows("SELECT 1") == [(1,)]
    assert root_sql(f"SELECT DEFINER, ROUTINE_COMMENT FROM {where}").split("\t") == [
        f"{tag}_procedures", f"{procedures.VERSION}\n"]


def test_ensure_services_refuses_the_servers_own_accounts_as_people(deployed):
    """root, mysql, mariadb.sys, or an account of the server the fleet did not set up (a DBA's): as a
    submitter or operator its password would be reset; ensure-services refuses it, naming it, and
    changes nothing. A person it set up before is set up again."""
    tag, db, people, tmp, env = deployed
    dba = f"dba{tag}"
    root_sql(f"CREATE USER '{dba}'@'localhost' IDENTIFIED BY 'unchanged-{tag}';")
    try:
        before = root_sql(f"SELECT authentication_string FROM mysql.user WHERE User = '{dba}'")
        for var, name, why in (("BENCHFLEET_DB_SUBMITTERS", "root", "a name of the server's own"),
                               ("BENCHFLEET_DB_OPERATORS", "mysql", "a name of the server's own"),
                               ("BENCHFLEET_DB_SUBMITTERS", "mariadb.sys", "is not an account name"),
                               ("BENCHFLEET_DB_OPERATORS", dba, "not one of the fleet's")):
            r = ensure_services(dict(env, **{var: f"{people['alice']},{name}"}))
            assert r.returncode != 0 and f"{var}: {name} " in r.stderr and why in r.stderr, (name, r.stderr)
        assert root_sql(f"SELECT authentication_string FROM mysql.user WHERE User = '{dba}'") == before
        assert f"{tag}_" not in root_sql(f"SHOW GRANTS FOR '{dba}'@'localhost'")
        assert ensure_services(env).returncode == 0
    finally:
        root_sql(f"DROP USER IF EXISTS '{dba}'@'localhost';")
