"""The compiled load core (services/worker/driver/native/csrc), built by the project's normal
`pip install`; everything else about the package is in pyproject.toml.

It needs a C compiler, Python's headers and MariaDB Connector/C's (Debian: gcc, libc6-dev,
python3-dev, libmariadb-dev; `deploy/ensure-services build` installs them)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup

SRC = Path("services/worker/driver/native/csrc")


def _mariadb_flags() -> tuple[list[str], list[str]]:
    """Compiler and linker flags for libmariadb, from mariadb_config when it is installed."""
    tool = shutil.which("mariadb_config")
    if tool is None:
        # Debian's libmariadb-dev layout; a missing header fails the build with its name.
        return ["-I/usr/include/mariadb"], ["-lmariadb"]
    cflags = subprocess.run([tool, "--include"], check=True, capture_output=True, text=True).stdout
    libs = subprocess.run([tool, "--libs"], check=True, capture_output=True, text=True).stdout
    return shlex.split(cflags), shlex.split(libs)


cflags, libs = _mariadb_flags()
core = Extension(
    "services.worker.driver.native._core",
    sources=sorted(str(p) for p in SRC.glob("*.c")),
    depends=sorted(str(p) for p in SRC.glob("*.h")),
    extra_compile_args=[*cflags, "-O2", "-std=gnu11", "-Wall", "-Wno-unused-function",
                        # Each float operation rounded as Python rounds it, so draws agree.
                        "-ffp-contract=off"],
    extra_link_args=libs,
)

setup(ext_modules=[core])
