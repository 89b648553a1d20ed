"""The spec's ignore_errors (sysbench's --mysql-ignore-errors): parsed, carried to the runs, applied."""

from __future__ import annotations

import pytest

from services.common.spec import ignore_errors as ignore
from services.common.messages.runs import RunSpec
from services.common.messages.codec import decode
from services.common.spec.campaign import CampaignSpec
from services.scheduler import plan


def _spec(**kw) -> CampaignSpec:
    return CampaignSpec(name="e", targets=[{"name": "a", "user": "bench"}], threads=[2], duration=1, workloads=["oltp_read_write"], **kw)


def test_default_is_sysbench_default_list():
    """Without ignore_errors a campaign survives deadlocks, record-changed and lock wait timeouts only."""
    assert _spec().ignore_errors == (1020, 1205, 1213)
    assert not ignore.ignores(_spec().ignore_errors, 1062)


@pytest.mark.parametrize("given, parsed", [
    ("all", "all"), ("ALL", "all"), ([1213, 1062, 1213], (1062, 1213)), ("1213,1062", (1062, 1213)),
    (1062, (1062,)), ([], ()), ("none", ()),
])
def test_ignore_errors_takes_codes_or_all_as_sysbench_does(given, parsed):
    """A list of codes, one code, sysbench's comma-separated text or "all"; duplicates and order do not matter."""
    assert _spec(ignore_errors=given).ignore_errors == parsed


@pytest.mark.parametrize("bad", ["some", "1213,x", [True], [0], [70000], {"a": 1}])
def test_ignore_errors_refuses_what_is_not_error_codes(bad):
    """Anything but "all" or MySQL error codes (1..65535) is a spec error."""
    with pytest.raises(ValueError, match="ignore_errors"):
        _spec(ignore_errors=bad)


def test_run_specs_carry_a_non_default_list_and_leave_the_default_out():
    """The default stays out of run messages (older workers accept them); any other list travels and decodes back."""
    default = plan.run_specs(_spec(), "c", now=0.0)[0]
    assert default.ignore_errors is None and default.ignored_errors == ignore.DEFAULT
    assert b"ignore_errors" not in default.encode()
    custom = plan.run_specs(_spec(ignore_errors=[1062, 1213]), "c", now=0.0)[0]
    back = decode(custom.encode(), (RunSpec,))
    assert back.ignored_errors == (1062, 1213)
    every = decode(plan.run_specs(_spec(ignore_errors="all"), "c", now=0.0)[0].encode(), (RunSpec,))
    assert every.ignored_errors == "all" and ignore.ignores(every.ignored_errors, 1062)
