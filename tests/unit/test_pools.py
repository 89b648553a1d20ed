"""A campaign on several pools: the ``pools`` field, run ids that name their pool, every block run
on every pool, each pool's runs on its own queue, and the "Pools compared" table of the report."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import zipfile

import pytest

from services.common.bus.stub import StubBroker, StubBus
from services.common.errors import UsageError
from services.common.messages.codec import decode
from services.common.messages.runs import Cell, RunSpec, pool_of_run_id, run_id_of
from services.common.results.rows import ResultRow
from services.common.spec.loading import parse_spec
from services.reporting import metrics_catalog as mc
from services.reporting import pools_compared as pc
from services.reporting.analysis import CampaignData
from services.reporting.load import SeveralPools, check_pool, without_pools
from services.reporting.options import ReportOptions
from services.reporting.render import registry
from services.scheduler import plan
from services.scheduler.submit import Submitted, submit
from tests.unit.test_submit import FakeLedger

SPEC_TEXT = """
name: two-platforms
pools: [suse, rhel]
targets: [{name: A, user: bench, database: a}, {name: B, user: bench, database: b}]
workloads: [oltp_write_only]
threads: [4]
duration: 1s
repeat: 3
"""
SPEC = parse_spec(SPEC_TEXT)


def problems(text: str) -> str:
    with pytest.raises(UsageError) as e:
        parse_spec(text)
    return str(e.value)


def test_pools_must_be_two_to_eight_distinct_names():
    assert SPEC.pool_names == ("suse", "rhel")
    assert "pools" in problems(SPEC_TEXT.replace("[suse, rhel]", "[suse]"))
    assert "pools" in problems(SPEC_TEXT.replace("[suse, rhel]", "[" + ", ".join(f"p{i}" for i in range(9)) + "]"))
    assert "repeated: suse" in problems(SPEC_TEXT.replace("[suse, rhel]", "[suse, rhel, suse]"))
    assert "pools" in problems(SPEC_TEXT.replace("[suse, rhel]", "[suse, 'rh el']"))


def test_pools_and_pool_together_are_refused_naming_the_field():
    msg = problems(SPEC_TEXT + "pool: lab\n")
    assert "pools" in msg and "give either pool (lab) or pools (suse, rhel), not both" in msg


def test_a_spec_without_pools_runs_on_its_one_pool():
    one = parse_spec(SPEC_TEXT.replace("pools: [suse, rhel]", "pool: lab"))
    assert one.pool_names == ("lab",)
    ids = [p.run_id for p in plan.expand(one, "c1")]
    assert all(pool_of_run_id(i) is None for i in ids) and "@" not in "".join(ids)


def test_every_block_runs_on_every_pool_in_the_same_order():
    runs = plan.expand(SPEC, "c1")
    assert len(runs) == 2 * 2 * 3  # targets x pools x repetitions
    assert len({r.run_id for r in runs}) == len(runs)
    for rep in (1, 2, 3):
        block = [r for r in runs if r.repetition == rep]
        suse = [r.cell.target for r in block if r.pool == "suse"]
        rhel = [r.cell.target for r in block if r.pool == "rhel"]
        assert suse == rhel and sorted(suse) == ["A", "B"]
        # A block's runs come together, so both pools measure repetition n before n+1.
        assert [r.seq for r in block] == list(range(block[0].seq, block[0].seq + 4))
    assert [pool_of_run_id(r.run_id) for r in runs] == [r.pool for r in runs]
    assert runs[0].run_id.endswith(f".r1@{runs[0].pool}")


def test_a_run_spec_must_name_the_pool_its_id_names():
    spec = plan.run_specs(SPEC, "c1")[0]
    assert spec.pool in ("suse", "rhel") and spec.run_id == run_id_of("c1", spec.cell, 1, spec.pool)
    data = spec.model_dump(by_alias=True)
    data["pool"] = "debian"
    with pytest.raises(ValueError, match="run_id"):
        RunSpec.model_validate(data)
    # A one-pool run leaves the field out, so workers that predate it still read the message.
    assert b'"pool"' not in plan.run_specs(parse_spec(SPEC_TEXT.replace("pools: [suse, rhel]", "")), "c1")[0].encode()


def test_each_pool_gets_its_own_runs_on_its_own_queue():
    broker, ledger = StubBroker(), FakeLedger()
    runs = plan.run_specs(SPEC, "c1")
    with StubBus(broker, "scheduler") as bus:
        outcome = submit(ledger, bus, SPEC, "c1", runs, key="k", explicit_key=False, force=False)
    assert outcome == Submitted("c1", 12, "suse,rhel")
    for pool in ("suse", "rhel"):
        queued = [decode(d.body) for d in broker.messages(broker.names.runs_queue(pool))]
        assert [m.run_id for m in queued] == [r.run_id for r in runs if r.pool == pool]
        assert {m.pool for m in queued} == {pool}
    # Nothing went to the default pool: it was not even declared.
    with pytest.raises(Exception, match="no queue"):
        broker.messages(broker.names.runs_queue("default"))


def test_a_campaign_on_several_pools_is_never_read_as_one():
    with pytest.raises(SeveralPools, match=r"ran on pools suse, rhel: .* --pool \(suse or rhel\)"):
        check_pool("c1", ["suse", "rhel"], None)
    with pytest.raises(SeveralPools, match="--pool: campaign c1 ran on pools suse, rhel, not debian"):
        check_pool("c1", ["suse", "rhel"], "debian")
    with pytest.raises(SeveralPools, match="--pool: campaign c1 ran on one pool"):
        check_pool("c1", None, "suse")
    check_pool("c1", ["suse", "rhel"], "rhel")
    check_pool("c1", None, None)


def _pool_data(pool: str, b_qps: list[float]) -> CampaignData:
    a_qps = [1000.0, 1010.0, 990.0, 1005.0]
    rows = []
    for target, values in (("A", a_qps), ("B", b_qps)):
        for rep, qps in enumerate(values, 1):
            cell = Cell(target=target, workload="oltp_write_only", threads=4)
            rows.append(ResultRow(run_id=run_id_of("c1", cell, rep, pool), campaign_id="c1", target=target,
                                  workload="oltp_write_only", threads=4, repetition=rep, status="ok", qps=qps,
                                  tps=qps / 10, p95_ms=5.0, p99_ms=9.0, measured_s=1.0, error=None))
    return CampaignData(campaign_id="c1", name="two-platforms", state="finished", targets=("A", "B"),
                        baseline="A", workloads=("oltp_write_only",), threads=(4,), runs=tuple(rows))


def test_the_pools_compared_table_names_the_pool_where_b_is_slower():
    per_pool = {"suse": _pool_data("suse", [1002.0, 1004.0, 995.0, 1001.0]),
                "rhel": _pool_data("rhel", [603.0, 598.0, 601.0, 607.0])}
    rows = pc.compared(per_pool, mc.BUILTIN["qps"], 0.05)
    [c] = rows
    assert (c.pool_a, c.pool_b, c.verdict) == ("rhel", "suse", "platform specific")
    text = pc.render_lines(rows, "qps", markdown=False)
    assert text[0] == "Pools compared"
    assert text[2].split() == ["workload", "threads", "target", "pool", "A", "ratio", "A", "pool", "B", "ratio", "B",
                               "B/A", "q", "verdict"]
    assert text[3].split()[:7] == ["oltp_write_only", "4", "B", "rhel", "0.602", "suse", "0.999"]
    assert text[-1] == ("Pools compared (qps): 1 of 1 cell(s) platform specific: B oltp_write_only 4 thr "
                        "rhel 0.602 vs suse 0.999")
    md = pc.render_lines(rows, "qps", markdown=True)
    assert md[0] == "## Pools compared"
    assert "| 4 | B | rhel | 0.602 | suse | 0.999 |" in md[4]
    [row] = pc.as_data(rows)
    assert row["verdict"] == "platform specific" and row["ratio_a"] == pytest.approx(0.602, abs=0.001)


def test_the_same_ratio_on_both_pools_is_no_platform_verdict():
    per_pool = {"suse": _pool_data("suse", [603.0, 608.0, 597.0, 604.0]),
                "rhel": _pool_data("rhel", [603.0, 598.0, 601.0, 607.0])}
    rows = pc.compared(per_pool, mc.BUILTIN["qps"], 0.05)
    assert [c.verdict for c in rows] == ["same on both"]
    assert pc.summary(rows, "qps") == "Pools compared (qps): no cell's ratio differs between pools"


def test_a_series_across_campaigns_leaves_out_campaigns_on_several_pools_and_says_so():
    pools = _pool_data("rhel", [603.0, 598.0, 601.0, 607.0]).runs
    one = tuple(dataclasses.replace(r, run_id=r.run_id.split("@")[0].replace("c1", "c0"), campaign_id="c0")
                for r in pools)
    kept, note = without_pools(one + pools, "history")
    assert kept == list(one)
    assert note is not None and note.startswith("note: history leaves out campaign(s) c1: they ran on several pools")
    assert without_pools(one, "history") == (list(one), None)


def _two_pools() -> pc.PoolsReport:
    return pc.pools_report({"suse": _pool_data("suse", [1002.0, 1004.0, 995.0, 1001.0]),
                            "rhel": _pool_data("rhel", [603.0, 598.0, 601.0, 607.0])}, ReportOptions())


def test_every_format_shows_each_pool_and_the_verdict_of_the_pools_compared():
    p = _two_pools()
    verdict = "Pools compared (qps): 1 of 1 cell(s) platform specific: B oltp_write_only 4 thr rhel 0.602 vs suse 0.999"
    text = registry.renderer("text", "pools").render_pools(p)
    assert text.index("=== Pool suse ===") < text.index("=== Pool rhel ===") < text.index("Pools compared")
    assert text.rstrip().splitlines()[-1] == verdict
    md = registry.renderer("markdown", "pools").render_pools(p)
    assert "# Pool suse" in md and "## Pools compared" in md
    doc = json.loads(registry.renderer("json", "pools").render_pools(p))
    assert set(doc["pools"]) == {"suse", "rhel"} and doc["pools_compared"]["summary"] == verdict
    # CSV: one header with the pool first, each pool's rows under it, then the pools compared.
    rows = list(csv.reader(io.StringIO(registry.renderer("csv", "pools").render_pools(p))))
    assert rows[0][0] == "pool" and {r[0] for r in rows[1:rows.index([])]} == {"suse", "rhel"}
    assert rows[rows.index([]) + 1] == list(pc.HEADER) and rows[-1] == [verdict]
    # ODS: the pools compared first, then each pool's sheets under its name.
    with zipfile.ZipFile(io.BytesIO(registry.renderer("ods", "pools").render_pools(p))) as z:
        content = z.read("content.xml").decode()
    sheets = re.findall(r'table:name="([^"]+)"', content)
    assert sheets[0] == "pools compared" and "suse settings" in sheets and "rhel runs" in sheets
    # HTML: one page, both pools' sections, and no element id twice (links inside a pool reach its own tables).
    page = registry.renderer("html", "pools").render_pools(p)
    assert verdict in page and 'id="pool-suse"' in page and 'id="pool-rhel"' in page
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and "pool-rhel-table-qps_ratio" in ids, ids
    links = re.findall(r' href="#([^"]+)"', page)
    assert "pool-rhel-table-qps_ratio" in links and set(links) <= set(ids)
