"""What every report command shares: its flags as report options."""

from __future__ import annotations

import argparse
from dataclasses import fields

from services.reporting.options import ReportOptions


def options(args: argparse.Namespace) -> ReportOptions:
    """The report options a subcommand's flags set (each flag's dest is the option's name)."""
    given = {f.name: getattr(args, f.name) for f in fields(ReportOptions) if hasattr(args, f.name)}
    return ReportOptions(**given)
