"""The parts of a run split over load hosts in the real results DB (its own database; migrations
17, 19 and 28): a part waits in run_parts across a collector restart (a new connection), the merge is
stored as the run's one result, a part delivered again afterwards adds nothing, and each part is
bound to the worker that took it."""

from __future__ import annotations

import secrets

import mysql.connector
import pytest
from structlog.testing import capture_logs

from services.collector.part_intake import part_of_a_split_run, spoils_a_merge, store_part
from services.common.errors import StoreRefused
from services.common.messages.events import RunEvent
from services.scheduler import plan
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.common.store.takers import Claim, DeadLetterFrom, Taker

from tests.unit.consumer_fixtures import SPEC, runs
from tests.unit.test_parts import part_result

pytestmark = pytest.mark.integration


@pytest.fixture
def db_settings(results_db):
    return results_db


def test_parts_wait_across_a_restart_and_merge_into_one_stored_result(db_settings):
    planned = runs("c1")
    a, b = part_result(0, 2, [1000.0] * 10, tx=100), part_result(1, 2, [3000.0] * 10, tx=50)
    with Store(db_settings).open() as store:
        store.campaigns.record("c1", SPEC, planned)
        assert store_part(store, a) is None, "part 0 alone is kept, not stored as the run's result"
        assert store.results.get(a.run_id) is None
    with Store(db_settings).open() as store:  # a collector restarted in between
        merged = store_part(store, b)
        assert merged is not None and merged.totals.transactions == 150
        stored = store.results.get(a.run_id)
        assert stored == merged and [p.worker for p in stored.parts] == ["w0", "w1"]
        # Part 1 delivered again (the ack was lost): ignored, the run keeps its one result.
        assert store_part(store, b) is None
        assert store.results.count(a.run_id) == 1
        [(state,)] = store.db.rows("SELECT state FROM runs WHERE run_id=%s", (a.run_id,))
        assert state == "done"
        assert store.db.rows("SELECT COUNT(*) FROM run_parts WHERE merged_at IS NULL")[0][0] == 0


def test_a_late_part_of_another_group_leaves_the_group_in_flight_whole(db_settings):
    """Part 0 of group g1 waits; part 0 of an older group g0 arrives late (redelivered): it is
    kept apart, and part 1 of g1 still completes g1's merge (migration 19's key)."""
    planned = runs("c1")
    a, b = part_result(0, 2, [1000.0] * 10, tx=100, group="g1"), part_result(1, 2, [3000.0] * 10, tx=50, group="g1")
    late = part_result(0, 2, [9000.0] * 10, tx=7, group="g0")
    with Store(db_settings).open() as store:
        store.campaigns.record("c1", SPEC, planned)
        assert store_part(store, a) is None
        assert store_part(store, late) is None
        merged = store_part(store, b)
        assert merged is not None and merged.totals.transactions == 150
        assert {p.group for p in merged.parts} == {"g1"}
        rows = store.db.rows("SELECT part_group, part_index, merged_at IS NULL FROM run_parts ORDER BY 1, 2")
        assert rows == [("g0", 0, 1), ("g1", 0, 0), ("g1", 1, 0)]


