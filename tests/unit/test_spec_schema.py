"""`scheduler schema`: a standard JSON Schema (Draft 2020-12) that editors accept and that agrees
with the loader on the shipped specs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from services.common.errors import SpecError
from services.common.spec import yaml_input
from services.common.spec.durations import parse_duration
from services.common.spec.fields import DURATION_PATTERN
from services.common.spec.json_schema import DRAFT, nonstandard_keywords, spec_json_schema
from services.common.spec.loading import parse_spec
from services.scheduler import cli
from services.workload.registry import WORKLOADS

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
#: Every spec the project ships: the examples, the studies, and any under deploy/ and bench/.
SHIPPED = sorted(p for pattern in ("examples/**/*.yaml", "studies/**/*.yaml", "deploy/**/*.yaml", "bench/**/*.yaml")
                 for p in ROOT.glob(pattern) if "workloads:" in p.read_text())


def _validator():
    return jsonschema.Draft202012Validator(spec_json_schema())


def _data(text: str):
    return yaml_input.load(text)[0]  # YAML 1.2, as editors read it: `off` stays a name


def _doc_specs() -> list[tuple[str, str]]:
    """Every YAML block of the README and docs/ that the loader accepts as a whole spec."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)):
            try:
                parse_spec(block)
            except SpecError:
                continue
            out.append((f"{page.relative_to(ROOT)}#{i}", block))
    return out


def test_the_schema_is_a_draft_2020_12_schema_with_only_standard_keywords():
    """An editor reads `$schema` and `$id`, and no keyword it would ignore is in the schema."""
    schema = spec_json_schema()
    assert schema["$schema"] == DRAFT and schema["$id"].startswith("urn:benchfleet:spec:")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert nonstandard_keywords(schema) == []


def test_nonstandard_keywords_are_found():
    """The keyword check would see pydantic's misplaced constraints (`gt`, `le`) had they stayed."""
    assert nonstandard_keywords({"properties": {"gt": {"type": "number", "le": 5}}}) == ["/properties/gt/le"]


def test_scheduler_schema_prints_it(capsys):
    """What `scheduler schema` prints is the schema an editor is wired to."""
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == spec_json_schema()


def test_workload_names_are_an_enum():
    """An editor offers the 18 workloads by name."""
    names = spec_json_schema()["$defs"]["WorkloadSpec"]["properties"]["name"]["anyOf"][0]["enum"]
    assert names == sorted(WORKLOADS) and "oltp_point_select" in names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_spec_is_valid_under_the_schema(path):
    """The example and study specs (bare names, `4s`, `server_cpus: 0`, anchors) are not marked red."""
    parse_spec(path.read_text(), str(path))  # the loader accepts it, so the schema must too
    errors = [f"{list(e.path)}: {e.message}" for e in _validator().iter_errors(_data(path.read_text()))]
    assert errors == []


def test_the_shipped_specs_are_found():
    """The parametrised test above is not vacuous: the 13 example and study specs are in it."""
    assert len(SHIPPED) >= 13


@pytest.mark.parametrize("where,text", _doc_specs(), ids=lambda v: v if "#" in str(v) else "")
def test_specs_in_the_docs_are_valid_under_the_schema(where, text):
    """A spec copied from the README or docs into an editor is accepted there too."""
    assert [e.message for e in _validator().iter_errors(_data(text))] == []


GOOD = """
name: s
targets:
  - {name: a, user: bench}
  - {kind: managed, name: 8, server_cpus: 0, client_cpus: 1, options: {thread_handling: pool-of-threads}}
workloads: [oltp_point_select, {name: oltp_read_only, label: ro, options: {point_selects: 5, rand_type: uniform}}]
threads: [1, 8]
duration: 1h30m
warmup: 500ms
duration_by_threads: {8: 2m}
ignore_errors: "1213,1062"
data: {tables: 2, engine: innodb}
"""


def test_a_spec_using_every_short_form_is_accepted_by_both():
    """Durations, numbers as names and CPU lists, case-free engines, sysbench's error list: both agree."""
    parse_spec(GOOD)
    assert list(_validator().iter_errors(_data(GOOD))) == []


@pytest.mark.parametrize("old,new", [
    ("oltp_point_select,", "oltp_point_selct,"),       # a misspelt workload
    ("warmup: 500ms", "warmpu: 500ms"),                  # an unknown field
    ("duration: 1h30m", "duration: 4 parsecs"),          # not a duration
    ("point_selects: 5", "point_selectz: 5"),            # not an option of that workload
    ("point_selects: 5", "point_selects: many"),         # an option of the wrong type
    ("rand_type: uniform", "rand_type: lognormal"),      # not a distribution
    ("threads: [1, 8]", "threads: [1, true]"),           # not a thread count
    ("server_cpus: 0", "server_cpus: zero"),             # not a CPU list
    ("{name: a, user: bench}", "{name: a, user: bench, kind: cloud}"),              # no such target kind
    ("{name: a, user: bench}", "{name: a, user: bench, server_cpus: 0}"),           # a managed field on a dsn target
    ("duration_by_threads: {8: 2m}", "duration_by_threads: {many: 2m}"),
])
def test_bad_specs_are_rejected_by_both(old, new):
    """A spec the loader refuses is marked wrong in the editor too, at the field the loader names."""
    text = GOOD.replace(old, new)
    assert text != GOOD
    with pytest.raises(SpecError):
        parse_spec(text)
    assert list(_validator().iter_errors(_data(text))) != []


@pytest.mark.parametrize("text", ["90s", "15m", "1h30m", "500ms", "2.5", "3", "1 h 30 m", "10S", "0s"])
def test_duration_pattern_accepts_what_the_loader_reads(text):
    """Every duration spelling the loader reads matches the schema's pattern."""
    parse_duration(text)
    assert re.search(DURATION_PATTERN, text)


@pytest.mark.parametrize("text", ["4 parsecs", "s", "1.5.5s", "-3s", "", "1d"])
def test_duration_pattern_refuses_what_the_loader_refuses(text):
    """A text the loader refuses as a duration does not match the schema's pattern either."""
    with pytest.raises(ValueError):
        parse_duration(text)
    assert not re.search(DURATION_PATTERN, text)
