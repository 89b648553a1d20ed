"""The one rule for a service or tool a test needs but this machine lacks: skip locally, fail
under CI=true, so a missing service never turns CI green."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


def missing(problem: str) -> NoReturn:
    """Skip the test saying ``problem``; under CI=true fail it instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(problem, pytrace=False)
    pytest.skip(problem)


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def require_service(name: str, host: str, port: int) -> None:
    """Go on when ``name`` answers at host:port; otherwise the rule above."""
    if not reachable(host, port):
        missing(f"{name} is not reachable at {host}:{port} (run deploy/ensure-services)")
