"""The submit transaction with the real results DB (its own database) and the in-memory bus: the
ledger's SQL (lock, duplicate check, record, delete) does what the unit tests assume."""

from __future__ import annotations


import pytest

from services.common.errors import BusError
from services.common.store import Store
from services.common.store.campaigns import SUBMIT_LOCK, Duplicate, default_key, spec_hash
from services.common.bus.stub import StubBroker
from services.scheduler.submit import StoreLedger, Submitted, submit

from tests.unit.consumer_fixtures import SPEC, result, runs

pytestmark = pytest.mark.integration


@pytest.fixture
def store(results_db):
    st = Store(results_db).open()
    yield st
    st.close()


def lock_is_free(store: Store) -> bool:
    return bool(store.db.rows("SELECT IS_FREE_LOCK(%s)", (SUBMIT_LOCK,))[0][0])


def go(broker: StubBroker, store: Store, campaign_id: str) -> Submitted | Duplicate:
    key = default_key(spec_hash(SPEC))
    with broker.bus("scheduler") as bus:
        return submit(StoreLedger(store), bus, SPEC, campaign_id, runs(campaign_id), key=key, explicit_key=False, force=False)


def test_a_failed_publish_leaves_nothing_in_the_results_db(store):
    """The broker drops mid-publish: the campaign and its runs are gone from the results DB, the
    lock is free, and submitting again records it with every run pending."""
    broker = StubBroker()
    broker.lose_connections(after_publishes=3)
    with pytest.raises(BusError):
        go(broker, store, "units-1")
    assert store.campaigns.get("units-1") is None
    assert store.db.rows("SELECT COUNT(*) FROM runs")[0][0] == 0
    assert lock_is_free(store)
    assert go(broker, store, "units-2") == Submitted("units-2", 8, "default")
    assert store.runs.counts("units-2")["pending"] == 8
    assert len(broker.messages(broker.names.runs_queue("default"))) == 8


def test_the_same_spec_is_refused_while_its_campaign_is_submitted(store):
    """The second submit of the same spec finds the first campaign by its spec hash."""
    broker = StubBroker()
    go(broker, store, "units-1")
    assert go(broker, store, "units-2") == Duplicate("units-1", "submitted")
    assert store.campaigns.get("units-2") is None and lock_is_free(store)


def test_a_failed_remeasurement_never_replaces_an_ok_result(store):
    """A run redelivered after a fault is measured again: a failed (or cancelled) measurement leaves
    the stored ok result and the run's state alone, and an ok one replaces a stored failure."""
    broker = StubBroker()
    go(broker, store, "keep-1")
    run = runs("keep-1")[0]
    store.results.store(result(run, "ok"))
    store.results.store(result(run, "failed", attempt=3, error="quiesce: Unknown database 'sbtest'"))
    store.results.store(result(run, "cancelled", attempt=3))
    assert store.db.rows("SELECT status, error FROM results WHERE run_id=%s", (run.run_id,)) == [("ok", None)]
    assert store.db.rows("SELECT state FROM runs WHERE run_id=%s", (run.run_id,)) == [("done",)]
    other = runs("keep-1")[1]
    store.results.store(result(other, "failed", error="boom"))
    store.results.store(result(other, "ok", attempt=2))
    assert store.db.rows("SELECT status FROM results WHERE run_id=%s", (other.run_id,)) == [("ok",)]


def test_a_campaign_ends_when_its_last_run_has_its_final_state(store):
    """runs.ended_at (what the collector exports for the collapse alert) is None while a run is
    pending, and the last run's end once every run is done, failed or cancelled."""
    broker = StubBroker()
    go(broker, store, "ends-1")
    planned = runs("ends-1")
    for run in planned[:-1]:
        store.results.store(result(run, "ok"))
    assert store.runs.ended_at("ends-1") is None
    assert store.runs.fail(planned[-1].run_id, "ends-1", "no result: its worker is gone", now=5000.0)
    assert store.runs.ended_at("ends-1") == 5000.0  # the reaped run's end, after the stored ones' (110)
    assert store.runs.ended_at("no-such-campaign") is None
