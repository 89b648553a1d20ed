"""Messages: round trips, versions, and decode errors that name the field."""

from __future__ import annotations

import json

import pytest

from services.common.errors import DecodeError
from services.common.messages.events import RunEvent
from services.common.messages.results import RunResult
from services.common.messages.runs import RunSpec
from services.common.messages.codec import decode
from services.common.spec.loading import parse_spec
from services.scheduler import plan

SPEC = parse_spec("name: m\ntargets: [{name: a, user: bench, database: d, password_env: PW}]\n"
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


def test_poison_bodies_raise_decode_errors_naming_the_problem():
    """Deep nesting (no RecursionError), numbers beyond 64 bits or not finite anywhere (free-form
    fields too), negative counts and runs that disagree with themselves raise DecodeError."""
    from tests.unit.consumer_fixtures import runs
    from tests.unit.poison import result_bodies, run_bodies

    planned = runs()
    # Unknown runs and other cells need the results DB to tell: the store refuses those.
    local = [p for p in result_bodies(planned[0], planned[1]) if p[0] not in ("unknown run id", "wrong cell")]
    for name, body, reason in run_bodies(planned[0]) + local:
        with pytest.raises(DecodeError) as info:
            decode(body)
        assert reason in str(info.value), (name, str(info.value))


def test_a_body_above_the_size_limit_is_refused_unparsed(monkeypatch):
    """A body bigger than MAX_BODY_BYTES is refused before it is parsed."""
    import services.common.messages.codec as messages

    body = a_run().encode()
    monkeypatch.setattr(messages, "MAX_BODY_BYTES", len(body) - 1)
    with pytest.raises(DecodeError, match=f"body of {len(body):,} bytes is above the {len(body) - 1:,}-byte limit"):
        decode(body)


def test_brackets_inside_strings_do_not_count_as_nesting():
    """A string full of brackets (and escaped quotes) nests nothing: such a result decodes."""
    r = RunResult(run_id="r", campaign_id="c", cell=a_run().cell, repetition=1, status="failed", worker="w", host="h",
                  started_at=0, ended_at=1, error='[' * 100 + '\\"{' * 100)
    assert decode(r.encode()) == r


def test_results_refuse_negative_counts_and_non_finite_numbers_when_built():
    """The same bounds hold for a result built in Python (a worker's), not only for decoded ones."""
    from pydantic import ValidationError

    base = dict(run_id="r", campaign_id="c", cell=a_run().cell, repetition=1, status="ok", worker="w", host="h",
                started_at=0, ended_at=10, measured_s=10)
    with pytest.raises(ValidationError, match="totals.reads"):
        RunResult(**base, totals={"reads": -1})
    with pytest.raises(ValidationError, match="totals.reads"):
        RunResult(**base, totals={"reads": 2**63})
    with pytest.raises(ValidationError, match="finite"):
        RunResult(**{**base, "measured_s": float("nan")})


def test_mismatch_names_what_differs_from_the_planned_run():
    """A result is compared with its run's campaign, cell and repetition; the first difference is named."""
    run = a_run()
    r = RunResult(run_id=run.run_id, campaign_id="c1", cell=run.cell, repetition=1, status="ok", worker="w", host="h",
                  started_at=0, ended_at=1)
    assert r.mismatch("c1", run.cell, 1) is None
    assert r.mismatch("c2", run.cell, 1).startswith("campaign_id: 'c1' is not the campaign of run")
    other = run.cell.model_copy(update={"threads": 8})
    assert r.mismatch("c1", other, 1).startswith("cell.threads: 2 is not the threads of run")
    assert r.mismatch("c1", run.cell, 2).startswith("repetition: 1 is not the repetition of run")


def test_run_events_old_and_new_are_both_read():
    """The collector reads a worker's 'running' event of schema /1 (from any worker) and the
    'measuring' event of /2; 'measuring' under /1 is refused naming the state."""
    from services.common.messages.events import RunEvent

    old = b'{"schema":"benchfleet.run-event/1","run_id":"r","campaign_id":"c","state":"running","worker":"w","at":5}'
    assert decode(old) == RunEvent(run_id="r", campaign_id="c", state="running", worker="w", at=5.0)
    new = RunEvent(run_id="r", campaign_id="c", state="measuring", worker="w", attempt=2, at=9.5)
    assert new.encode().startswith(b'{"schema":"benchfleet.run-event/2"') and decode(new.encode()) == new
    with pytest.raises(DecodeError, match="state: state 'measuring' needs schema benchfleet.run-event/2"):
        decode(old.replace(b'"running"', b'"measuring"'))


def test_a_parts_run_event_names_its_part_under_schema_3_and_only_there():
    """A part's events say which part (so each part is bound to its own taker); a whole run's
    events stay /1 and /2, which older collectors read; a part under an older schema is refused."""
    from services.common.messages.events import RunEvent

    part = RunEvent(run_id="r", campaign_id="c", state="measuring", worker="w", at=9.5, part=1)
    assert part.encode().startswith(b'{"schema":"benchfleet.run-event/3"') and decode(part.encode()) == part
    whole = RunEvent(run_id="r", campaign_id="c", state="running", worker="w", at=5.0)
    assert b'"part"' not in whole.encode() and whole.encode().startswith(b'{"schema":"benchfleet.run-event/1"')
    with pytest.raises(DecodeError, match="part: needs schema benchfleet.run-event/3"):
        decode(part.encode().replace(b"run-event/3", b"run-event/2"))


def test_the_reapers_start_allowance_covers_server_start_quiesce_and_prepare():
    """Before a run's warm-up the reaper allows a managed server's start_timeout, the quiesce
    timeout when quiesce is on, and a prepare allowance growing with the campaign's rows."""
    from services.common.store.finality import PREPARE_FLOOR_S, deadline, start_allowance

    spec = {"targets": [{"name": "m", "kind": "managed", "start_timeout": 600, "quiesce": {"enabled": True,
                                                                                         "timeout": 3600}},
                        {"name": "d", "kind": "dsn", "quiesce": {"enabled": False, "timeout": 300}}],
            "data": {"tables": 4, "table_size": 1_000_000}}
    assert start_allowance(spec, "m") == 600 + 3600 + PREPARE_FLOOR_S + 400
    assert start_allowance(spec, "d") == PREPARE_FLOOR_S + 400
    # Before "measuring": the start allowance + warm-up + duration + grace; after: warm-up +
    # duration + grace from the warm-up's start, however long the start took.
    assert deadline(1000.0, None, 60, 500, 10) == 1570
    assert deadline(1000.0, 1900.0, 60, 500, 10) == 1970
    assert deadline(1000.0, 1010.0, 60, 500, 10) == 1080
