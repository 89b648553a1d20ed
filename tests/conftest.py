"""Shared fixtures: settings for the real services (missing ones follow tests/missing.py's rule:
skip locally, fail under CI=true)."""

from __future__ import annotations

import ast
import functools
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


#: The files that build hosts of their own (network namespaces, tests/integration/hosts.py): each starts
#: a broker, results DB, target servers and installed units per host, so two at once starve each
#: other's rate-limited runs on two cores (a pool once did not finish in 300 s). `make test`'s parallel
#: pass runs them as one unit, one after another in one process, beside the other files.
HOSTS_UNIT = "tests that build hosts"


@functools.lru_cache(maxsize=None)
def builds_hosts(path: Path) -> bool:
    """Whether the test file at ``path`` imports tests/integration/hosts.py."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    hosts = "tests.integration.hosts"
    return any(isinstance(node, ast.ImportFrom) and (node.module == hosts or node.module == "tests.integration"
                                                     and any(a.name == "hosts" for a in node.names))
               or isinstance(node, ast.Import) and any(a.name == hosts for a in node.names)
               for node in ast.walk(tree))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile, with the files that build hosts made one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HostsInOneUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return HOSTS_UNIT if builds_hosts(Path(config.rootpath) / scope) else scope

    return HostsInOneUnit(config, log)


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
