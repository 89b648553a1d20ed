"""A retried or redelivered run on a freshly started managed server: the quiesce before
prepare finds no database yet, which means nothing of an earlier run can be running there, so
the run goes on to prepare instead of failing every attempt with error 1049 (seen in bench/soak
after a broker restart: a run measured ok on one worker, redelivered to the other, failed there
three times)."""

from __future__ import annotations

import mysql.connector
import pytest

from services.common.errors import DbError
from services.common.spec.targets import Quiesce
from services.worker.target import quiesce
from services.worker.target.connect_params import ConnectParams


def refusing(errno: int, msg: str):
    def connect(params):
        raise mysql.connector.Error(msg=msg, errno=errno)
    return connect


def quiescer() -> quiesce.Quiescer:
    return quiesce.Quiescer(ConnectParams(unix_socket="/tmp/none.sock", database="sbtest"), Quiesce(),
                            field="targets.M.quiesce", end_leftovers=True, flush=True)


def test_a_server_without_the_run_database_has_nothing_to_end(monkeypatch):
    """Unknown database at the quiesce before prepare: nothing to wait for, no failure."""
    monkeypatch.setattr(quiesce, "connect", refusing(1049, "Unknown database 'sbtest'"))
    assert quiescer().before_prepare() is None


def test_other_errors_before_prepare_still_fail_the_attempt(monkeypatch):
    """A server that refuses the connection for another reason still fails the attempt, naming it."""
    monkeypatch.setattr(quiesce, "connect", refusing(2002, "Can't connect to local server"))
    with pytest.raises(DbError) as e:
        quiescer().before_prepare()
    assert e.value.errno == 2002 and "quiesce: Can't connect" in e.value.msg
