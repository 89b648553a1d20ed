"""What a shared report or export says of secrets and of user text: no password locations
(password_env, password_file) or password-like option values in any format, and a description
shown as text, never as markup, in Markdown."""

from __future__ import annotations

import io
import json
import zipfile

import yaml

from services.common.store.campaign_file import CampaignExport, ExportedCampaign, ExportedRun, decode_export
from services.common.messages.runs import Cell
from services.common.messages.results import RunResult, ServerReport, Totals
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.render import registry
from services.reporting.render.html import render_html_report
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import analyse, render_lines, render_markdown_lines
from services.common.spec.campaign import CampaignSpec
from services.common.spec.fields import STORED

from tests.unit.test_report_formats import run

SECRET_SPEC = """\
name: leaky
description: "<script>alert(1)</script> see [here](http://evil.example/x) <b>bold</b>"
targets:
 - {name: remote, user: bench, host: db.example.com, database: d1, password_env: PW_REMOTE_TARGET}
 - {name: local, user: bench, database: d2, password_file: /srv/benchpw/local.pw}
 - {name: managed, kind: managed, options: {strict_password_validation: 'OFF', server_audit_secret_token: tok-77x}}
workloads: [oltp_point_select]
threads: [1, 4]
duration: 1s
"""
def recorded(text: str) -> CampaignSpec:
    """The spec as a campaign recorded before server options had an allow-list holds it: read
    back (results DB, export), so its password-like options were once possible."""
    return CampaignSpec.model_validate(yaml.safe_load(text), context=STORED)


#: Everything no report or export may show: where passwords are kept, and a secret option's value.
SECRETS = ("PW_REMOTE_TARGET", "/srv/benchpw/local.pw", "local.pw", "password_env", "password_file", "tok-77x")

TARGETS = ("remote", "local", "managed")
#: The managed target's options and their live values, as a result stored by an older worker holds them.
SERVER_OPTIONS = {"strict_password_validation": "OFF", "server_audit_secret_token": "tok-77x"}


def _result(target: str, threads: int, rep: int) -> RunResult:
    cell = Cell(target=target, workload="oltp_point_select", threads=threads)
    result = RunResult(run_id=f"leaky-1.{target}.oltp_point_select.t{threads}.r{rep}", campaign_id="leaky-1",
                       cell=cell, repetition=rep, status="ok", worker="w", host="h", started_at=1.0, ended_at=61.0,
                       measured_s=60.0, totals=Totals(transactions=60000, reads=60000))
    if target != "managed":
        return result
    # model_copy skips validation: the values stay as an older version stored them.
    server = ServerReport(kind="managed").model_copy(update={"options": SERVER_OPTIONS, "variables": SERVER_OPTIONS})
    return result.model_copy(update={"server": server})


RUNS = tuple(run(t, "oltp_point_select", n, rep, 1000.0 * (i + 1) + rep + n, cid="leaky-1",
                 result=_result(t, n, rep))
             for i, t in enumerate(TARGETS) for n in (1, 4) for rep in (1, 2))


def _data(spec) -> CampaignData:
    settings = spec.public_dump()
    settings["campaign_id"] = "leaky-1"
    return CampaignData("leaky-1", spec.name, "finished", TARGETS, "remote", ("oltp_point_select",), (1, 4),
                        settings, RUNS)


def _export(spec) -> CampaignExport:
    runs = [ExportedRun(run_id=r.run_id, seq=i, target=r.target, workload=r.workload, threads=r.threads,
                        repetition=r.repetition, state="done", updated_at=1.0) for i, r in enumerate(RUNS)]
    campaign = ExportedCampaign(campaign_id="leaky-1", name=spec.name, spec=spec, spec_hash="h", pool="p",
                                baseline="remote", total_runs=len(runs), state="finished", created_at=1.0)
    return CampaignExport(campaign=campaign, runs=runs, results=[r.result for r in RUNS])


