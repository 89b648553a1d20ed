"""Checking managed targets' option names before a campaign is published.

`validate`, `plan` and `submit` check names against the server installed on the scheduler's
host (server_binary.system_binary, a trusted path). A target that names a registered build is
checked by the worker, against that build's binary, before it starts the server (the same
message then fails the run); the scheduler checks only that the pool's workers announced the
build (services/scheduler/preflight.py).
"""

from __future__ import annotations

import subprocess

from services.common.spec import server_binary
from services.common.spec.campaign import CampaignSpec
from services.common.spec.targets import ManagedTarget
from services.common.spec.loading import FieldError, SpecSource


def check_managed(spec: CampaignSpec, source: SpecSource) -> tuple[list[FieldError], list[str]]:
    """An error for every unknown option, and notes about targets whose options are left to
    the worker (a registered build, or no server installed here)."""
    errors: list[FieldError] = []
    notes: list[str] = []
    for i, t in enumerate(spec.targets):
        if not isinstance(t, ManagedTarget) or not t.options:
            continue
        if t.build is not None:
            notes.append(f"targets[{i}] ({t.name}): options not checked here (build {t.build} is on the workers); "
                         "the worker checks them against that build before starting it")
            continue
        try:
            problems = server_binary.option_errors(t, server_binary.system_binary())
        except (server_binary.BinaryNotFound, OSError, subprocess.SubprocessError) as e:
            notes.append(f"targets[{i}] ({t.name}): options not checked here, the worker checks them: {e}")
            continue
        for name, message in problems:
            errors.append(source.error(("targets", i, "options", name), message))
    return errors, notes
