"""Pure pieces of the reliability work: run verdicts, control messages, TLS and secret settings."""

from __future__ import annotations

import pytest

from services.common.bus.broker import Names
from services.common.bus.control import CONTROL_LOG_ARGS
from services.common.bus.rabbitmq import connection_parameters
from services.common.config import Settings, settings_from
from services.common.errors import SettingsError
from services.common.bus.control import SYNC_HEADER, ControlMessage, decode_control, read_log_entry
from services.common.messages.runs import Cell
from services.common.errors import DecodeError
from services.common.messages.results import RunResult
from services.worker.verdict import judge


def _result(**kw) -> RunResult:
    base = dict(run_id="r", campaign_id="c", cell=Cell(target="A", workload="w", threads=1), repetition=1,
                status="ok", worker="w", host="h", started_at=0, ended_at=1, measured_s=1)
    return RunResult(**{**base, **kw})


def test_lost_connections_fail_the_run_with_the_mysql_error():
    """A run whose connections were lost while measuring is failed with code and message."""
    r = judge(_result(errors_by_code={"2013": 3, "1213": 1}))
    assert r.status == "failed" and r.error_code == 2013
    assert r.error.startswith("MySQL error 2013: Lost connection to MySQL server during query (3 connection(s)")


def test_lost_connections_the_run_ignores_were_reconnected_and_the_run_counts():
    """With 2013 in the run's ignore list (sysbench reconnects on it), lost connections leave the run ok;
    a lost-connection code outside the list still fails it."""
    assert judge(_result(errors_by_code={"2013": 3}), (1213, 2013)).status == "ok"
    assert judge(_result(errors_by_code={"2013": 3}), "all").status == "ok"
    r = judge(_result(errors_by_code={"2013": 1, "2006": 2}), (2013,))
    assert r.status == "failed" and r.error_code == 2006


def test_lost_connection_codes_are_those_sysbench_reconnects_on():
    """The verdict's lost-connection codes are exactly the ones the drivers reconnect on when ignored."""
    from services.common.spec.ignore_errors import RECONNECT_ON
    from services.worker.verdict import LOST_CONNECTION

    assert set(LOST_CONNECTION) == RECONNECT_ON


def test_ordinary_errors_and_failed_runs_are_left_alone():
    """Deadlocks do not fail a run, and an already failed run keeps its own error."""
    assert judge(_result(errors_by_code={"1213": 5})).status == "ok"
    failed = _result(status="failed", error="x", errors_by_code={"2013": 1})
    assert judge(failed) is failed


def test_control_message_round_trip_and_bad_input():
    """Control messages decode back; garbage names the field."""
    m = ControlMessage(action="cancel", campaign_id="c1")
    assert decode_control(m.encode()) == m
    with pytest.raises(DecodeError, match="schema"):
        decode_control(b'{"schema": "benchfleet.control/2"}')
    with pytest.raises(DecodeError, match="not JSON"):
        decode_control(b"\xff")


def test_control_log_entries_are_told_apart():
    """Replaying the control log: the reader's own marker ends it, other readers' markers are
    skipped, control messages decode, garbage names the field."""
    m = ControlMessage(action="cancel", campaign_id="c1")
    ex = {"control_exchange": "bf.control", "sync_exchange": "bf.control.sync"}
    assert read_log_entry("bf.control", {"x-stream-offset": 3}, m.encode(), "w1-ab", **ex) == ("control", m)
    assert read_log_entry("bf.control.sync", {SYNC_HEADER: "w1-ab"}, b"", "w1-ab", **ex) == ("end", None)
    assert read_log_entry("bf.control.sync", {SYNC_HEADER: b"w1-ab"}, b"", "w1-ab", **ex) == ("end", None)
    assert read_log_entry("bf.control.sync", {SYNC_HEADER: "w2-cd"}, b"", "w1-ab", **ex) == ("marker", None)
    with pytest.raises(DecodeError, match="not JSON"):
        read_log_entry("bf.control", {}, b"garbage", "w1-ab", **ex)


