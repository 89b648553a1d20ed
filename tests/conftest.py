"""Shared fixtures: settings for the real services, and the rule that integration tests fail
(not skip) under CI=true when a service is missing."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
import structlog

ROOT = Path(__file__).resolve().parent.parent


def _load_local_env() -> None:
    """Use the settings deploy/ensure-services wrote, unless the environment already has them."""
    env_file = ROOT / "var" / "local.env"
    if not env_file.exists():
        return
    for line in env_file.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            os.environ.setdefault(key, value)


_load_local_env()
# Tests take their settings from the environment alone: never from a settings file that
# deploy/ensure-services wrote for this user or host (their CLI subprocesses inherit this).
os.environ["BENCHFLEET_CONFIG"] = ""

from services.common.config import Settings, settings_from  # noqa: E402


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def require_service(name: str, host: str, port: int) -> None:
    """Skip locally, fail under CI=true: a missing service must never turn CI green."""
    if _reachable(host, port):
        return
    msg = f"{name} is not reachable at {host}:{port} (run deploy/ensure-services)"
    if os.environ.get("CI") == "true":
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(autouse=True)
def _reset_structlog():
    """Each test starts from structlog's defaults, whatever a previous test configured."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def settings() -> Settings:
    return settings_from(None)


@pytest.fixture(scope="session")
def mariadb_params(settings: Settings) -> dict:
    """mysql.connector kwargs for the local MariaDB, without a database."""
    require_service("MariaDB", settings.db_host, settings.db_port)
    return {"host": settings.db_host, "port": settings.db_port, "user": settings.db_user, "password": settings.db_password}


@pytest.fixture(scope="session")
def rabbitmq(settings: Settings) -> Settings:
    from urllib.parse import urlsplit

    u = urlsplit(settings.amqp_url)
    require_service("RabbitMQ", u.hostname or "127.0.0.1", u.port or 5672)
    return settings


@pytest.fixture
def python_bin() -> str:
    return sys.executable
