"""Poison bodies for both queues, each with a fragment its dead letter's reason must hold: the
unit tests (in-memory bus) and the integration tests (real RabbitMQ and MariaDB) use the same."""

from __future__ import annotations

import copy
import json
from typing import Any

from services.common.messages.runs import RunSpec

from tests.unit.consumer_fixtures import result

#: Nested this deep, json.loads raises RecursionError (issue 13).
DEEP = 50_000


def _edited(body: bytes, path: str, value: Any) -> bytes:
    doc = json.loads(body)
    node = doc
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    node[last] = copy.deepcopy(value)
    return json.dumps(doc).encode()  # NaN and Infinity come out as the bare tokens a hostile sender writes


def _deep(schema: str) -> bytes:
    return b'{"schema": "' + schema.encode() + b'", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"


def result_bodies(run: RunSpec, other: RunSpec) -> list[tuple[str, bytes, str]]:
    """(name, body, reason fragment): results the collector must dead-letter, for ``run`` (a
    planned run) and ``other`` (a planned run of another cell)."""
    good = result(run).encode()
    unknown = result(run).model_copy(update={"run_id": run.run_id.replace(run.campaign_id, "nosuchcampaign", 1),
                                             "campaign_id": "nosuchcampaign"})
    return [
        ("deep", _deep("benchfleet.result/1"), "nested deeper than"),
        ("huge int", _edited(good, "totals.reads", 10**400), "totals.reads"),
        ("huge float", _edited(good, "measured_s", 1e400), "measured_s: inf is not a finite number"),
        ("NaN", _edited(good, "latency.p99_ms", float("nan")), "latency.p99_ms: nan is not a finite number"),
        ("NaN in a histogram", _edited(good, "latency.histogram", {"max_us": float("nan")}), "latency.histogram.max_us"),
        ("negative totals", _edited(good, "totals.transactions", -5), "totals.transactions"),
        ("unknown run id", unknown.encode(), "no run"),
        ("wrong cell", _edited(good, "cell", json.loads(other.cell.model_dump_json())), "cell."),
    ]


def run_bodies(run: RunSpec) -> list[tuple[str, bytes, str]]:
    """(name, body, reason fragment): run specs a worker must dead-letter without measuring."""
    good = run.encode()
    return [
        ("deep", _deep("benchfleet.run/1"), "nested deeper than"),
        ("huge int", _edited(good, "seq", 10**400), "seq"),
        ("NaN", _edited(good, "duration", float("nan")), "duration: nan is not a finite number"),
        ("infinite", _edited(good, "published_at", float("inf")), "published_at: inf is not a finite number"),
        ("negative", _edited(good, "repetition", -1), "repetition"),
        ("unknown run id", _edited(good, "run_id", "x"), "run_id: 'x' is not the id of its campaign"),
        ("wrong cell", _edited(good, "cell.target", "B"), "cell.target: 'B' is not the run's target"),
        ("wrong threads", _edited(good, "cell.threads", run.cell.threads + 1), "run_id"),
    ]
