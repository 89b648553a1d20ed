"""A campaign as one portable, versioned JSON file (`collector export` / `collector import`): the
campaign row with its spec, every run's plan and state, and every whole stored result (series,
latency histograms, server figures), so another results DB holds the same campaign.

Version history of ``schema``:
  benchfleet.campaign-export/1: campaign, runs, results (each a ``benchfleet.result/1`` message).
    Its spec is the public one (CampaignSpec.public): no password_env/password_file; files
    written before that still import, without them. Its results' secret-named server options
    and variables read "hidden" (ServerReport.public), also in files written before.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from services.common.errors import ExportFileError
from services.common.messages.base import Record
from services.common.messages.results import RunResult
from services.common.spec.campaign import CampaignSpec
from services.common.spec.fields import STORED, shown
from services.common.spec.stored import upgrade

EXPORT_SCHEMA = "benchfleet.campaign-export/1"
#: A run in one of these states has its final word (store_campaigns.FINAL_STATES); only such runs travel.
FINAL_RUN_STATES = ("done", "failed", "cancelled")



class ExportedCampaign(Record):
    """The campaign's row in the results DB."""

    campaign_id: str = Field(min_length=1, max_length=128)
    name: str
    spec: CampaignSpec
    spec_hash: str
    pool: str
    baseline: str
    total_runs: int
    state: str
    created_at: float
    idempotency_key: str | None = None

    @field_validator("spec", mode="before")
    @classmethod
    def _older_spec(cls, v: object) -> object:
        # An export of a campaign recorded by an earlier spec model imports like the campaign reads.
        return upgrade(v)

    @field_validator("spec")
    @classmethod
    def _public_spec(cls, v: CampaignSpec) -> CampaignSpec:
        # An export is shared like a report and never re-run: where the targets' passwords are kept
        # on the workers (password_env, password_file) stays out of it, and out of what it imports.
        return v.public()


class ExportedRun(Record):
    """One planned run: its cell, repetition, and the state it reached."""

    run_id: str = Field(min_length=1, max_length=255)
    seq: int
    target: str
    workload: str
    threads: int
    repetition: int
    state: str
    attempts: int = 0
    worker: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None
    updated_at: float


class CampaignExport(Record):
    """Everything the results DB knows of one campaign."""

    schema_: Literal["benchfleet.campaign-export/1"] = Field(EXPORT_SCHEMA, alias="schema")
    campaign: ExportedCampaign
    runs: list[ExportedRun]
    results: list[RunResult]

    @field_validator("results")
    @classmethod
    def _public_results(cls, v: list[RunResult]) -> list[RunResult]:
        # Results stored before the worker hid secret-named options and variables still hold their
        # values; an export (and what it imports) shows them hidden, like its spec.
        return [r.model_copy(update={"server": r.server.public()}) for r in v]

    def encode(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=1) + "\n"

    def unfinished(self) -> str | None:
        """Why the campaign cannot travel yet (runs still pending or running), or None. Imported,
        such runs would wait for a worker of the other fleet, or be reaped as their worker vanished."""
        waiting = [r for r in self.runs if r.state not in FINAL_RUN_STATES]
        if not waiting:
            return None
        counts = {state: sum(1 for r in waiting if r.state == state) for state in dict.fromkeys(r.state for r in waiting)}
        return (f"campaign {self.campaign.campaign_id} is not finished (" +
                ", ".join(f"{n} {state}" for state, n in counts.items()) +
                " runs): export it once every run has its final state (or `scheduler cancel` it first)")


#: How deep an export's values may nest: a real one holds a spec's server options at five levels;
#: far deeper is a file made to exhaust the reader's stack.
MAX_DEPTH = 32


def too_deep(data: object, limit: int = MAX_DEPTH) -> str | None:
    """The path of the first value of ``data`` nested deeper than ``limit`` levels, or None;
    walked without recursion, so no depth of input can exhaust the stack."""
    # Each entry keeps its parent's entry, not a path string: a path is spelled only when needed.
    stack: list[tuple[object, tuple | None, int]] = [(data, None, 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > limit:
            keys: list[str] = []
            while where is not None:
                where, key = where
                keys.append(f"[{key}]" if isinstance(key, int) else "." + shown(str(key), 20))
            return "".join(reversed(keys)).lstrip(".")
        if isinstance(value, dict):
            stack.extend((v, (where, k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (where, i), depth + 1) for i, v in enumerate(value))
    return None


def decode_export(text: str | bytes, name: str) -> CampaignExport:
    """The export in ``text`` (the file ``name``); ExportFileError naming the field that is wrong."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ExportFileError(f"{name}: not a campaign export: nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ExportFileError(f"{name}: not JSON: {e}") from None
    deep = too_deep(data)
    if deep is not None:
        raise ExportFileError(f"{name}: {shown(deep, 80)}: nested deeper than {MAX_DEPTH} levels; "
                              "not a campaign export")
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != EXPORT_SCHEMA:
        raise ExportFileError(f"{name}: schema: {schema!r} is not a campaign export (expected {EXPORT_SCHEMA})")
    try:
        # A recorded campaign: its spec is read back as the results DB reads it (fields.STORED).
        export = CampaignExport.model_validate(data, context=STORED)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ExportFileError(f"{name}: {where}: {err['msg']}") from None
    wrong = [r.run_id for r in export.results if r.campaign_id != export.campaign.campaign_id]
    if wrong:
        raise ExportFileError(f"{name}: results: run {wrong[0]} belongs to another campaign")
    # A file written before exports were refused for unfinished campaigns.
    if (why := export.unfinished()) is not None:
        raise ExportFileError(f"{name}: runs: {why}")
    return export
