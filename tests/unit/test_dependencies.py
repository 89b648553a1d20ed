"""Dependencies: pyproject gives ranges (a library pins none), requirements-lock.txt the exact
versions the suite runs against, and `make venv` installs with the lock as constraints."""

from __future__ import annotations

import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.unit.test_import_contracts import LINT

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements-lock.txt"


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]


def _lock() -> dict[str, Version]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements-lock.txt: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_pyproject_gives_ranges_and_the_lock_pins_a_version_inside_each():
    """No dependency is pinned with == in pyproject, each has an upper bound, and the lock's
    version of it is one its range accepts."""
    pins = _lock()
    for req in _requirements():
        ops = {s.operator for s in req.specifier}
        assert "==" not in ops and "<" in ops, f"{req}: a range with an upper bound, not a pin"
        assert canonicalize_name(req.name) in pins, f"{req.name} is not in requirements-lock.txt"
        assert pins[canonicalize_name(req.name)] in req.specifier, f"the lock's {req.name} is outside {req}"


def test_the_connector_stays_on_the_minor_whose_c_extension_loads_on_debian_12():
    """mysql-connector-python 9.5.x only: 26.x falls back to pure Python on Debian 12's OpenSSL."""
    (req,) = [r for r in _requirements() if r.name == "mysql-connector-python"]
    assert Version("9.5.0") in req.specifier and Version("9.5.9") in req.specifier
    assert Version("9.6.0") not in req.specifier and Version("26.0.0") not in req.specifier


def test_the_venv_runs_the_locked_versions():
    """Every locked package installed here, in the venv or beside it in .venv/lint (import-linter's
    folder), is at its locked version, once (make venv installs both with -c)."""
    wrong = []
    pins = _lock()
    for name, version in pins.items():
        try:
            have = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
        if have != version:
            wrong.append(f"{name} {have} (locked {version})")
    lint = [(canonicalize_name(d.metadata["Name"]), Version(d.version)) for d in metadata.distributions(path=[str(LINT)])]
    assert lint, f"nothing installed in {LINT} (make venv)"
    for name, have in lint:
        if pins.get(name) != have:
            wrong.append(f"{LINT.name}/{name} {have} (locked {pins.get(name)})")
    assert len({name for name, _ in lint}) == len(lint), f"two versions of a package in {LINT}: {sorted(lint)}"
    assert not wrong, "not the locked versions: " + ", ".join(wrong)


def test_import_linter_is_installed_off_the_services_path_within_its_range():
    """make venv installs import-linter into .venv/lint with the lock as constraints, and the lock's
    version is one the Makefile's range accepts."""
    out = subprocess.run(["make", "-n", "-B", "venv"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    [line] = [ln for ln in out.splitlines() if "--target .venv/lint" in ln]
    assert "pip install -q -c requirements-lock.txt --target .venv/lint" in line, line
    req = Requirement(line.rsplit(" ", 1)[1].strip("'"))
    assert req.name == "import-linter" and "<" in {s.operator for s in req.specifier}, line
    assert _lock()[canonicalize_name(req.name)] in req.specifier, f"the lock's import-linter is outside {req}"


def test_make_venv_installs_with_the_lock_as_constraints():
    """`make venv` installs the package and its test extras constrained to the lock."""
    out = subprocess.run(["make", "-n", "-B", "venv"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "pip install -q -c requirements-lock.txt -e '.[test]'" in out
