"""Specs recorded by earlier spec models read back (the compatibility pass), and what cannot be
read is an error naming the campaign and the field."""

from __future__ import annotations

import json

import pytest

from services.common.errors import StoreError
from services.common.store.campaign_file import ExportedCampaign
from services.common.spec.loading import parse_spec
from services.common.spec.stored import read_stored_spec

SPEC = parse_spec("name: old\ndescription: two servers\ntargets:\n  - {name: A, kind: managed}\n"
                  "  - {name: B, kind: managed}\nworkloads: [oltp_point_select]\nthreads: [1]\nduration: 3s\n")


def _old_doc() -> dict:
    """SPEC as the spec model before build: names stored it: binary/basedir on every managed target."""
    doc = json.loads(SPEC.model_dump_json())
    doc["targets"][0].update(binary=None, basedir=None)
    doc["targets"][1].update(binary="/opt/mariadb-10.6/bin/mariadbd", basedir="/opt/mariadb-10.6")
    return doc


def test_a_spec_stored_with_binary_and_basedir_reads_with_the_binary_said():
    """The removed paths are dropped (nulls silently); a path that was set is said in the description."""
    spec = read_stored_spec(json.dumps(_old_doc()), "c-old")
    assert [t.name for t in spec.targets] == ["A", "B"] and spec.targets[1].build is None
    assert spec.description == ("two servers (recorded before build: names; target B binary: "
                                "/opt/mariadb-10.6/bin/mariadbd; target B basedir: /opt/mariadb-10.6)")


def test_an_unreadable_stored_spec_is_a_store_error_naming_the_campaign_and_field():
    doc = _old_doc()
    doc["threads"] = "many"
    with pytest.raises(StoreError, match=r"campaign c-bad: .*threads"):
        read_stored_spec(json.dumps(doc), "c-bad")
    with pytest.raises(StoreError, match="campaign c-bad: its stored spec is not JSON"):
        read_stored_spec("{", "c-bad")


def test_an_export_of_an_old_campaign_imports():
    """An export file written before build: names holds the old spec: it decodes the same way."""
    c = ExportedCampaign(campaign_id="c-old", name="old", spec=_old_doc(), spec_hash="x", pool="default",
                         baseline="A", total_runs=2, state="finished", created_at=1.0)
    assert "binary: /opt/mariadb-10.6/bin/mariadbd" in c.spec.description
