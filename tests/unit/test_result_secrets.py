"""A result's server figures hold no secret: the worker records password-like options and their
live values as "hidden", and an export hides those of results stored before it did."""

from __future__ import annotations

import json
from types import SimpleNamespace

import yaml

from services.common.store.campaign_file import CampaignExport, ExportedCampaign, ExportedRun, decode_export
from services.common.messages.results import RunResult, ServerReport, Totals
from services.common.messages.codec import decode
from services.common.spec.campaign import CampaignSpec
from services.common.spec.fields import STORED
from services.worker.driver.contract import LoadOutcome
from services.worker.target import info, lifecycle
from services.worker.target.connect_params import ConnectParams

SPEC = CampaignSpec.model_validate(yaml.safe_load("""\
name: sst
targets:
 - {name: managed, kind: managed, options: {server_audit_secret_token: tok-77x, key_buffer_size: 8M}}
workloads: [oltp_point_select]
threads: [1]
duration: 1s
"""), context=STORED)  # as recorded before server options had an allow-list, when such an option was possible
#: A password-like option with its value, as a worker before this fix recorded it.
LEAKY = {"server_audit_secret_token": "tok-77x", "key_buffer_size": "8M"}
CLEAN = {"server_audit_secret_token": "hidden", "key_buffer_size": "8M"}


def _server() -> SimpleNamespace:
    build = SimpleNamespace(name="system", version="11.4", server_sha256="ab" * 32)
    return SimpleNamespace(binary="/usr/sbin/mariadbd", build=build, malloc_loaded="glibc", server_cpus=[1],
                           client_cpus=[0], reused=False, start_s=1.0, pid=4242, port=3399,
                           connect_params=lambda: ConnectParams(host="127.0.0.1", port=3399))


def test_the_worker_reports_secret_options_and_their_live_values_hidden():
    """A managed target's report keeps the tuning option's value and shows "hidden" for the
    password-like one, both as the spec set it and as the running server answered."""
    servers = SimpleNamespace(ensure=lambda target, data, cpus: _server())
    session = lifecycle.open_target(servers, SPEC.targets[0], SPEC.data, [0])
    session.identity = info.ServerIdentity("11.4.2-MariaDB", "MariaDB Server",
                                           {"server_audit_secret_token": "tok-77x", "key_buffer_size": "8388608"})
    outcome = LoadOutcome(totals=Totals(transactions=10, reads=100), series=SimpleNamespace(),
                          latency=SimpleNamespace(), errors_by_code={}, warmup_s=0.0, measured_s=1.0,
                          started_at=100.0, ended_at=101.0)
    report = lifecycle.report(session, outcome)
    assert report.options == CLEAN
    assert report.variables == {"server_audit_secret_token": "hidden", "key_buffer_size": "8388608"}
    assert "tok-77x" not in report.model_dump_json()


def test_a_result_from_an_older_worker_is_stored_without_the_secret():
    """The collector decodes a result whose server figures hold the secret's value with it hidden."""
    body = json.dumps({"schema": "benchfleet.result/1", "run_id": "r", "campaign_id": "c",
                       "cell": {"target": "managed", "workload": "oltp_point_select", "threads": 1},
                       "repetition": 1, "status": "ok", "worker": "w", "host": "h", "started_at": 1.0,
                       "ended_at": 2.0, "server": {"kind": "managed", "options": LEAKY, "variables": LEAKY}})
    server = decode(body).server
    assert server.options == CLEAN and server.variables == CLEAN


def _leaky_result() -> RunResult:
    # model_copy skips validation: the result as an older version stored and reads it back.
    server = ServerReport(kind="managed").model_copy(update={"options": dict(LEAKY), "variables": dict(LEAKY)})
    return RunResult(run_id="sst-1.managed.oltp_point_select.t1.r1", campaign_id="sst-1",
                     cell={"target": "managed", "workload": "oltp_point_select", "threads": 1}, repetition=1,
                     status="ok", worker="w", host="h", started_at=1.0, ended_at=2.0).model_copy(
        update={"server": server})


def _export(result: RunResult) -> CampaignExport:
    run = ExportedRun(run_id=result.run_id, seq=0, target="managed", workload="oltp_point_select", threads=1,
                      repetition=1, state="done", updated_at=1.0)
    campaign = ExportedCampaign(campaign_id="sst-1", name="sst", spec=SPEC, spec_hash="h", pool="p",
                                baseline="managed", total_runs=1, state="finished", created_at=1.0)
    return CampaignExport(campaign=campaign, runs=[run], results=[result])


def test_an_export_hides_the_secret_options_of_a_stored_result():
    """The export of a result holding a password-like option's value says "hidden" in its server
    options and variables, and a file written before that imports with the value hidden."""
    result = _leaky_result()
    assert result.server.options == LEAKY  # the stored result still holds it
    text = _export(result).encode()
    assert "tok-77x" not in text
    exported = json.loads(text)["results"][0]["server"]
    assert exported["options"] == CLEAN and exported["variables"] == CLEAN
    old = json.loads(text)
    old["results"][0]["server"]["options"] = old["results"][0]["server"]["variables"] = LEAKY
    imported = decode_export(json.dumps(old), "old.json").results[0].server
    assert imported.options == CLEAN and imported.variables == CLEAN
