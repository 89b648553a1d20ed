"""What deploy/ensure-services imports into RabbitMQ: everything on a fresh broker, only what differs
on one set up before, nothing on one already as wanted (tests/integration/test_broker_permissions.py
runs it on a real broker)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from services.common.bus.definitions import ALGORITHM, WantedUser, holds_password, password_hash, to_import

MODULE = Path(__file__).resolve().parents[2] / "services" / "common" / "bus" / "definitions.py"
WORKER = WantedUser("bf-worker", "s3cret", (), "^amq\\.gen-.*$", "^bf\\.results\\.x$", "^bf\\.runs\\.[^.]+$")
COLLECTOR = WantedUser("bf-collector", "other", ("monitoring",), "^bf\\.results$", "^bf\\.results$", "^bf\\.results$")


def _salt(n: int) -> bytes:
    return b"\x01\x02\x03\x04"[:n]


def _exported(todo: dict, vhosts: tuple[str, ...] = ("/",)) -> dict:
    """A broker's export after importing ``todo`` into one holding ``vhosts``."""
    return {"users": todo["users"], "vhosts": [{"name": v} for v in vhosts] + todo["vhosts"],
            "permissions": todo["permissions"], "exchanges": []}


def test_the_hash_is_rabbitmqs_salted_sha256():
    salt = b"\x90\x8d\xc6\x0a"
    raw = base64.b64decode(password_hash("test12", salt))
    assert raw[:4] == salt and raw[4:] == hashlib.sha256(salt + b"test12").digest()


def test_a_fresh_broker_gets_the_vhost_every_user_and_every_grant():
    todo = to_import({"users": [], "vhosts": [{"name": "/"}], "permissions": []}, "bf", [WORKER, COLLECTOR], _salt)
    assert todo["vhosts"] == [{"name": "bf"}]
    users = {u["name"]: u for u in todo["users"]}
    assert users.keys() == {"bf-worker", "bf-collector"}
    assert holds_password(users["bf-worker"], "s3cret") and not holds_password(users["bf-worker"], "other")
    assert users["bf-collector"]["tags"] == ["monitoring"] and users["bf-worker"]["tags"] == []
    assert {(p["user"], p["vhost"], p["write"]) for p in todo["permissions"]} == {
        ("bf-worker", "bf", WORKER.write), ("bf-collector", "bf", COLLECTOR.write)}
    # No password in what goes to rabbitmqctl, only its hash.
    assert "s3cret" not in json.dumps(todo)


def test_a_broker_already_as_wanted_gets_nothing():
    todo = to_import({"users": [], "vhosts": [], "permissions": []}, "bf", [WORKER, COLLECTOR])
    assert to_import(_exported(todo), "bf", [WORKER, COLLECTOR]) is None


def test_only_what_differs_is_imported_and_other_tags_stay():
    before = _exported(to_import({"users": [], "vhosts": [], "permissions": []}, "bf", [WORKER, COLLECTOR]))
    before["users"][1]["tags"] = ["management"]  # the collector lost monitoring, has another tag
    before["permissions"][0]["write"] = ".*"  # the worker's grant was widened by hand
    todo = to_import(before, "bf", [WORKER, COLLECTOR])
    assert todo["vhosts"] == []
    assert [(u["name"], u["tags"], u["password_hash"]) for u in todo["users"]] == [
        ("bf-collector", ["management", "monitoring"], before["users"][1]["password_hash"])]
    assert [(p["user"], p["write"]) for p in todo["permissions"]] == [("bf-worker", WORKER.write)]


def test_a_changed_password_file_gives_that_user_a_new_hash():
    before = _exported(to_import({"users": [], "vhosts": [], "permissions": []}, "bf", [WORKER]))
    changed = WantedUser(WORKER.name, "new one", (), WORKER.configure, WORKER.write, WORKER.read)
    todo = to_import(before, "bf", [changed])
    [user] = todo["users"]
    assert holds_password(user, "new one") and todo["permissions"] == []


def test_a_hash_of_another_algorithm_is_replaced():
    before = _exported(to_import({"users": [], "vhosts": [], "permissions": []}, "bf", [WORKER]))
    before["users"][0]["hashing_algorithm"] = "rabbit_password_hashing_sha512"
    assert [u["hashing_algorithm"] for u in to_import(before, "bf", [WORKER])["users"]] == [ALGORITHM]


def test_the_script_reads_passwords_from_files_and_the_export_on_stdin(tmp_path):
    """ensure-services runs the file by itself (no venv, no benchfleet on the path): nothing to
    import prints nothing, and a password is read as its file's first line."""
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    args = [sys.executable, str(MODULE), "import", "--vhost", "bf",
            "--user", WORKER.name, str(pw), "", WORKER.configure, WORKER.write, WORKER.read]
    first = subprocess.run(args, input=json.dumps({"users": [], "vhosts": [], "permissions": []}),
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    todo = json.loads(first.stdout)
    assert holds_password(todo["users"][0], "s3cret")
    again = subprocess.run(args, input=json.dumps(_exported(todo)), capture_output=True, text=True, cwd=tmp_path,
                           check=True)
    assert again.stdout == ""
    bad = subprocess.run(args, input="not json", capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "not JSON" in bad.stderr
    assert repr(WORKER).count("s3cret") == 0


def test_the_script_answers_whether_a_user_or_an_exchange_is_there_by_its_exit_status():
    """ensure-services removes the all-roles user of earlier versions, and widens the workers' grant
    while the old results exchange stands, on these answers; an export it cannot read is an error (2),
    never a "not there"."""
    exported = json.dumps({"users": [{"name": "benchfleet"}], "exchanges": [{"vhost": "v", "name": "ns.results"}]})

    def status(*args: str, export: str = exported) -> int:
        return subprocess.run([sys.executable, str(MODULE), *args], input=export, capture_output=True, text=True).returncode

    assert status("has-user", "benchfleet") == 0 and status("has-user", "benchfleet-worker") == 1
    assert status("has-exchange", "--vhost", "v", "ns.results") == 0
    assert status("has-exchange", "--vhost", "other", "ns.results") == 1
    assert status("has-user", "benchfleet", export="{") == 2
