"""Fixtures the integration tests share: a fleet of their own and a results DB of their own."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import mysql.connector
import pytest

from services.common.config import Settings

from tests.integration.fleet import Fleet
from tests.integration.shared_services import SharedService, restart_after_stop, shared_services
from tests.missing import missing

if TYPE_CHECKING:
    from services.worker.target.managed import ServerManager

MARIADBD = Path("/usr/sbin/mariadbd")


@pytest.fixture(scope="session")
def _shared(settings: Settings) -> list[SharedService]:
    return shared_services(settings)


@pytest.fixture(autouse=True)
def _shared_services_still_up(_shared: list[SharedService]) -> Iterator[None]:
    """An error at the teardown of the test during which a shared service stopped (with its log), after
    starting the service again."""
    up = [s for s in _shared if s.up()]
    yield
    stopped = [s for s in up if not s.up()]
    if stopped:
        pytest.fail("\n\n".join(restart_after_stop(s) for s in stopped), pytrace=False)


@pytest.fixture
def fleet_pool() -> str:
    """The pool the test's fleet serves; a module whose processes use another overrides it."""
    return "itest"


@pytest.fixture
def fleet(rabbitmq: Settings, mariadb_params: dict, settings: Settings, tmp_path: Path,
          fleet_pool: str) -> Iterator[Fleet]:
    """An isolated namespace and results DB for the processes the test starts; every process
    stopped, and the queues and DB removed, afterwards."""
    f = Fleet.create(settings, tmp_path)
    f.pool = fleet_pool
    yield f
    f.teardown()


@pytest.fixture
def results_db(mariadb_params: dict, settings: Settings) -> Iterator[Settings]:
    """Settings naming a results DB of the test's own (the first Store to open it creates it),
    dropped afterwards: these tests reuse campaign names and ids, so they never share one."""
    s = replace(settings, db_name=f"benchfleet_test_{secrets.token_hex(3)}")
    yield s
    conn = mysql.connector.connect(**mariadb_params)
    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{s.db_name}`")
    conn.close()


@pytest.fixture(scope="module")
def managed_dir() -> Iterator[Path]:
    """A managed-servers directory for the test module, so a build's template is made once; under
    /tmp (a unix socket's path is limited to 107 bytes) and traversable by the mysql user."""
    if not MARIADBD.exists():
        missing(f"{MARIADBD} is missing")
    d = Path(tempfile.mkdtemp(prefix="bfm-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def servers(managed_dir: Path) -> Iterator["ServerManager"]:
    """A managed-server manager of the test module's own, its servers stopped afterwards."""
    from services.worker.target.managed import ServerManager

    m = ServerManager(base_dir=managed_dir)
    yield m
    m.close()
