"""Settings: flags over environment over defaults, and no secret in what gets logged."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from services.common import logs
from services.common.config import add_settings_flags, redact_url, settings_from


def test_flag_beats_environment_beats_default(tmp_path):
    """One place decides each setting, in the documented order."""
    p = argparse.ArgumentParser()
    add_settings_flags(p)
    env = {"BENCHFLEET_DB_HOST": "db.env", "BENCHFLEET_DB_PORT": "3307", "BENCHFLEET_DB_NAME": "bf"}
    s = settings_from(p.parse_args(["--db-host", "db.flag"]), env)
    assert (s.db_host, s.db_port, s.db_name, s.db_user) == ("db.flag", 3307, "bf", "root")


def test_password_from_file(tmp_path):
    """The results-DB password can come from a file, never from a flag."""
    f = tmp_path / "pw"
    f.write_text("s3cret\n")
    s = settings_from(None, {"BENCHFLEET_DB_PASSWORD_FILE": str(f)})
    assert s.db_password == "s3cret"


def test_amqp_password_redacted():
    """URLs are shown with the password replaced."""
    assert redact_url("amqp://bench:s3cret@mq:5672/%2F") == "amqp://bench:***@mq:5672/%2F"


def test_logs_never_show_passwords():
    """Secret-looking keys and passwords inside URLs are scrubbed from every log line."""
    out = io.StringIO()
    logs.configure("test", stream=out)
    logs.get().info("connecting", url="amqp://bench:s3cret@mq/", db_password="s3cret", campaign_id="c1")
    line = json.loads(out.getvalue())
    assert "s3cret" not in out.getvalue()
    assert line["campaign_id"] == "c1" and line["service"] == "test"


def test_results_db_name_must_be_an_identifier():
    """A results-DB name that is not a plain identifier is refused before any SQL is built with it."""
    import pytest

    from services.common.config import Settings
    from services.common.errors import StoreError
    from services.common.store import Store

    with pytest.raises(StoreError, match="db_name"):
        Store(Settings(db_name="bench`; DROP DATABASE x; --")).open()


def test_bad_settings_exit_2_naming_the_variable(monkeypatch, capsys):
    """A setting no service can use stops the CLI with exit 2 and names the variable, no traceback."""
    from services.scheduler import cli

    monkeypatch.setenv("BENCHFLEET_DB_PORT", "abc")
    assert cli.main(["status"]) == 2
    assert "BENCHFLEET_DB_PORT: 'abc' is not a whole number" in capsys.readouterr().err
    monkeypatch.delenv("BENCHFLEET_DB_PORT")
    monkeypatch.setenv("BENCHFLEET_RUN_ATTEMPTS", "9")
    assert cli.main(["status"]) == 2
    assert "BENCHFLEET_RUN_ATTEMPTS: must be 1 to 5" in capsys.readouterr().err


def test_validate_and_plan_need_no_secrets(monkeypatch, capsys, tmp_path):
    """A user who cannot read the fleet's password files can still validate and plan a spec;
    a command that connects (status) still says which file it could not read."""
    from services.scheduler import cli

    locked = tmp_path / "secrets"
    monkeypatch.setenv("BENCHFLEET_DB_PASSWORD_FILE", str(locked / "db_password"))
    monkeypatch.setenv("BENCHFLEET_AMQP_PASSWORD_FILE", str(locked / "amqp_password_scheduler"))
    spec = "examples/quickstart.yaml"
    assert cli.main(["validate", spec]) == 0, capsys.readouterr().err
    assert cli.main(["plan", spec]) == 0, capsys.readouterr().err
    assert cli.main(["schema"]) == 0
    capsys.readouterr()
    assert cli.main(["status"]) == 2
    assert "BENCHFLEET_DB_PASSWORD_FILE: cannot read" in capsys.readouterr().err


def test_settings_file_fills_what_the_environment_leaves_unset(tmp_path):
    """The settings file ensure-services writes gives the CLIs the fleet's users; the environment wins."""
    from services.common.config import load_settings_file

    f = tmp_path / "settings.env"
    f.write_text("# written by deploy/ensure-services\nBENCHFLEET_DB_USER=benchfleet\n"
                 "BENCHFLEET_DB_NAME=fromfile\nBENCHFLEET_AMQP_URL=amqp://benchfleet-scheduler@127.0.0.1:5672/benchfleet\n")
    env = {"BENCHFLEET_CONFIG": str(f), "BENCHFLEET_DB_NAME": "fromenv"}
    assert load_settings_file(env) == f
    s = settings_from(None, env)
    assert (s.db_user, s.db_name) == ("benchfleet", "fromenv")
    assert s.amqp_url.startswith("amqp://benchfleet-scheduler@")


