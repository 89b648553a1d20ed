"""Every example spec validates as `scheduler validate` checks it: the spec model, the option
names against this host's server (when it has one), and each build: against an announcement
holding the builds the example names."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from services.common.messages.builds import BuildInfo
from services.common.config import settings_from
from services.common.messages.announcements import WorkerBuilds
from services.common.spec.targets import ManagedTarget
from services.common.spec.loading import load_spec_source
from services.scheduler import preflight

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.yaml"))


def test_there_are_examples_naming_builds():
    """The builds and allocator examples exist and name registered builds, not paths."""
    names = {p.name for p in EXAMPLES}
    assert {"builds.yaml", "allocators.yaml", "quickstart.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_example_validates(path):
    spec, source = load_spec_source(str(path))
    named = sorted({t.build for t in spec.targets if isinstance(t, ManagedTarget) and t.build})
    seen: list[str] = []

    def announcements(settings, pool):
        seen.append(pool)
        # As a running worker announced it: just now (older ones expire, BENCHFLEET_ANNOUNCE_TTL_S).
        return [WorkerBuilds(worker="w", host="h", pool=pool, at=time.time(), builds=[
            BuildInfo(name=n, version="10.11.18-MariaDB", server_sha256="0" * 64, source="debian") for n in named])]

    preflight.check(spec, settings_from(None), source, announcements=announcements)
    assert seen == ([spec.pool] if named else [])
