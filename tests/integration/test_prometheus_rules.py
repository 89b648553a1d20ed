"""promtool on the shipped Prometheus config, rules and rule tests, and on both /metrics endpoints."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from services.collector.prometheus import CollectorMetrics
from services.common.results.histogram import Histogram
from services.common.messages.results import RunResult, Totals
from services.common.messages.runs import RunSpec
from services.common.monitoring.discovery import write_sd_file
from services.worker.driver.contract import Counts, IntervalPercentile, Progress
from services.worker.metrics import WorkerMetrics

from tests.integration.monitoring import need

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"


def promtool(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([need("promtool"), *args], input=stdin, capture_output=True, cwd=cwd, timeout=60)


def test_rules_pass_promtool_check():
    """The alert and recording rules parse and are well formed."""
    out = promtool("check", "rules", str(PROM / "rules.yml"))
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_rule_unit_tests_pass():
    """Collapse (judged by the collector, resolved after its campaign ended), worker-down, stalled-run,
    transaction-stall and error-rate (ignored errors left out) cases fire exactly where expected."""
    out = promtool("test", "rules", "rules.test.yml", cwd=PROM)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_rule_unit_tests_catch_a_wrong_threshold(tmp_path):
    """With the collapse fraction turned down to 0.1%, the seed's collapse no longer fires and the tests say so."""
    rules = yaml.safe_load((PROM / "rules.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == "benchfleet:collapse_fraction":
                rule["expr"] = "vector(0.001)"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    shutil.copy(PROM / "rules.test.yml", tmp_path)
    out = promtool("test", "rules", "rules.test.yml", cwd=tmp_path)
    assert out.returncode != 0
    assert b"BenchfleetThroughputCollapse" in out.stdout + out.stderr


def test_rule_unit_tests_catch_a_wrong_stall_threshold(tmp_path):
    """With the stall threshold at 1 s, the worker with a single stalled second pages too and the tests say so."""
    rules = yaml.safe_load((PROM / "rules.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == "benchfleet:transaction_stall_seconds_threshold":
                rule["expr"] = "vector(1)"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    shutil.copy(PROM / "rules.test.yml", tmp_path)
    out = promtool("test", "rules", "rules.test.yml", cwd=tmp_path)
    assert out.returncode != 0
    assert b"BenchfleetTransactionStall" in out.stdout + out.stderr


def _rule_tests_with(tmp_path, change) -> subprocess.CompletedProcess:
    """promtool's rule tests against the shipped rules with one rule changed by ``change(rule)``."""
    rules = yaml.safe_load((PROM / "rules.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            change(rule)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    shutil.copy(PROM / "rules.test.yml", tmp_path)
    return promtool("test", "rules", "rules.test.yml", cwd=tmp_path)


def test_rule_unit_tests_catch_an_error_alert_counting_ignored_errors(tmp_path):
    """Counting the errors a run ignores (the rule without ignored="false") fires on the ignored 1205
    and the tests say so."""
    def count_all(rule):
        if rule.get("alert") == "BenchfleetErrorRateHigh":
            assert '{ignored="false"}' in rule["expr"]
            rule["expr"] = rule["expr"].replace('{ignored="false"}', "")

    out = _rule_tests_with(tmp_path, count_all)
    assert out.returncode != 0
    assert b"BenchfleetErrorRateHigh" in out.stdout + out.stderr


def test_rule_unit_tests_catch_a_collapse_alert_that_outlives_its_campaign(tmp_path):
    """A collapse alert that never resolves after its campaign ended (an endless grace) pages for the
    campaign that ended a day ago, and the tests say so."""
    def forever(rule):
        if rule.get("record") == "benchfleet:collapse_alert_after_end_seconds":
            rule["expr"] = "vector(1e12)"

    out = _rule_tests_with(tmp_path, forever)
    assert out.returncode != 0
    assert b"BenchfleetThroughputCollapse" in out.stdout + out.stderr


def test_prometheus_config_is_valid_with_discovered_targets(tmp_path):
    """prometheus.yml passes promtool and finds targets written by write_sd_file, without warnings."""
    shutil.copy(PROM / "prometheus.yml", tmp_path)
    shutil.copy(PROM / "rules.yml", tmp_path)
    write_sd_file(tmp_path / "targets", "worker", "127.0.0.1", 9101)
    write_sd_file(tmp_path / "targets", "collector", "127.0.0.1", 9102)
    out = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    text = out.stdout.decode() + out.stderr.decode()
    assert out.returncode == 0, text
    assert "WARNING" not in text


def test_alertmanager_config_is_valid():
    """alertmanager.yml routes everything to the webhook receiver."""
    out = subprocess.run([need("amtool"), "check-config", str(ROOT / "deploy" / "alertmanager" / "alertmanager.yml")],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    config = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text())
    assert config["receivers"][0]["webhook_configs"][0]["url"].startswith("http")


def run_spec(threads: int = 16, target: str = "off", campaign: str = "c1") -> RunSpec:
    run_id = f"{campaign}.{target}.oltp_point_select.t{threads}.r1"
    return RunSpec.model_validate({
        "schema": "benchfleet.run/1", "run_id": run_id, "campaign_id": campaign, "campaign_name": campaign,
        "seq": 1, "total_runs": 4, "cell": {"target": target, "workload": "oltp_point_select", "threads": threads},
        "repetition": 1, "target": {"kind": "dsn", "name": target, "user": "bench"}, "workload": {"name": "oltp_point_select"},
        "data": {}, "duration": 60, "warmup": 5, "seed": 1, "published_at": 0})


def result(run: RunSpec, queries: int) -> RunResult:
    return RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                     status="ok", worker="w1", host="h", started_at=0.0, ended_at=100.0, measured_s=10.0,
                     totals=Totals(transactions=queries // 10, reads=queries))


def snapshot(second: int, tx: int, latency: Histogram | None = None, **counts) -> Progress:
    """A driver's report: cumulative counts since the start of measurement."""
    return Progress("measure", float(second), Counts(transactions=tx, reads=tx * 8, writes=tx, other=tx, **counts),
                    latency=latency)


def fed_worker() -> WorkerMetrics:
    m = WorkerMetrics("w1")
    busy, done = run_spec(), run_spec(threads=32)
    for run in (busy, done):
        m.run_started(run)
    h = Histogram()
    for us in (300, 1200, 9000):
        h.record(us)
    m.observe_progress(busy, snapshot(1, 100, errors=4, errors_by_code={"1205": 3}, latency=h))
    # A second without a completed transaction: the stall counter moves.
    m.observe_progress(busy, dataclasses.replace(snapshot(2, 100, errors=4, errors_by_code={"1205": 3}, latency=h),
                                                 interval_percentile=IntervalPercentile(95.0, 1.5)))
    m.run_finished(done, result(done, 1000))
    return m


def fed_collector() -> CollectorMetrics:
    m = CollectorMetrics()
    m.cell_finished("c1", "off", "oltp_point_select", 16, [1000.0, 1010.0], [100.0, 101.0])
    m.cell_finished("c1", "off", "oltp_point_select", 32, [200.0], [20.0])
    m.observe_result(result(run_spec(), 1000), now=101.0)
    m.queue_depth("benchfleet.runs.default", 3)
    m.results_db_up(True)
    m.campaign_ended("c1", 100.0)
    return m


@pytest.mark.parametrize("make", [fed_worker, fed_collector], ids=["worker", "collector"])
def test_metrics_endpoints_pass_promtool_lint(make):
    """Names, units, types and help of both /metrics endpoints satisfy `promtool check metrics` (no output)."""
    m = make()
    port = m.start_http()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            body = r.read()
    finally:
        m.close()
    assert b"benchfleet_" in body
    if make is fed_collector:
        assert b'benchfleet_campaign_ended_timestamp_seconds{campaign="c1"}' in body
    if make is fed_worker:
        assert b'benchfleet_worker_stalled_seconds_total{campaign="c1",target="off",threads="16"' in body
        assert b"benchfleet_worker_interval_latency_seconds{" in body and b'ignored="true"' in body
    out = promtool("check", "metrics", stdin=body)
    assert out.returncode == 0
    assert out.stdout.decode() + out.stderr.decode() == ""


def test_rule_unit_tests_catch_a_regression_alert_that_fires_for_a_flat_spec(tmp_path):
    """A regression alert that fires on any exported spec (0 included) pages for the flat one, and the
    tests say so."""
    def any_spec(rule):
        if rule.get("alert") == "BenchfleetRegression":
            rule["expr"] = "max by (spec, campaign, since) (benchfleet_regression) >= 0"

    out = _rule_tests_with(tmp_path, any_spec)
    assert out.returncode != 0
    assert b"BenchfleetRegression" in out.stdout + out.stderr
