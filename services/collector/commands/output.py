"""What every report command shares: its flags as report options, and which formats need --out."""

from __future__ import annotations

import argparse
from dataclasses import fields

from services.reporting.options import ReportOptions
from services.reporting.render.registry import Renderer


def options(args: argparse.Namespace) -> ReportOptions:
    """The report options a subcommand's flags set (each flag's dest is the option's name)."""
    given = {f.name: getattr(args, f.name) for f in fields(ReportOptions) if hasattr(args, f.name)}
    return ReportOptions(**given)


def missing_out(r: Renderer, out: str | None) -> str | None:
    """Why format ``r`` needs ``--out`` when none was given, else None: bytes (a spreadsheet), or
    a page with inlined plots, belong in a file, for `report` and `compare` alike."""
    if (r.to_file or r.plots) and not out:
        return f"--format {r.name} writes a file: give --out FILE"
    return None
