"""Checking managed targets' option names before a campaign is published.

`validate`, `plan` and `submit` check names against the server installed on the scheduler's
host (server_binary.system_binary, a trusted path), never against a binary a spec names: a spec
comes from whoever may submit, and running its binary, even for `--help`, runs its code. A
target that names its own binary or basedir is checked by the worker, against the binary it
will run, before it starts the server (the same message then fails the run).
"""

from __future__ import annotations

import subprocess

from services.common import server_binary
from services.common.spec import CampaignSpec, ManagedTarget
from services.common.specfile import FieldError, SpecSource


def check_managed(spec: CampaignSpec, source: SpecSource) -> tuple[list[FieldError], list[str]]:
    """An error for every unknown option, and notes about targets whose options are left to
    the worker (a target's own build, or no server installed here)."""
    errors: list[FieldError] = []
    notes: list[str] = []
    for i, t in enumerate(spec.targets):
        if not isinstance(t, ManagedTarget) or not t.options:
            continue
        if t.binary or t.basedir:
            notes.append(f"targets[{i}] ({t.name}): options not checked here (the scheduler runs no binary a "
                         "spec names); the worker checks them against its build before starting it")
            continue
        try:
            problems = server_binary.option_errors(t, server_binary.system_binary())
        except (server_binary.BinaryNotFound, OSError, subprocess.SubprocessError) as e:
            notes.append(f"targets[{i}] ({t.name}): options not checked here, the worker checks them: {e}")
            continue
        for name, message in problems:
            errors.append(source.error(("targets", i, "options", name), message))
    return errors, notes
