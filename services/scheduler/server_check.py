"""Checking managed targets' option names against their binary before a campaign is published.

Where the scheduler host has the binary, a typo (`key_cache_segmnts`) fails `validate` and
`submit` with exit 2 and the option's name and line; where it does not, the worker checks the
same way before it starts the server and fails the run with the same message.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from services.common import server_binary
from services.common.spec import CampaignSpec, ManagedTarget
from services.common.specfile import FieldError, SpecError, _line_index, _lookup_line


def check_managed(spec: CampaignSpec, source: str) -> list[str]:
    """Raise SpecError naming every unknown option; return notes about targets whose binary
    is not on this host (checked by the worker instead)."""
    try:
        lines = _line_index(Path(source).read_text())
    except OSError:
        lines = {}
    errors: list[FieldError] = []
    notes: list[str] = []
    for i, t in enumerate(spec.targets):
        if not isinstance(t, ManagedTarget):
            continue
        try:
            binary = server_binary.resolve(t)
            problems = server_binary.option_errors(t, binary)
        except (server_binary.BinaryNotFound, OSError, subprocess.SubprocessError) as e:
            notes.append(f"targets[{i}] ({t.name}): options not checked here, the worker checks them: {e}")
            continue
        for name, message in problems:
            loc = ("targets", i, "options", name)
            errors.append(FieldError(f"targets[{i}].options.{name}", message, _lookup_line(lines, loc)))
    if errors:
        raise SpecError(source, errors)
    return notes
