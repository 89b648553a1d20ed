"""The drivers' shared contract: Counts add up, pipe messages survive pickling, one call signature."""

from __future__ import annotations

import inspect
import pickle
import typing

import pytest

from services.common.errors import LoadError
from services.common.results.histogram import Histogram
from services.common.spec.campaign import CampaignSpec
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.contract import ConnectParams, Counts, Driver, totals
from services.worker.driver.native.parent import programs_for
from services.worker.driver.native.protocol import Done, Failed, Go, Job, Ready, Seconds, Stop, Tick, merged_kinds
from services.worker.driver.registry import DRIVERS, driver_for


def test_counts_add_field_by_field_and_code_by_code():
    """Counts of two stretches add every count and every error code; neither operand changes."""
    a = Counts(transactions=10, reads=80, writes=20, other=10, errors=1, errors_by_code={"1205": 1, "1213": 2})
    b = Counts(transactions=5, reads=40, ignored_errors=3, reconnects=1, errors_by_code={"1213": 3, "2013": 1})
    total = a + b
    assert (total.transactions, total.reads, total.writes, total.other, total.queries) == (15, 120, 20, 10, 150)
    assert (total.errors, total.ignored_errors, total.reconnects) == (1, 3, 1)
    assert total.errors_by_code == {"1205": 1, "1213": 5, "2013": 1}
    assert a.errors_by_code == {"1205": 1, "1213": 2} and b.errors_by_code == {"1213": 3, "2013": 1}
    assert sum([a, b, b], Counts()) == a.merge(b).merge(b)
    assert totals(total).queries == 150


def test_pipe_messages_survive_pickling():
    """Every message between the native driver's parent and its load processes crosses a pipe intact."""
    h = Histogram()
    for us in (120, 340, 9000):
        h.record(us)
    programs, program_of = programs_for(WorkloadSpec(name="oltp_point_select"), DataShape(), (0, 2), 4, 7)
    job = Job(ConnectParams(host="127.0.0.1", password="pw"), programs, program_of, (0, 2), 4, 7, (1,), rate=10.0,
              index=1, by_kind=True, compress=True)
    done = Done(Counts(transactions=3, reads=3, errors_by_code={"1205": 1}),
                Seconds([2, 1], [2, 1], [0, 0], [], [0, 0], [0, 0]), h, {"read": h}, 12.5, 0.25, None)
    for msg in (job, Ready(), Failed(1049, "Unknown database"), Go(1.0, 2.0, 3.0), Stop(),
                Tick(2, Counts(transactions=4), queue=3)):
        assert pickle.loads(pickle.dumps(msg)) == msg
    back = pickle.loads(pickle.dumps(done))
    assert (back.counts, back.series, back.last_end) == (done.counts, done.series, 12.5)
    assert back.hist.counts == h.counts and back.hist.max_us == h.max_us and back.kinds["read"].total == 3


def test_per_kind_histograms_merge_kind_by_kind():
    """Per-kind histograms of several processes add up per kind, leaving the parts unchanged."""
    r1, r2, w = Histogram(), Histogram(), Histogram()
    r1.record(100)
    r2.record(200)
    w.record(300)
    out = merged_kinds([{"read": r1}, {"read": r2, "write": w}])
    assert (out["read"].total, out["write"].total) == (2, 1)
    assert r1.total == 1


def test_every_spec_driver_is_registered_with_the_one_signature():
    """Each driver a spec may name is registered and takes the Driver protocol's one LoadRequest
    first; anything else it takes is a keyword with a default."""
    names = typing.get_args(CampaignSpec.model_fields["driver"].annotation)
    assert set(DRIVERS) == set(names)
    protocol = list(inspect.signature(Driver.__call__).parameters.values())[1:]  # without self
    assert [(p.name, p.annotation) for p in protocol] == [("request", "LoadRequest")]
    for name, drive in DRIVERS.items():
        first, *extra = inspect.signature(drive).parameters.values()
        assert (first.name, first.kind, first.annotation) == ("request", protocol[0].kind, "LoadRequest"), name
        assert all(q.kind is inspect.Parameter.KEYWORD_ONLY and q.default is not inspect.Parameter.empty
                   for q in extra), name


def test_unknown_driver_name_fails_the_run_naming_the_known_ones():
    """A run spec naming a driver this worker does not have fails with the names it does have."""
    assert driver_for("sysbench") is DRIVERS["sysbench"]
    with pytest.raises(LoadError, match="native, sysbench"):
        driver_for("hammerdb")