def test_each_part_of_a_split_run_is_bound_to_its_own_taker(db_settings):
    """Migration 28 in the real results DB: a part's first claim binds it; another worker's claim of
    it is refused until a later attempt takes it over; only a part's taker delivers that part; a
    failure or dead letter of the run is taken only from one of its parts' takers."""
    split = parse_spec("name: split\ntargets: [{name: A, user: bench, database: a}]\n"
                       "workloads: [oltp_point_select]\nthreads: [4]\nduration: 10s\nload_hosts: 2\n")
    run = plan.run_specs(split, "c2", now=1.0)[0]
    a, b, c = Taker("worker-a", "w0"), Taker("worker-b", "w1"), Taker("worker-c", "w9")

    def event(who: Taker, part: int | None, attempt: int = 1, at: float = 1000.0) -> RunEvent:
        return RunEvent(run_id=run.run_id, campaign_id="c2", state="running", worker=who.worker,
                        attempt=attempt, at=at, part=part)

    def part(index: int, worker: str):
        return part_result(index, 2, [1000.0] * 10, worker=worker).model_copy(
            update={"run_id": run.run_id, "campaign_id": "c2", "cell": run.cell, "repetition": run.repetition})

    with Store(db_settings).open() as store:
        store.campaigns.record("c2", split, plan.run_specs(split, "c2", now=1.0), publisher="scheduler")
        assert store.runs.claim(event(c, None), c) is Claim.REFUSE, "a split run is claimed part by part"
        # ... but a worker of an earlier version (no part named) leaves the run to the reaper, not pending.
        assert store.runs.binding(run.run_id).state == "running"
        assert store.runs.claim(event(a, 0), a) is Claim.BIND
        assert store.runs.claim(event(b, 1), b) is Claim.BIND
        assert store.runs.claim(event(c, 1), c) is Claim.REFUSE, "part 1 is b's"
        assert store.runs.claim(event(a, 5), a) is Claim.REFUSE, "the run has 2 parts"
        with capture_logs() as logged:
            assert not part_of_a_split_run(store, part(1, c.worker), c), "c took no part"
            assert not part_of_a_split_run(store, part(0, b.worker), b), "part 0 is a's"
        assert [e["reason"] for e in logged if e["event"] == "result_refused"] == ["another worker took this part"] * 2
        assert part_of_a_split_run(store, part(1, b.worker), b)
        assert store.runs.binding(run.run_id).part_takers == {a, b}
        # b's worker restarted and took part 1 again: the takeover rule counts b's connections from then.
        assert store.runs.claim(event(b, 1, attempt=2, at=1500.0), b) is Claim.TAKER
        assert store.runs.binding(run.run_id, 1).claimed_at == 1500.0
        assert not store.runs.fail(run.run_id, "c2", "forged", by=DeadLetterFrom(c.user, run_spec=True))
        # Part 1 goes back to the queue (b's connection died) and to c at its third attempt.
        assert store.runs.claim(event(c, 1, attempt=3, at=2000.0), c) is Claim.RETAKE
        bound = store.runs.binding(run.run_id, 1)
        assert (bound.taker, bound.attempt, bound.claimed_at) == (c, 3, 2000.0)
        assert not part_of_a_split_run(store, part(1, b.worker), b), "b no longer holds part 1"
        assert part_of_a_split_run(store, part(1, c.worker), c)
        assert store.runs.fail(run.run_id, "c2", "part 1 gave up", by=DeadLetterFrom(c.user, run_spec=True))


def test_a_part_of_a_run_never_planned_is_refused(db_settings):
    with Store(db_settings).open() as store:
        with pytest.raises(StoreRefused, match="no run .* was planned"):
            store.parts.keep(part_result(0, 2, [1000.0]))



def test_parts_preparing_one_database_at_once_load_it_once(mariadb_params):
    """Two parts of a split run prepare the same target at the same moment: under the prepare
    lock one loads the tables, the other finds them ready."""
    import threading

    from services.common.spec.workloads import DataShape, WorkloadSpec
    from services.worker import prepare
    from services.worker.target.connect_params import ConnectParams

    params = ConnectParams(**mariadb_params, database=f"bf_test_parts_{secrets.token_hex(3)}")
    data = DataShape(tables=2, table_size=2000)
    outcomes: list[bool] = []
    errors: list[BaseException] = []

    def part() -> None:
        try:
            with prepare.prepare_lock(params, timeout_s=60):
                outcomes.append(prepare.ensure_workload_tables(params, data, WorkloadSpec(name="oltp_read_only")))
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    try:
        threads = [threading.Thread(target=part) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert sorted(outcomes) == [False, True]
    finally:
        conn = mysql.connector.connect(**mariadb_params)
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{params.database}`")
        conn.close()


def test_a_part_that_never_joined_fails_the_run_only_while_it_has_no_result(db_settings):
    """A part that met no partner (``parts`` empty) is stored as the run's failure when the run
    has none; delivered again after the run failed whole, it changes nothing."""
    planned = runs("c1")
    bad = part_result(1, 2, [1000.0], status="failed")
    lone = bad.model_copy(update={"part": None, "parts": [], "error": "load_hosts part 1 (w9): nobody joined"})
    with Store(db_settings).open() as store:
        store.campaigns.record("c1", SPEC, planned)
        assert not spoils_a_merge(store, lone)
        store.results.store(lone)
        assert store.results.get(lone.run_id).parts == []
        failed = store_part(store, part_result(0, 2, [1000.0], status="failed", group="g2"))
        assert failed is None, "the run already has its failure"
        assert spoils_a_merge(store, lone)
        assert store.results.get(lone.run_id).error == "load_hosts part 1 (w9): nobody joined"