def test_control_log_entries_count_only_through_their_own_exchange():
    """A cancel appended through the sync exchange (which every worker may write) is not obeyed,
    nor one through any other exchange; a marker through the control exchange is no marker."""
    m = ControlMessage(action="cancel", campaign_id="c1")
    ex = {"control_exchange": "bf.control", "sync_exchange": "bf.control.sync"}
    with pytest.raises(DecodeError, match="not a sync marker"):
        read_log_entry("bf.control.sync", {}, m.encode(), "w1-ab", **ex)
    with pytest.raises(DecodeError, match="not the control exchange"):
        read_log_entry("bf.dead", {}, m.encode(), "w1-ab", **ex)
    with pytest.raises(DecodeError, match="sync marker through bf.control"):
        read_log_entry("bf.control", {SYNC_HEADER: "w1-ab"}, b"", "w1-ab", **ex)


def test_control_log_is_a_retained_stream_under_the_namespace():
    """The log is a stream with an age limit small segments can honour; its names stay in the
    namespace (tests delete them with the namespace's other queues)."""
    assert CONTROL_LOG_ARGS["x-queue-type"] == "stream" and CONTROL_LOG_ARGS["x-max-age"] == "30D"
    assert int(CONTROL_LOG_ARGS["x-stream-max-segment-size-bytes"]) <= 10_000_000
    n = Names("bftest-1")
    assert (n.control, n.control_log, n.control_sync) == ("bftest-1.control", "bftest-1.control.log", "bftest-1.control.sync")


def test_tls_settings_are_passed_through():
    """AMQP TLS options reach pika; DB TLS options reach mysql.connector's parameters."""
    s = Settings(amqp_url="amqps://u:p@broker:5671/v", db_tls_ca="/ca.pem", db_tls_cert="/c.pem", db_tls_key="/k.pem")
    assert connection_parameters(s).ssl_options is not None
    assert connection_parameters(Settings()).ssl_options is None
    p = s.db_params()
    assert p["ssl_ca"] == "/ca.pem" and p["ssl_verify_cert"] and p["ssl_cert"] == "/c.pem" and p["ssl_key"] == "/k.pem"


def test_amqp_password_from_a_file(tmp_path):
    """The broker password comes from a file into the URL, percent-encoded, and stays redacted."""
    f = tmp_path / "pw"
    f.write_text("p@ss/word\n")
    s = settings_from(None, {"BENCHFLEET_AMQP_URL": "amqp://bf@h:5672/benchfleet", "BENCHFLEET_AMQP_PASSWORD_FILE": str(f)})
    assert s.amqp_url == "amqp://bf:p%40ss%2Fword@h:5672/benchfleet"
    assert "word" not in s.redacted_amqp_url()
    assert connection_parameters(s).credentials.password == "p@ss/word"


def test_metrics_bind_localhost_by_default():
    assert Settings().metrics_addr == "127.0.0.1"


def test_results_db_timeouts_are_settings_with_defaults():
    """The results DB's connect, read and write timeouts default to 10, 120 and 120 s, come from
    BENCHFLEET_DB_*_TIMEOUT_S, reach mysql.connector, and 0 means no limit; a negative one is refused
    naming the variable."""
    p = Settings().db_params()
    assert (p["connection_timeout"], p["read_timeout"], p["write_timeout"]) == (10, 120, 120)
    s = settings_from(None, {"BENCHFLEET_DB_CONNECT_TIMEOUT_S": "3", "BENCHFLEET_DB_READ_TIMEOUT_S": "0"})
    p = s.db_params()
    assert p["connection_timeout"] == 3 and "read_timeout" not in p and p["write_timeout"] == 120
    with pytest.raises(SettingsError, match="BENCHFLEET_DB_WRITE_TIMEOUT_S"):
        settings_from(None, {"BENCHFLEET_DB_WRITE_TIMEOUT_S": "-1"})