def _ods_text(blob: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        return "\n".join(z.read(n).decode(errors="replace") for n in z.namelist())


def test_no_report_format_nor_the_export_shows_where_passwords_are_kept():
    """Text, Markdown, HTML, JSON, ODS and the campaign export of a campaign whose targets read
    their passwords from a variable and a file, with a password-like server option (also in its
    results' server options and variables), name neither the variable, the file nor the option's value."""
    spec = recorded(SECRET_SPEC)
    data = _data(spec)
    outputs = {"text": "\n".join(render_lines(analyse(data, ReportOptions(all_tables=True)))),
               "markdown": "\n".join(render_markdown_lines(analyse(data, ReportOptions(all_tables=True))))}
    outputs["html"] = render_html_report(analyse(data, ReportOptions(all_tables=True)))
    outputs["json"] = render_json(analyse(data, ReportOptions(all_tables=True)))
    outputs["ods"] = _ods_text(render_ods(analyse(data, ReportOptions(all_tables=True))))
    outputs["export"] = _export(spec).encode()
    for where, text in outputs.items():
        assert "db.example.com" in text or where == "ods", f"{where} lost the targets"
        shown = {"json": '"server_audit_secret_token": "hidden"',
                 "export": '"server_audit_secret_token": "hidden"'}.get(where, "server_audit_secret_token=hidden")
        assert shown in text, f"{where} does not say the secret option is hidden"
        for secret in SECRETS:
            assert secret not in text, f"{secret} leaked into the {where} output"
    servers = [r["server"] for r in json.loads(outputs["export"])["results"] if r["cell"]["target"] == "managed"]
    assert servers and all(s["options"]["server_audit_secret_token"] == "hidden" and
                           s["variables"]["server_audit_secret_token"] == "hidden" for s in servers)


def test_an_export_imports_into_the_same_reports_without_the_secret_locations():
    """The export of such a campaign decodes; what it imports reports exactly like the original
    (the remote target still shows the verified TLS its runs used) and exports to the same file."""
    spec = recorded(SECRET_SPEC)
    text = _export(spec).encode()
    imported = decode_export(text, "leaky.json")
    remote = imported.campaign.spec.target("remote")
    assert remote.password_env is None and remote.tls_mode == "verify"
    assert imported.encode() == text
    for fmt in ("text", "markdown", "json"):
        r = registry.renderer(fmt)
        opts = r.options(ReportOptions())
        original, again = analyse(_data(spec), opts), analyse(_data(imported.campaign.spec), opts)
        assert r.render_report(original) == r.render_report(again), fmt


def test_an_export_written_with_secret_locations_imports_without_them():
    """A file written before exports dropped password_env/password_file still imports, and the
    campaign it stores no longer names them."""
    spec = recorded(SECRET_SPEC)
    old = _export(spec).model_dump(mode="json", by_alias=True, exclude_none=True)
    old["campaign"]["spec"] = spec.model_dump(mode="json", exclude_none=True)  # as older versions wrote it
    assert "PW_REMOTE_TARGET" in str(old)
    imported = decode_export(json.dumps(old), "old.json")
    assert not any(s in imported.campaign.spec.model_dump_json(exclude_none=True) for s in SECRETS)


def test_markdown_reports_show_a_multi_line_description_as_text():
    """A description's later lines can start no heading, rule or list, and its HTML and links
    stay text; the text report prints it as written (control characters are refused by the spec)."""
    spec = recorded(SECRET_SPEC.replace(
        'description: "<script>alert(1)</script> see [here](http://evil.example/x) <b>bold</b>"',
        'description: "intro\\n# Owned\\n<script>alert(1)</script>\\n[here](http://evil.example/x)\\n---"'))
    md = render_markdown_lines(analyse(_data(spec), ReportOptions()))
    page = "\n".join(md)
    assert "\n# Owned" not in page and "\n\\# Owned" in page and "\n\\---" in page
    assert "<script>" not in page and "\\<script\\>" in page and "\\[here\\](http://evil.example/x)" in page
    text = "\n".join(render_lines(analyse(_data(spec), ReportOptions())))
    assert "intro\n# Owned\n<script>alert(1)</script>" in text


def test_which_option_names_count_as_secrets():
    """Options holding a password, key or token are hidden in reports and exports; tuning options and
    an authentication plugin's name are shown."""
    from services.common.spec.server_options import is_secret_name

    hidden = ["wsrep_sst_auth", "file-key-management-filekey", "server_audit_secret_token", "repl_password"]
    shown = ["key_buffer_size", "default_authentication_plugin", "thread_handling", "innodb_buffer_pool_size"]
    assert [n for n in hidden if not is_secret_name(n)] == [] and [n for n in shown if is_secret_name(n)] == []


def test_markdown_reports_show_underscores_and_numbered_lines_as_written():
    """A description ``_draft_`` is not set in italics and its line ``1. item`` (or ``2) two``)
    starts no numbered list: both show their characters as written; an option name keeps its
    underscores, which start no emphasis inside a word."""
    spec = recorded(SECRET_SPEC.replace(
        'description: "<script>alert(1)</script> see [here](http://evil.example/x) <b>bold</b>"',
        'description: "_draft_ of big_table\\n1. item\\n  2) two"'))
    page = "\n".join(render_markdown_lines(analyse(_data(spec), ReportOptions())))
    assert "\\_draft\\_ of big_table\n1\\. item\n  2\\) two" in page
    assert "strict_password_validation=hidden" in page
    text = "\n".join(render_lines(analyse(_data(spec), ReportOptions())))
    assert "_draft_ of big_table\n1. item\n  2) two" in text
