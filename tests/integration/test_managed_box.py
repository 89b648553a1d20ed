"""A managed server is boxed on a real mariadbd: a run message naming an abbreviated or unlisted
option starts nothing (and the build itself refuses abbreviations), the server gets none of the
worker's environment, and its client account can neither read nor write a file of the host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import mysql.connector
import pytest

from services.common.spec.targets import ManagedTarget
from services.common.spec.workloads import DataShape
from services.worker.target.dsn import TargetError, connect

pytestmark = pytest.mark.integration

MARIADBD = "/usr/sbin/mariadbd"


def forged(options: dict) -> ManagedTarget:
    """A target as a run message could carry it past the scheduler's checks (unvalidated)."""
    return ManagedTarget.model_construct(kind="managed", name="forged", options=options)


@pytest.mark.parametrize("options, needle", [
    ({"key_buffer": "8M"}, "an abbreviation (of key_buffer_size)"),
    ({"feedback_url": "http:evil.example"}, "call out to a URL"),
    ({"innodb_buffer_pool_size": "1T"}, "more than this worker's memory"),
])
def test_a_forged_target_with_a_refused_option_starts_no_server(servers, options, needle):
    """The worker checks the options again against its list and its host before starting anything."""
    with pytest.raises(TargetError) as info:
        servers.ensure(forged(options), DataShape())
    name = next(iter(options))
    assert info.value.field == f"targets.forged.options.{name}" and needle in info.value.message
    assert servers.current is None


def test_the_system_build_refuses_abbreviations_itself():
    """The switch the worker gives the server makes the server refuse `--key-buffer` as well."""
    argv = [MARIADBD, "--no-defaults", "--skip-getopt-prefix-matching", "--key-buffer=8M", "--help", "--verbose"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "unknown variable 'key-buffer=8M'" in p.stderr, p.stderr[-500:]
    plain = subprocess.run(argv[:2] + argv[3:], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "unknown variable" not in plain.stderr  # without it, the abbreviation would have been taken


def test_the_server_gets_no_secret_and_its_client_reaches_no_file(servers, monkeypatch):
    """A password in the worker's environment is not in the server's; secure_file_priv names the
    server's empty, read-only directory, and tmpdir a folder of its own; the client account has no FILE
    privilege."""
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_ENV", "PW_SECRET_FOR_TEST")
    monkeypatch.setenv("PW_SECRET_FOR_TEST", "s3cret-never-in-a-server")
    server = servers.ensure(ManagedTarget(kind="managed", name="boxed", options={"key_buffer_size": "8M"}),
                            DataShape())
    environ = Path(f"/proc/{server.pid}/environ").read_bytes()
    assert b"s3cret-never-in-a-server" not in environ and b"BENCHFLEET_" not in environ
    assert b"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in environ.split(b"\0")
    assert "--skip-getopt-prefix-matching" in Path(f"/proc/{server.pid}/cmdline").read_bytes().decode().split("\0")
    conn = connect(server.connect_params(), database=False)
    try:
        cur = conn.cursor()
        cur.execute("SELECT @@secure_file_priv, LOAD_FILE('/etc/passwd'), @@tmpdir")
        priv, passwd, tmpdir = cur.fetchone()
        assert priv.rstrip("/") == str(server.files_dir) and passwd is None
        # Its temporary tables in a folder of its own, not among the host's (and other servers') in /tmp.
        assert tmpdir == str(server.tmp_dir) and server.tmp_dir.parent == server.datadir.parent
        cur.execute("SHOW GRANTS")
        grants = " ".join(str(row[0]) for row in cur.fetchall())
        assert "ALL PRIVILEGES" not in grants and " FILE" not in grants and "SELECT" in grants, grants
        with pytest.raises(mysql.connector.Error) as refused:
            cur.execute(f"SELECT 1 INTO OUTFILE '{server.files_dir}/x'")
        assert refused.value.errno == 1227 and "FILE" in str(refused.value), refused.value  # no FILE privilege
    finally:
        conn.close()
    assert not os.listdir(server.files_dir)