def test_settings_file_never_pairs_a_user_with_another_users_password(tmp_path):
    """A broker URL set in the environment drops the file's password file (it belongs to the file's user)."""
    from services.common.config import file_settings

    values = {"BENCHFLEET_AMQP_URL": "amqp://benchfleet-scheduler@h/v", "BENCHFLEET_AMQP_PASSWORD_FILE": "/s/sched",
              "BENCHFLEET_DB_PASSWORD_FILE": "/s/db", "BENCHFLEET_DB_USER": "benchfleet"}
    out = file_settings(values, {"BENCHFLEET_AMQP_URL": "amqp://guest:guest@h/%2F"})
    assert "BENCHFLEET_AMQP_PASSWORD_FILE" not in out and "BENCHFLEET_AMQP_URL" not in out
    assert out["BENCHFLEET_DB_PASSWORD_FILE"] == "/s/db"
    assert "BENCHFLEET_DB_PASSWORD_FILE" not in file_settings(values, {"BENCHFLEET_DB_USER": "root"})


def test_settings_file_gives_each_role_its_broker_user():
    """The worker and the collector connect as their own broker users from the file, the scheduler as its."""
    from services.common.config import file_settings

    values = {"BENCHFLEET_AMQP_URL": "amqp://benchfleet-scheduler@h/v", "BENCHFLEET_AMQP_PASSWORD_FILE": "/s/sched",
              "BENCHFLEET_WORKER_AMQP_URL": "amqp://benchfleet-worker@h/v",
              "BENCHFLEET_WORKER_AMQP_PASSWORD_FILE": "/s/worker"}
    assert file_settings(values, {}, "worker")["BENCHFLEET_AMQP_PASSWORD_FILE"] == "/s/worker"
    assert file_settings(values, {}, "worker")["BENCHFLEET_AMQP_URL"] == "amqp://benchfleet-worker@h/v"
    assert file_settings(values, {}, "")["BENCHFLEET_AMQP_URL"] == "amqp://benchfleet-scheduler@h/v"
    assert file_settings(values, {}, "collector")["BENCHFLEET_AMQP_PASSWORD_FILE"] == "/s/sched"


def test_settings_file_errors_name_file_and_line(tmp_path):
    """A malformed line, or a BENCHFLEET_CONFIG naming no file, is a settings error naming it."""
    import pytest

    from services.common.config import load_settings_file
    from services.common.errors import SettingsError

    f = tmp_path / "settings.env"
    f.write_text("BENCHFLEET_DB_USER=x\nnot a setting\n")
    with pytest.raises(SettingsError, match=r"settings.env:2: "):
        load_settings_file({"BENCHFLEET_CONFIG": str(f)})
    with pytest.raises(SettingsError, match="BENCHFLEET_CONFIG: no settings file"):
        load_settings_file({"BENCHFLEET_CONFIG": str(tmp_path / "missing")})
    assert load_settings_file({"BENCHFLEET_CONFIG": ""}) is None


def test_cli_reads_the_settings_file(tmp_path):
    """A fresh shell with only the settings file: `scheduler validate` takes the results DB name from it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    f = tmp_path / "settings.env"
    f.write_text("BENCHFLEET_DB_NAME=sbtest_quick_a\nBENCHFLEET_TARGET_SECRETS=/nowhere\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHFLEET_")}
    env.update(BENCHFLEET_CONFIG=str(f), PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, "-m", "services.scheduler.cli", "validate", "examples/quickstart.yaml"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=60)
    # The file's DB name is the first target's database: refused, which only the file could have said.
    assert r.returncode == 2 and "sbtest_quick_a is the results DB's database" in r.stderr


def test_a_command_without_secrets_reads_the_db_password_only_when_it_needs_the_db(tmp_path):
    """validate checks builds against the results DB with the password when it may read it, and
    names the file when it may not (the caller turns that into a note, not a refusal)."""
    from services.common.config import with_db_password
    from services.common.errors import SettingsError

    pw = tmp_path / "db_password"
    pw.write_text("s3cret\n")
    s = settings_from(env={"BENCHFLEET_DB_PASSWORD_FILE": str(pw)}, secrets=False)
    assert s.db_password == ""
    assert with_db_password(s, {"BENCHFLEET_DB_PASSWORD_FILE": str(pw)}).db_password == "s3cret"
    with pytest.raises(SettingsError, match="BENCHFLEET_DB_PASSWORD_FILE: cannot read"):
        with_db_password(s, {"BENCHFLEET_DB_PASSWORD_FILE": str(tmp_path / "missing")})
