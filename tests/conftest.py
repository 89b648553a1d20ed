"""Shared fixtures: settings for the real services (missing ones follow tests/missing.py's rule:
skip locally, fail under CI=true)."""

from __future__ import annotations

import os
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
# Test targets connect as the results DB's user, and throwaway servers' as root: both hold more
# than a run needs, which a worker refuses unless its operator names the account. The tests'
# workers (in process and started) name them; tests of the refusal set their own list.
os.environ.setdefault("BENCHFLEET_TARGET_PRIVILEGED_USERS", f"root,{os.environ.get('BENCHFLEET_DB_USER', 'root')}")

from services.common.config import Settings, settings_from  # noqa: E402

from tests.missing import require_service  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a `slow` test first, the order otherwise kept: `make test`'s parallel pass hands
    each file whole to one process in this order, and a long file handed out last runs on alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


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
