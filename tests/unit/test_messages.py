"""Messages: round trips, versions, and decode errors that name the field."""

from __future__ import annotations

import json

import pytest

from services.common.messages import DecodeError, RunEvent, RunResult, RunSpec, decode
from services.common.specfile import parse_spec
from services.scheduler import plan

SPEC = parse_spec("name: m\ntargets: [{name: a, database: d, password_env: PW}]\n"
                  "workloads: [oltp_point_select]\nthreads: [2]\nduration: 3s\n")


def a_run() -> RunSpec:
    return plan.run_specs(SPEC, "c1", now=1.0)[0]


def test_run_spec_round_trip():
    """A run spec decodes to an equal message carrying its schema version."""
    body = a_run().encode()
    assert json.loads(body)["schema"] == "benchfleet.run/1"
    assert decode(body) == a_run()


def test_run_spec_never_carries_a_password():
    """Only the name of the password's environment variable travels through the broker."""
    body = json.loads(a_run().encode())
    assert body["target"]["password_env"] == "PW"
    assert "password" not in body["target"]


def test_result_round_trip_and_rates():
    """q/s and tps come from totals over the measured seconds."""
    r = RunResult(run_id="r", campaign_id="c", cell=a_run().cell, repetition=1, status="ok", worker="w", host="h",
                  started_at=0, ended_at=10, measured_s=10, totals={"transactions": 100, "reads": 1400, "other": 200})
    assert decode(r.encode()) == r
    assert r.qps == 160 and r.tps == 10


def test_result_carries_the_quiesce_wait_typed():
    """The settling wait before the warm-up travels as a typed record; results stored before it
    existed decode without one."""
    r = RunResult(run_id="r", campaign_id="c", cell=a_run().cell, repetition=1, status="failed", worker="w", host="h",
                  started_at=0, ended_at=10, error="targets.a.quiesce: the target did not settle",
                  quiesce={"waited_s": 5.02, "settled": False, "polls": 11, "ended_connections": 2,
                           "history_length": 250_000, "unsettled": ["InnoDB history list length 250,000"],
                           "restarted": True})
    back = decode(r.encode())
    assert back == r and back.quiesce.waited_s == 5.02 and back.quiesce.restarted is True
    old = json.loads(r.encode())
    del old["quiesce"]
    assert decode(json.dumps(old)).quiesce is None
    with pytest.raises(DecodeError) as info:
        decode(json.dumps({**old, "quiesce": {"waited_s": "long", "settled": True}}))
    assert info.value.field == "quiesce.waited_s"


@pytest.mark.parametrize(
    "body,field",
    [
        (b"not json", ""),
        (b"[1]", ""),
        (b'{"run_id": "x"}', "schema"),
        (b'{"schema": "benchfleet.run/9"}', "schema"),
        (json.dumps({**json.loads(a_run().encode()), "threads_typo": 1}).encode(), "threads_typo"),
        (json.dumps({**json.loads(a_run().encode()), "seq": "first"}).encode(), "seq"),
    ],
)
def test_decode_errors_name_the_field(body, field):
    """An undecodable body raises DecodeError naming what is wrong, never a bare exception."""
    with pytest.raises(DecodeError) as info:
        decode(body)
    assert info.value.field == field


def test_wrong_message_kind_for_a_queue():
    """A result sent to the runs queue is refused as unexpected there."""
    ev = RunEvent(run_id="r", campaign_id="c", state="running", worker="w", at=1.0)
    with pytest.raises(DecodeError, match="not expected"):
        decode(ev.encode(), expect=(RunSpec,))
